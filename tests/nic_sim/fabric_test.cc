#include "nic_sim/fabric.h"

#include <gtest/gtest.h>

#include "nic_sim/sim_nic.h"

namespace spray::sim {
namespace {

// Sends `n` packets of `bytes` from host 0 to host 1 with the given entropy values.
// Sends n packets from host `from` to host `to` (0 to 1 unless told).
void send(Fabric& f, uint32_t n, uint32_t bytes, uint16_t ev_base, uint16_t ev_step,
          uint32_t from = 0, uint32_t to = 1) {
  for (uint32_t i = 0; i < n; ++i) {
    dp::PacketBuf* b = nullptr;
    ASSERT_EQ(f.nic(from).alloc(&b, 1), 1u);
    b->len = bytes;
    for (uint32_t k = 0; k < bytes; ++k) b->data[k] = static_cast<uint8_t>(k + i);
    b->peer = dp::NetAddr::sim_host(to);
    b->entropy = static_cast<uint16_t>(ev_base + i * ev_step);
    f.nic(from).tx_burst(&b, 1);
  }
}

// Packets host `to` has received from host `from` by `until`.
uint32_t receive_all(Fabric& f, Time until, uint32_t from = 0, uint32_t to = 1) {
  f.advance_to(until);
  uint32_t n = 0;
  dp::PacketBuf* b[64];
  while (size_t got = f.nic(to).rx_burst(b, 64)) {
    for (size_t i = 0; i < got; ++i) EXPECT_EQ(b[i]->peer, dp::NetAddr::sim_host(from));
    f.nic(to).free(b, got);
    n += static_cast<uint32_t>(got);
  }
  return n;
}

TEST(Fabric, entropy__selects_the_path) {
  FabricConfig c;
  c.paths = 4;
  Fabric f(c);
  send(f, 40, 100, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(1).ps}), 40u);
  for (uint64_t n : f.stats().path_packets) EXPECT_EQ(n, 10u);
  send(f, 40, 100, 2, 4);  // all on path 2
  receive_all(f, Time{Duration::milliseconds(2).ps});
  EXPECT_EQ(f.stats().path_packets[2], 50u);
}

TEST(Fabric, path_down__drops_only_that_path) {
  FabricConfig c;
  c.paths = 2;
  Fabric f(c);
  f.set_path_up(1, false);
  send(f, 10, 100, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(1).ps}), 5u);
  EXPECT_EQ(f.stats().dropped_path_down, 5u);
}

TEST(Fabric, overload__marks_ecn_then_trims_to_headers) {
  FabricConfig c;
  c.paths = 1;
  c.path_link.gbps = 10;  // slower than the host links: the spine queue builds
  c.path_link.capacity_bytes = 64 * 1024;
  c.path_link.ecn_threshold_bytes = 16 * 1024;
  Fabric f(c);
  send(f, 100, 4000, 0, 0);
  f.advance_to(Time{Duration::milliseconds(5).ps});
  uint32_t trimmed = 0, marked = 0, total = 0;
  dp::PacketBuf* b[64];
  while (size_t got = f.nic(1).rx_burst(b, 64)) {
    for (size_t i = 0; i < got; ++i) {
      trimmed += (b[i]->flags & dp::PacketBuf::kTrimmed) != 0;
      marked += (b[i]->flags & dp::PacketBuf::kEcnCe) != 0;
      if (b[i]->flags & dp::PacketBuf::kTrimmed) {
        EXPECT_EQ(b[i]->len, kTrimmedBytes);
      }
    }
    total += static_cast<uint32_t>(got);
    f.nic(1).free(b, got);
  }
  EXPECT_EQ(total, 100u);  // trimmed, not dropped
  EXPECT_GT(trimmed, 0u);
  EXPECT_GT(marked, 0u);
  EXPECT_EQ(f.stats().trimmed, trimmed);
}

TEST(Fabric, corruption__is_caught_by_the_fcs_check) {
  FabricConfig c;
  c.faults.corrupt = 1.0;
  Fabric f(c);
  send(f, 20, 500, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(1).ps}), 0u);
  EXPECT_EQ(f.stats().dropped_fcs, 20u);
  EXPECT_EQ(f.pool().available(), f.pool().capacity());  // every buffer came back
}

TEST(Fabric, faults__are_deterministic_for_a_seed) {
  auto run = [](uint64_t seed) {
    FabricConfig c;
    c.seed = seed;
    c.faults = {.loss = 0.2, .duplicate = 0.2, .reorder = 0.3};
    Fabric f(c);
    send(f, 200, 300, 0, 7);
    receive_all(f, Time{Duration::milliseconds(1).ps});
    return std::make_tuple(f.stats().lost, f.stats().duplicated, f.stats().reordered,
                           f.stats().delivered);
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(Fabric, host_down__drops_both_directions) {
  Fabric f(FabricConfig{});
  f.set_host_up(1, false);
  send(f, 5, 100, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(1).ps}), 0u);
  EXPECT_EQ(f.stats().dropped_host_down, 5u);
}

TEST(Fabric, drop_filter__drops_what_it_picks_until_cleared) {
  Fabric f(FabricConfig{});
  f.set_drop_filter([](uint32_t src, uint32_t, const dp::PacketBuf& b) {
    return src == 0 && b.entropy % 2 == 0;  // one direction, half the entropy values
  });
  send(f, 6, 100, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(1).ps}), 3u);
  EXPECT_EQ(f.stats().dropped_by_filter, 3u);
  send(f, 4, 100, 0, 1, /*from=*/1, /*to=*/0);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(2).ps}, 1, 0), 4u);
  f.set_drop_filter({});
  send(f, 6, 100, 0, 1);
  EXPECT_EQ(receive_all(f, Time{Duration::milliseconds(3).ps}), 6u);
  EXPECT_EQ(f.stats().dropped_by_filter, 3u);
}

}  // namespace
}  // namespace spray::sim
