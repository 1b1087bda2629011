// Builds a burst of raw packets for datapath tests: packet i is `len` bytes all equal to
// i (mod 256), addressed to `to`, on entropy value i.
#pragma once

#include <algorithm>
#include <span>

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

}  // namespace spray::test
