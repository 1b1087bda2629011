// Half the paths dead in one direction only: the receiver's packets on them are lost,
// the sender's all arrive. That is what a link down between a host and one of two ECMP
// routers does (tests/integration/netns_multipath.sh linkdown): the host still reaches
// the far host through the other router, but the far host hashes about half of its
// answers onto the router that can no longer reach it. Data gets through on every EV;
// ACKs die on half of them.
//
// The sender must learn which EVs bring its ACKs back (congestion/paths/reps.h): a
// timeout's freeze that cycled over EVs known only to deliver lost every ACK for as long
// as it lasted, over and over. A transfer is compared with the same transfer on a
// fabric with nothing dead, run side by side; both with a receiver that runs all the
// time and with one that runs 50 us of every 1050 (a process waiting for its CPU).
#include <gtest/gtest.h>

#include <vector>

#include "nic_sim/cluster.h"

namespace spray {
namespace {

struct Schedule {
  int64_t run_us = 1;   // the receiver makes progress for this long...
  int64_t wait_us = 0;  // ...then makes none for this long, in turn
};

struct Outcome {
  bool intact = false;    // every message arrived complete with the right bytes
  double virtual_ms = 0;  // until the last send and receive completed
  uint64_t timeouts = 0;  // the sender's retransmission timeouts
};

constexpr int kMessages = 32;
constexpr size_t kBytes = 1 << 20;

Outcome transfer(bool return_half_dead, Schedule schedule, uint64_t seed) {
  sim::FabricConfig f;
  f.hosts = 2;
  f.paths = 4;  // a packet takes path entropy % 4
  f.seed = seed;
  sim::Cluster cluster(f, {});
  if (return_half_dead) {
    cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
      return from == 1 && p.entropy % 4 < 2;
    });
  }
  std::vector<uint8_t> src(kBytes);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<std::vector<uint8_t>> dst(kMessages, std::vector<uint8_t>(kBytes));
  for (uint64_t m = 0; m < kMessages; ++m) {
    EXPECT_EQ(cluster.engine(1).post_recv({dst[m].data(), kBytes, m}), Status::kOk);
    EXPECT_EQ(cluster.engine(0).send(1, src.data(), kBytes, m), Status::kOk);
  }
  int sent = 0, received = 0;
  bool all_ok = true;
  Time now{};
  const Time end = now + Duration::seconds(5);
  const int64_t period_ps = Duration::microseconds(schedule.run_us + schedule.wait_us).ps;
  const int64_t run_ps = Duration::microseconds(schedule.run_us).ps;
  while (now < end && (sent < kMessages || received < kMessages)) {
    cluster.fabric().advance_to(now);
    cluster.engine(0).progress(now);
    if (now.ps % period_ps < run_ps) cluster.engine(1).progress(now);
    ses::Completion c;
    while (cluster.engine(0).poll_completion(c)) {
      ++sent;
      all_ok = all_ok && c.status == Status::kOk;
    }
    while (cluster.engine(1).poll_completion(c)) {
      ++received;
      all_ok = all_ok && c.status == Status::kOk && c.length == kBytes;
    }
    now += Duration::microseconds(1);
  }
  Outcome o;
  o.intact = all_ok && sent == kMessages && received == kMessages;
  for (const auto& d : dst) o.intact = o.intact && d == src;
  o.virtual_ms = static_cast<double>(now.ps) * 1e-9;
  o.timeouts = cluster.engine(0).pds().stats().timeouts;
  return o;
}

void expect_as_if_nothing_died(Schedule schedule, uint64_t seed) {
  const Outcome healthy = transfer(false, schedule, seed);
  const Outcome half_dead = transfer(true, schedule, seed);
  ASSERT_TRUE(healthy.intact);
  ASSERT_TRUE(half_dead.intact);
  EXPECT_LE(half_dead.virtual_ms, 1.5 * healthy.virtual_ms)
      << "healthy " << healthy.virtual_ms << " ms, " << healthy.timeouts << " timeouts";
  EXPECT_LE(half_dead.timeouts, healthy.timeouts + healthy.timeouts / 2 + 8)
      << "half dead took " << half_dead.virtual_ms << " ms";
}

class OneWayPathLoss : public ::testing::TestWithParam<uint64_t> {};

TEST_P(OneWayPathLoss, receiver_always_running__transfers_about_as_fast_as_with_nothing_dead) {
  expect_as_if_nothing_died({}, GetParam());
}

TEST_P(OneWayPathLoss, receiver_waiting_for_its_cpu__transfers_about_as_fast_as_with_nothing_dead) {
  expect_as_if_nothing_died({.run_us = 50, .wait_us = 1000}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Seeds, OneWayPathLoss, ::testing::Range<uint64_t>(1, 7));

}  // namespace
}  // namespace spray
