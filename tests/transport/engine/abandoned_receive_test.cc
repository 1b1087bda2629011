// A multi-packet send whose sender stops halfway: the receive it matched must end with
// an error, and its rx slot come back, whether the sender says it gave up (MSG_ERR) or
// falls silent for good (it died). Before 2026-12-07 neither did: a MSG_ERR for a send
// whose first packet had already been matched was taken for one that had been
// delivered, and a dead sender left the receive posted for ever.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kSendBytes = 30000;  // eager (below the rendezvous threshold), 8 packets
constexpr uint64_t kCutFrom = 8192;     // packets of it at this offset or later are lost

// True for a packet of an eager send that starts `from` bytes or more into its message.
bool send_data_from(const dp::PacketBuf& p, uint64_t from) {
  wire::PdsRequest h;
  size_t consumed = 0;
  const std::span<const uint8_t> bytes(p.data, p.len);
  if (wire::decode(bytes, h, &consumed) != wire::DecodeError::kOk ||
      h.next != wire::NextHeader::kSesStandardRequest) {
    return false;
  }
  wire::SesStandardRequest s;
  if (wire::decode(bytes.subspan(consumed), s) != wire::DecodeError::kOk) return false;
  return s.common.opcode == wire::SesOpcode::kSend &&
         !s.common.has(wire::ses_flags::kStartOfMessage) && s.message_offset >= from;
}

class AbandonedReceive : public ::testing::Test {
 protected:
  AbandonedReceive() : waiter(cluster) {}

  // Host 0 sends kSendBytes to host 1, whose receive (context 1) is posted; everything
  // of it from kCutFrom on is lost. Returns once host 1 holds the first part.
  void send_the_first_part_only() {
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
    cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
      return from == 0 && send_data_from(p, kCutFrom);
    });
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
    ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 1; },
                                  Duration::milliseconds(5)));
    EXPECT_FALSE(waiter.take(1, 1));
  }

  // Host 1 still receives from host 2, on the same engine.
  void expect_host_1_still_receives(uint64_t ctx) {
    std::vector<uint8_t> a(kSendBytes, 0x5a), b(kSendBytes, 0);
    ASSERT_EQ(cluster.engine(1).post_recv({b.data(), b.size(), ctx}), Status::kOk);
    ASSERT_EQ(cluster.engine(2).send(1, a.data(), a.size(), ctx), Status::kOk);
    auto rx = waiter.wait(1, ctx);
    ASSERT_TRUE(rx);
    EXPECT_EQ(rx->status, Status::kOk);
    EXPECT_EQ(b, a);
  }

  sim::Cluster cluster{sim::FabricConfig{.hosts = 3}, engine::EngineConfig{}};
  CompletionWaiter waiter;
  std::vector<uint8_t> src = std::vector<uint8_t>(kSendBytes, 0xc3);
  std::vector<uint8_t> dst = std::vector<uint8_t>(kSendBytes, 0);
};

// The sender's PDC fails (the rest of its packets go unanswered), so its send fails and
// its MSG_ERR, which is not lost, reaches host 1.
TEST_F(AbandonedReceive, a_msg_err_for_a_send_matched_in_part_ends_its_receive) {
  send_the_first_part_only();
  auto tx = waiter.wait(0, 1, Duration::seconds(5));
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kPeerUnreachable);
  auto rx = waiter.wait(1, 1, Duration::seconds(1));
  ASSERT_TRUE(rx) << "the sender gave up, yet its receive waits for the rest";
  EXPECT_EQ(rx->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  cluster.fabric().set_drop_filter({});
  expect_host_1_still_receives(2);
}

// The sender dies: nothing more comes from it, MSG_ERR neither. Host 1 finds out by
// probing it, fails it, and ends the receive; then it sends nothing more to it.
TEST_F(AbandonedReceive, a_sender_that_dies_halfway_fails_its_receive_not_hangs) {
  send_the_first_part_only();
  cluster.fabric().set_host_up(0, false);
  auto rx = waiter.wait(1, 1, Duration::seconds(10));
  ASSERT_TRUE(rx) << "the sender is dead, yet its receive waits for the rest";
  EXPECT_EQ(rx->status, Status::kPeerUnreachable);
  EXPECT_EQ(rx->length, 0u);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  EXPECT_GE(cluster.engine(1).ses().stats().receives_abandoned, 1u);
  auto tx = waiter.wait(0, 1, Duration::seconds(10));  // cut off, host 0 fails it too
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kPeerUnreachable);
  cluster.run_until([] { return false; }, Duration::seconds(2));
  const uint64_t sent = cluster.engine(1).pds().stats().tx_packets;
  cluster.run_until([] { return false; }, Duration::seconds(5));
  EXPECT_EQ(cluster.engine(1).pds().stats().tx_packets, sent);  // no more probes to it
  expect_host_1_still_receives(2);
}

// Host 1 gives up on host 0 while host 0, more patient, has not given up on host 1: when
// the two can talk again, host 0 goes on with the send whose receive host 1 has ended.
// Its late packets must not be taken (nor acknowledged), or host 0's send would complete
// OK while its receive failed; instead it fails at host 0 too. The send goes over ROD,
// so host 1 probes on a RUD PDC of its own, and host 0's PDC, still known at host 1 when
// that one fails, carries the late packets to SES. (Had the probe gone on host 0's PDC,
// failing it there would have left host 0's packets unanswered anyway.)
TEST(AbandonedReceiveAlive, a_sender_taken_for_dead_that_goes_on_fails_its_send_too) {
  sim::Cluster cluster(sim::FabricConfig{}, engine::EngineConfig{},
                       [](uint32_t host, engine::EngineConfig& c) {
                         if (host == 0) c.pds.max_retries = 40;  // patient
                       });
  CompletionWaiter waiter(cluster);
  std::vector<uint8_t> src(kSendBytes, 0xc3), dst(kSendBytes, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    return from == 1 || send_data_from(p, kCutFrom);  // host 1 is cut off as well
  });
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1, {.mode = pds::Mode::kRod}),
            Status::kOk);
  auto rx = waiter.wait(1, 1, Duration::seconds(10));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kPeerUnreachable);
  EXPECT_FALSE(waiter.take(0, 1)) << "host 0 was meant to be still trying";
  cluster.fabric().set_drop_filter({});
  auto tx = waiter.wait(0, 1, Duration::seconds(60));
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kPeerUnreachable) << "the send completed, its receive failed";
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  EXPECT_GT(cluster.engine(1).ses().stats().malformed_packets, 0u);  // the late ones
  // Nothing of the late packets landed in the ended receive's buffer (a packet that
  // starts before kCutFrom may reach past it).
  EXPECT_TRUE(std::all_of(dst.begin() + 2 * kCutFrom, dst.end(), [](uint8_t b) { return b == 0; }));
}

// A send from a dead sender that is still unexpected (no receive posted) is dropped as
// well: a receive posted afterwards does not match it.
TEST_F(AbandonedReceive, an_unexpected_send_from_a_dead_sender_is_dropped) {
  cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    return from == 0 && send_data_from(p, kCutFrom);
  });
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 1; },
                                Duration::milliseconds(5)));
  cluster.fabric().set_host_up(0, false);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 0; },
                                Duration::seconds(10)));
  expect_host_1_still_receives(2);  // had it matched the dead one's, this would fail
}

// A sender that only pauses (its packets are held up, then go on) is probed, answers,
// and its message completes whole.
TEST_F(AbandonedReceive, a_sender_that_pauses_is_probed_and_its_message_completes) {
  send_the_first_part_only();
  const uint64_t sent = cluster.engine(1).pds().stats().tx_packets;  // ACKs not counted
  cluster.run_until([] { return false; }, Duration::milliseconds(60));
  EXPECT_GT(cluster.engine(1).pds().stats().tx_packets, sent) << "host 1 never probed host 0";
  cluster.fabric().set_drop_filter({});
  auto rx = waiter.wait(1, 1, Duration::seconds(5));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(dst, src);
  auto tx = waiter.wait(0, 1);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
}

}  // namespace
}  // namespace spray
