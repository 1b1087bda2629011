// Raw packet bursts for datapath tests: building one (packet i is `len` bytes all equal
// to i mod 256, addressed to `to`, on entropy value i), and receiving one.
#pragma once

#include <algorithm>
#include <chrono>
#include <span>
#include <vector>

#include "transport/datapath/datapath.h"

namespace spray::test {

// False when the datapath could not give out.size() buffers.
template <dp::Datapath D>
bool make_burst(D& d, std::span<dp::PacketBuf*> out, const dp::NetAddr& to, uint32_t len) {
  if (d.alloc(out.data(), out.size()) != out.size()) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i]->len = len;
    std::fill(out[i]->data, out[i]->data + len, static_cast<uint8_t>(i));
    out[i]->peer = to;
    out[i]->entropy = static_cast<uint16_t>(i);
  }
  return true;
}

// Receives until `want` packets came or 10 s passed (a peer in another process may still
// be starting). Returns what came; the caller frees it.
template <dp::Datapath D>
std::vector<dp::PacketBuf*> receive(D& d, size_t want) {
  std::vector<dp::PacketBuf*> got(want);
  size_t have = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (have < want && std::chrono::steady_clock::now() < deadline)
    have += d.rx_burst(got.data() + have, want - have);
  got.resize(have);
  return got;
}

}  // namespace spray::test
