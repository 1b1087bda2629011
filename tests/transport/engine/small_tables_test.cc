// Message tables far smaller than the load. Operations wait for room (kAgain to the
// user, NACKs and retries between engines), but none is lost, fails or deadlocks: a
// target's answers never lose their slots to its own operations (an answer that finds
// none waits for one), and a refusal for want of room does not count as a sign of a
// dead peer.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"

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

// Hosts 0 and 1 each issue `count` operations to the other as fast as their tables let
// them: issue(h, i) starts host h's operation i, and on kAgain is called again later.
// Every completion must be kOk; done_by[h] counts host h's. Runs until each host has
// seen `completions_each`, or 5 s of virtual time. True if they did; `saw_again` says
// whether a table was ever full (the point of these tests).
template <class Issue>
bool issue_both_ways(sim::Cluster& cluster, size_t count, size_t completions_each, Issue issue,
                     bool& saw_again) {
  size_t issued[2] = {0, 0}, done_by[2] = {0, 0};
  const bool finished = cluster.run_until(
      [&] {
        for (uint32_t h = 0; h < 2; ++h) {
          while (issued[h] < count) {
            const Status s = issue(h, issued[h]);
            if (s == Status::kAgain) {
              saw_again = true;
              break;
            }
            EXPECT_EQ(s, Status::kOk);
            ++issued[h];
          }
          ses::Completion c;
          while (cluster.engine(h).poll_completion(c)) {
            EXPECT_EQ(c.status, Status::kOk) << "host " << h << " op " << c.context;
            ++done_by[h];
          }
        }
        return done_by[0] == completions_each && done_by[1] == completions_each;
      },
      Duration::seconds(5));
  EXPECT_TRUE(finished) << "done " << done_by[0] << " and " << done_by[1] << " of "
                        << completions_each;
  return finished;
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
  bool saw_again = false;
  ASSERT_TRUE(issue_both_ways(
      cluster, kWrites, kWrites,
      [&](uint32_t h, size_t op) {
        const size_t at = op * kBytes;
        return cluster.engine(h).write(1 - h, src[h].data() + at, kBytes, at, kKey, op);
      },
      saw_again));
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
  // The user's share of 8 slots is 6, and a rendezvous send takes two: its own and one
  // promised for the read response that will serve it.
  ASSERT_EQ(blocked, 3u);

  constexpr size_t kMessages = 3;  // as many as host 0's table takes at once
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

// Both engines send rendezvous messages to each other as fast as their tables let them,
// every receive posted in advance. Each receive sends a read request, which the sender
// must answer with a read response, itself a tx slot. The senders' tables used to fill
// with their own sends and their receives' reads, so each refused the other's read
// requests for good (NO_RESOURCE, resent every RTO) and nothing ever completed, on a
// fabric with no fault at all. A rendezvous send now brings the slot its read response
// needs (Ses::send).
TEST(SmallTables, rendezvous_sends_both_ways_complete_when_both_tx_tables_are_full) {
  for (const uint32_t slots : {4u, 8u}) {
    SCOPED_TRACE(testing::Message() << slots << " slots");
    sim::FabricConfig f;
    f.hosts = 2;
    engine::EngineConfig e;
    e.ses.max_tx_messages = e.ses.max_rx_messages = slots;
    sim::Cluster cluster(f, e);
    constexpr size_t kMessages = 12, kBytes = 70000;  // past the 64 KiB rendezvous threshold
    std::vector<uint8_t> src[2], dst[2];
    for (uint32_t h = 0; h < 2; ++h) {
      src[h].resize(kMessages * kBytes);
      dst[h].assign(kMessages * kBytes, 0);
      for (size_t i = 0; i < src[h].size(); ++i) src[h][i] = byte_of(h, i / kBytes, i);
    }
    for (uint32_t h = 0; h < 2; ++h) {
      for (size_t i = 0; i < kMessages; ++i) {
        ASSERT_EQ(cluster.engine(h).post_recv({dst[h].data() + i * kBytes, kBytes, 1000 + i}),
                  Status::kOk);
      }
    }
    bool saw_again = false;
    ASSERT_TRUE(issue_both_ways(
        cluster, kMessages, 2 * kMessages,
        [&](uint32_t h, size_t i) {
          return cluster.engine(h).send(1 - h, src[h].data() + i * kBytes, kBytes, i);
        },
        saw_again));         // each host: its sends and its receives
    EXPECT_TRUE(saw_again);  // the tables really were full
    EXPECT_EQ(dst[0], src[1]);
    EXPECT_EQ(dst[1], src[0]);
  }
}

// A send fails while later sends to the same target, on another PDC, arrived and wait
// there behind it (matched in send order), filling the target's rx table; one more waits
// in the sender's table, refused. Only the MSG_ERR for the failed send can end the wait,
// and it used to need room in the user's share of the tx table, which the refused send
// held: it never went (faults sweep seed 80352). It now goes beyond the share.
TEST(SmallTables, a_failed_sends_msg_err_goes_while_refused_sends_fill_the_users_share) {
  sim::FabricConfig f;
  f.hosts = 2;
  engine::EngineConfig e;
  e.ses.max_tx_messages = e.ses.max_rx_messages = 4;  // 2 for the user, 2 kept
  sim::Cluster cluster(f, e);
  CompletionWaiter waiter(cluster);
  // Host 0's RUD requests are lost: the failed send (RUD) and, until it has failed, its
  // MSG_ERRs. The later sends go ROD, on a PDC of their own.
  bool lose_rud = true;
  cluster.fabric().set_drop_filter([&](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::Prologue h;
    if (!lose_rud || from != 0 ||
        wire::decode_prologue({p.data, p.len}, h) != wire::DecodeError::kOk) {
      return false;
    }
    return h.type == wire::PdsType::kRudRequest || h.type == wire::PdsType::kRudCcRequest;
  });
  constexpr size_t kMessages = 4, kBytes = 1000;
  std::vector<std::vector<uint8_t>> src(kMessages), dst(kMessages);
  for (size_t i = 0; i < kMessages; ++i) {
    src[i].assign(kBytes, static_cast<uint8_t>(i + 1));
    dst[i].assign(kBytes, 0);
    ASSERT_EQ(cluster.engine(1).post_recv({dst[i].data(), kBytes, i, true, i, 0}), Status::kOk);
  }
  auto spec = [](uint64_t tag, pds::Mode mode) {
    return ses::SendSpec{.tagged = true, .tag = tag, .mode = mode};
  };
  ASSERT_EQ(cluster.engine(0).send(1, src[0].data(), kBytes, 0, spec(0, pds::Mode::kRud)),
            Status::kOk);           // will fail
  for (size_t i = 1; i < 3; ++i) {  // arrive, wait behind send 0, and fill host 1's share
    ASSERT_EQ(cluster.engine(0).send(1, src[i].data(), kBytes, i, spec(i, pds::Mode::kRod)),
              Status::kOk);
    auto tx = waiter.wait(0, i);
    ASSERT_TRUE(tx) << i;
    EXPECT_EQ(tx->status, Status::kOk);
  }
  ASSERT_EQ(cluster.engine(0).send(1, src[3].data(), kBytes, 3, spec(3, pds::Mode::kRod)),
            Status::kOk);  // refused
  auto failed = waiter.wait(0, 0, Duration::seconds(60));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, Status::kPeerUnreachable);
  EXPECT_GT(cluster.engine(1).pds().stats().nacks_sent, 0u);  // send 3 was refused
  lose_rud = false;
  for (size_t i = 1; i < kMessages; ++i) {
    auto rx = waiter.wait(1, i, Duration::seconds(30));
    ASSERT_TRUE(rx) << i;
    EXPECT_EQ(rx->status, Status::kOk);
    EXPECT_EQ(dst[i], src[i]) << i;
  }
  auto tx = waiter.wait(0, 3);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
  EXPECT_FALSE(waiter.take(1, 0));  // the failed send was skipped, never delivered
  cluster.fabric().set_drop_filter({});
}

// A write whose initiator gave up on it halfway is ended at its target by a MSG_ERR, as
// a failed send is: the part that arrived is dropped, and with it the rx slot and the tx
// slot promised for the write's response. Before, nothing ended it: with 4-slot tables
// (2 for the user) the promised slot left the target no room for a rendezvous send, which
// needs 2, and its sends returned kAgain for good (faults sweep seed 2617).
TEST(SmallTables, a_write_its_initiator_gave_up_on__frees_its_slots_at_the_target) {
  sim::FabricConfig f;
  f.hosts = 2;
  engine::EngineConfig e;
  e.ses.max_tx_messages = 4;
  e.ses.max_rx_messages = 4;
  e.pds.max_retries = 3;
  sim::Cluster cluster(f, e);
  CompletionWaiter waiter(cluster);
  std::vector<uint8_t> region(70000, 0), src(region.size(), 4);
  ASSERT_EQ(cluster.engine(1).register_memory(
                {region.data(), region.size(), 0, kKey, ses::access::kRemoteWrite}),
            Status::kOk);
  // Host 0's first 5 packets get through, then nothing it sends until the write failed.
  bool cut = true;
  int let_through = 5;
  cluster.fabric().set_drop_filter([&](uint32_t from, uint32_t, const dp::PacketBuf&) {
    return from == 0 && cut && let_through-- <= 0;
  });
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0, kKey, 1), Status::kOk);
  const auto failed = waiter.wait(0, 1, Duration::seconds(5));
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 1u);  // the part that arrived
  cut = false;                                         // the MSG_ERR's next try gets through
  EXPECT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 0; },
                                Duration::seconds(10)));
  // Room again for a rendezvous send (70000 B: above the 64 KiB threshold).
  std::vector<uint8_t> back(70000, 6);
  EXPECT_EQ(cluster.engine(1).send(0, back.data(), back.size(), 2), Status::kOk);
}

}  // namespace
}  // namespace spray
