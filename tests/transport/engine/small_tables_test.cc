// Message tables far smaller than the load. Operations wait for room (kAgain to the
// user, NACKs and retries between engines), but none is lost, fails or deadlocks: a
// target's answers never lose their slots to its own operations (an answer that finds
// none waits for one), and a refusal for want of room does not count as a sign of a
// dead peer.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/engine_harness.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kKey = 5;

engine::EngineConfig tiny_tables() {
  engine::EngineConfig e;
  e.ses.max_tx_messages = 8;  // 6 for the user's operations, 2 kept for answers
  e.ses.max_rx_messages = 8;
  return e;
}

uint8_t byte_of(uint32_t host, size_t op, size_t i) {
  return static_cast<uint8_t>(host * 101 + op * 7 + i);
}

// Both engines write to each other as fast as their tables let them. Every write needs
// its target to send a response; with the tables full of the targets' own writes, the
// responses used to find no slot (dropped, so the write never completed) or the writes
// were refused until their PDC failed.
TEST(SmallTables, writes_both_ways_complete_when_both_tx_tables_are_full) {
  sim::FabricConfig f;
  f.hosts = 2;
  sim::Cluster cluster(f, tiny_tables());
  constexpr size_t kWrites = 40, kBytes = 6000;  // two packets each
  std::vector<uint8_t> region[2], src[2];
  for (uint32_t h = 0; h < 2; ++h) {
    region[h].assign(kWrites * kBytes, 0);
    src[h].resize(kWrites * kBytes);
    for (size_t op = 0; op < kWrites; ++op) {
      for (size_t i = 0; i < kBytes; ++i) src[h][op * kBytes + i] = byte_of(h, op, i);
    }
    ASSERT_EQ(cluster.engine(h).register_memory(
                  {region[h].data(), region[h].size(), 0, kKey, ses::access::kRemoteWrite}),
              Status::kOk);
  }
  size_t issued[2] = {0, 0}, done[2] = {0, 0};
  bool saw_again = false;
  const bool finished = cluster.run_until(
      [&] {
        for (uint32_t h = 0; h < 2; ++h) {
          while (issued[h] < kWrites) {
            const size_t at = issued[h] * kBytes;
            const Status s =
                cluster.engine(h).write(1 - h, src[h].data() + at, kBytes, at, kKey, issued[h]);
            if (s == Status::kAgain) {
              saw_again = true;
              break;
            }
            EXPECT_EQ(s, Status::kOk);
            ++issued[h];
          }
          ses::Completion c;
          while (cluster.engine(h).poll_completion(c)) {
            EXPECT_EQ(c.status, Status::kOk) << "host " << h << " write " << c.context;
            ++done[h];
          }
        }
        return done[0] == kWrites && done[1] == kWrites;
      },
      Duration::seconds(5));
  ASSERT_TRUE(finished) << "done " << done[0] << " and " << done[1] << " of " << kWrites;
  EXPECT_TRUE(saw_again);  // the tables really were full
  EXPECT_EQ(region[0], src[1]);
  EXPECT_EQ(region[1], src[0]);
}

// Host 1's table is full of its own rendezvous sends, which wait for receives host 0
// has not posted. Host 0's rendezvous sends to host 1 still complete: each needs host 1
// to send a read and a response, and those slots are kept for it. They used to be
// refused until their PDC failed.
TEST(SmallTables, rendezvous_receives_complete_while_the_user_fills_the_tx_table) {
  sim::FabricConfig f;
  f.hosts = 2;
  sim::Cluster cluster(f, tiny_tables());
  CompletionWaiter waiter(cluster);
  constexpr size_t kBytes = 100 * 1024;  // past the 64 KiB rendezvous threshold
  std::vector<uint8_t> src1(kBytes, 0x31);
  size_t blocked = 0;
  while (cluster.engine(1).send(0, src1.data(), kBytes, 100 + blocked) == Status::kOk) ++blocked;
  ASSERT_EQ(blocked, 6u);  // the user's share of 8 slots

  constexpr size_t kMessages = 4;
  std::vector<std::vector<uint8_t>> src0(kMessages), dst1(kMessages);
  for (size_t i = 0; i < kMessages; ++i) {
    src0[i].assign(kBytes, static_cast<uint8_t>(i + 1));
    dst1[i].assign(kBytes, 0);
    ASSERT_EQ(cluster.engine(1).post_recv({dst1[i].data(), kBytes, i}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src0[i].data(), kBytes, i), Status::kOk);
  }
  for (size_t i = 0; i < kMessages; ++i) {
    auto rx = waiter.wait(1, i);
    ASSERT_TRUE(rx) << i;
    EXPECT_EQ(rx->status, Status::kOk);
    EXPECT_EQ(dst1[i], src0[i]) << i;
    auto tx = waiter.wait(0, i);
    ASSERT_TRUE(tx) << i;
    EXPECT_EQ(tx->status, Status::kOk);
  }
  // Host 1's sends complete too, once host 0 takes them.
  std::vector<std::vector<uint8_t>> dst0(blocked, std::vector<uint8_t>(kBytes));
  for (size_t i = 0; i < blocked; ++i) {
    ASSERT_EQ(cluster.engine(0).post_recv({dst0[i].data(), kBytes, 100 + i}), Status::kOk);
  }
  for (size_t i = 0; i < blocked; ++i) {
    auto tx = waiter.wait(1, 100 + i);
    ASSERT_TRUE(tx) << i;
    EXPECT_EQ(tx->status, Status::kOk);
    EXPECT_EQ(dst0[i], src1) << i;
  }
}

}  // namespace
}  // namespace spray
