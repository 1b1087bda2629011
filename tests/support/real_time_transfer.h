// Two engines over a real datapath (UDP, DPDK, verbs), driven in real time on one
// thread: A sends one message of each size to B, which has a receive posted for each.
// Checks that every message completes with kOk on both sides and arrives byte for byte.
// `mode` is the PDS delivery mode of every send (kRod: in order).
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "transport/datapath/clock.h"
#include "transport/engine/engine.h"

namespace spray::test {

template <dp::Datapath D>
void transfer_in_real_time(D& da, D& db, const std::vector<uint64_t>& sizes,
                           const engine::EngineConfig& config = {},
                           Duration timeout = Duration::seconds(30),
                           pds::Mode mode = pds::Mode::kRud) {
  engine::Engine<D> a(da, config), b(db, config);
  const auto to_b = a.add_peer(db.local_address());
  std::vector<std::vector<uint8_t>> src(sizes.size()), dst(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    src[i].resize(sizes[i]);
    std::iota(src[i].begin(), src[i].end(), static_cast<uint8_t>(i));
    dst[i].assign(sizes[i], 0);
    ASSERT_EQ(b.post_recv({dst[i].data(), sizes[i], i}), Status::kOk);
    ASSERT_EQ(a.send(to_b, src[i].data(), sizes[i], i, {.mode = mode}), Status::kOk);
  }
  size_t sent = 0, received = 0;
  const Time deadline = dp::monotonic_now() + timeout;
  while ((sent < sizes.size() || received < sizes.size()) && dp::monotonic_now() < deadline) {
    a.progress(dp::monotonic_now());
    b.progress(dp::monotonic_now());
    ses::Completion comp;
    while (a.poll_completion(comp)) {
      EXPECT_EQ(comp.status, Status::kOk);
      ++sent;
    }
    while (b.poll_completion(comp)) {
      EXPECT_EQ(comp.status, Status::kOk);
      EXPECT_EQ(comp.length, sizes[comp.context]);
      ++received;
    }
  }
  ASSERT_EQ(sent, sizes.size());
  ASSERT_EQ(received, sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(src[i] == dst[i]) << sizes[i] << " bytes";
}

}  // namespace spray::test
