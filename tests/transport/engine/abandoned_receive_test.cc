// A multi-packet send whose sender stops halfway: the receive it matched must end with
// an error, and its rx slot come back, whether the sender says it gave up (MSG_ERR) or
// falls silent for good (it died). Before 2026-12-07 neither did: a MSG_ERR for a send
// whose first packet had already been matched was taken for one that had been
// delivered, and a dead sender left the receive posted for ever. Likewise a send that
// arrived whole behind one of its sender's that never came, the sender then dead, and an
// RMA write received in part from a dead initiator: each held its slots for good (until
// 2026-12-07, later).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kSendBytes = 30000;  // eager (below the rendezvous threshold), 8 packets
constexpr uint64_t kCutFrom = 8192;     // packets of it at this offset or later are lost

// The SES standard header of a request packet, if `p` is one.
std::optional<wire::SesStandardRequest> ses_request_of(const dp::PacketBuf& p) {
  wire::PdsRequest h;
  size_t consumed = 0;
  const std::span<const uint8_t> bytes(p.data, p.len);
  if (wire::decode(bytes, h, &consumed) != wire::DecodeError::kOk ||
      h.next != wire::NextHeader::kSesStandardRequest) {
    return std::nullopt;
  }
  wire::SesStandardRequest s;
  if (wire::decode(bytes.subspan(consumed), s) != wire::DecodeError::kOk) return std::nullopt;
  return s;
}

// True for a packet of an eager send (or of another request, `op`) that starts `from`
// bytes or more into its message.
bool send_data_from(const dp::PacketBuf& p, uint64_t from,
                    wire::SesOpcode op = wire::SesOpcode::kSend) {
  const auto s = ses_request_of(p);
  return s && s->common.opcode == op && !s->common.has(wire::ses_flags::kStartOfMessage) &&
         s->message_offset >= from;
}

// True for a packet of a send of `length` bytes.
bool send_of_length(const dp::PacketBuf& p, uint64_t length) {
  const auto s = ses_request_of(p);
  return s && s->common.opcode == wire::SesOpcode::kSend && s->request_length == length;
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

  // The drop filter holds host 0 up for 60 ms, long enough for host 1 to probe it (which
  // it answers), then goes.
  void pause_host_0_then_let_it_through() {
    const uint64_t sent = cluster.engine(1).pds().stats().tx_packets;  // ACKs not counted
    cluster.run_until([] { return false; }, Duration::milliseconds(60));
    EXPECT_GT(cluster.engine(1).pds().stats().tx_packets, sent) << "host 1 never probed host 0";
    cluster.fabric().set_drop_filter({});
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

  // Host 0 sends kLostBytes to host 1, every packet of which is lost (while the filter
  // stands), then src, which arrives whole and waits for the first: host 1 holds it,
  // and host 0's second send completes (delivered, as far as it knows).
  static constexpr uint64_t kLostBytes = 100;
  void send_one_lost_then_one_whole() {
    cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
      return from == 0 && send_of_length(p, kLostBytes);
    });
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, lost.data(), lost.size(), 1), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 2), Status::kOk);
    auto tx = waiter.wait(0, 2, Duration::milliseconds(5));
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->status, Status::kOk);
    EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 1u);
    EXPECT_FALSE(waiter.take(1, 1));
  }

  sim::Cluster cluster{sim::FabricConfig{.hosts = 3}, engine::EngineConfig{}};
  std::vector<uint8_t> lost = std::vector<uint8_t>(kLostBytes, 0x11);
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

// Host 0 is more patient than host 1 (40 retries against the default 12), so host 1 can
// take it for dead while host 0 is still trying. Its operations go over ROD, so that host
// 1 probes on a RUD PDC of its own, and host 0's PDC, still known at host 1 when that one
// fails, carries host 0's late packets to SES. (Had the probe gone on host 0's PDC,
// failing it there would have left host 0's packets unanswered anyway.)
class PatientSender : public ::testing::Test {
 protected:
  PatientSender() : waiter(cluster) {}

  // Nothing from host 1 arrives, nor packets of host 0's `op` from kCutFrom on.
  void cut_off_host_1_and_the_rest_of(wire::SesOpcode op) {
    cluster.fabric().set_drop_filter([op](uint32_t from, uint32_t, const dp::PacketBuf& p) {
      return from == 1 || send_data_from(p, kCutFrom, op);
    });
  }
  // Once host 1 has ended host 0's operation (context 1), the two can talk again; host 0
  // goes on with it, and must fail it on the late packets host 1 refuses.
  void expect_host_0_fails_once_it_gets_through(const char* otherwise) {
    EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
    EXPECT_FALSE(waiter.take(0, 1)) << "host 0 was meant to be still trying";
    cluster.fabric().set_drop_filter({});
    auto tx = waiter.wait(0, 1, Duration::seconds(60));
    ASSERT_TRUE(tx) << otherwise;
    EXPECT_EQ(tx->status, Status::kPeerUnreachable) << otherwise;
    EXPECT_GT(cluster.engine(1).ses().stats().malformed_packets, 0u);  // the late ones
    EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  }

  sim::Cluster cluster{sim::FabricConfig{}, engine::EngineConfig{},
                       [](uint32_t host, engine::EngineConfig& c) {
                         if (host == 0) c.pds.max_retries = 40;
                       }};
  CompletionWaiter waiter;
  std::vector<uint8_t> src = std::vector<uint8_t>(kSendBytes, 0xc3);
};

// Host 0 goes on with the send whose receive host 1 has ended. Its late packets must not
// be taken (nor acknowledged), or its send would complete OK while its receive failed.
TEST_F(PatientSender, taken_for_dead__goes_on_with_a_send_and_fails_it_too) {
  std::vector<uint8_t> dst(kSendBytes, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  cut_off_host_1_and_the_rest_of(wire::SesOpcode::kSend);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1, {.mode = pds::Mode::kRod}),
            Status::kOk);
  auto rx = waiter.wait(1, 1, Duration::seconds(10));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kPeerUnreachable);
  expect_host_0_fails_once_it_gets_through("the send completed, its receive failed");
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
  pause_host_0_then_let_it_through();
  auto rx = waiter.wait(1, 1, Duration::seconds(5));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(dst, src);
  auto tx = waiter.wait(0, 1);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
}

// Host 0 dies after its second send got through whole and its first did not get through
// at all: no MSG_ERR will come for the first. Once host 0 fails, the id that never came
// is passed over and the second is matched, to the receive posted first (the first send
// never existed here).
TEST_F(AbandonedReceive, a_send_behind_one_that_never_came_from_a_dead_sender_is_delivered) {
  send_one_lost_then_one_whole();
  cluster.fabric().set_host_up(0, false);
  auto rx = waiter.wait(1, 1, Duration::seconds(10));
  ASSERT_TRUE(rx) << "the sender is dead, yet its whole send waits for one that never came";
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(rx->length, kSendBytes);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  EXPECT_EQ(cluster.engine(1).ses().stats().missing_ids_passed_over, 1u);
  EXPECT_EQ(cluster.engine(1).ses().stats().receives_abandoned, 0u);
  expect_host_1_still_receives(2);
}

// The same, but host 0 only pauses: host 1 probes it, it answers, and nothing is passed
// over; once its first send gets through, both are matched in its order.
TEST_F(AbandonedReceive, a_send_behind_one_held_up_waits_for_it_while_its_sender_answers) {
  send_one_lost_then_one_whole();
  pause_host_0_then_let_it_through();
  EXPECT_FALSE(waiter.take(1, 1));
  std::vector<uint8_t> second(kSendBytes, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({second.data(), second.size(), 3}), Status::kOk);
  auto rx1 = waiter.wait(1, 1, Duration::seconds(5));
  ASSERT_TRUE(rx1);
  EXPECT_EQ(rx1->status, Status::kOk);
  EXPECT_EQ(rx1->length, kLostBytes);
  EXPECT_TRUE(std::equal(lost.begin(), lost.end(), dst.begin()));
  auto rx3 = waiter.wait(1, 3, Duration::seconds(5));
  ASSERT_TRUE(rx3);
  EXPECT_EQ(rx3->status, Status::kOk);
  EXPECT_EQ(second, src);
  auto tx = waiter.wait(0, 1);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
  EXPECT_EQ(cluster.engine(1).ses().stats().missing_ids_passed_over, 0u);
}

// An RMA write of kSendBytes from host 0 into host 1's region `target`, everything of it
// from kCutFrom on lost.
class AbandonedWrite : public AbandonedReceive {
 protected:
  static constexpr uint64_t kKey = 0x77;
  AbandonedWrite() {
    EXPECT_EQ(cluster.engine(1).register_memory(
                  {target.data(), target.size(), 0, kKey, ses::access::kRemoteWrite}),
              Status::kOk);
  }
  static bool write_data_from(const dp::PacketBuf& p, uint64_t from) {
    return send_data_from(p, from, wire::SesOpcode::kWrite);
  }
  std::vector<uint8_t> target = std::vector<uint8_t>(kSendBytes, 0);
};

// The initiator dies halfway: host 1 probes it (a write's target waits on it as a
// receive does), fails it, and drops the write with its rx slot and the tx slot promised
// for its response.
TEST_F(AbandonedWrite, a_write_whose_initiator_dies_halfway_gives_its_slots_back) {
  cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    return from == 0 && write_data_from(p, kCutFrom);
  });
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0, kKey, 1), Status::kOk);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 1; },
                                Duration::milliseconds(5)));
  EXPECT_EQ(cluster.engine(1).ses().tx_promised(), 1u);
  cluster.fabric().set_host_up(0, false);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 0; },
                                Duration::seconds(10)))
      << "the initiator is dead, yet its write holds its target's slot";
  EXPECT_EQ(cluster.engine(1).ses().tx_promised(), 0u);
  EXPECT_EQ(cluster.engine(1).ses().stats().writes_abandoned, 1u);
  expect_host_1_still_receives(2);
}

// Host 0 goes on with the write host 1 has dropped. Its late packets must be refused,
// not taken for a new write that would never be whole nor answered, or its write would
// wait for good.
TEST_F(PatientSender, taken_for_dead__goes_on_with_a_write_and_fails_it) {
  std::vector<uint8_t> target(kSendBytes, 0);
  ASSERT_EQ(cluster.engine(1).register_memory(
                {target.data(), target.size(), 0, 0x77, ses::access::kRemoteWrite}),
            Status::kOk);
  cut_off_host_1_and_the_rest_of(wire::SesOpcode::kWrite);
  ASSERT_EQ(
      cluster.engine(0).write(1, src.data(), src.size(), 0, 0x77, 1, {.mode = pds::Mode::kRod}),
      Status::kOk);
  ASSERT_TRUE(
      cluster.run_until([&] { return cluster.engine(1).ses().stats().writes_abandoned == 1; },
                        Duration::seconds(10)));
  expect_host_0_fails_once_it_gets_through("host 1 dropped the write, and host 0 waits for good");
  cluster.run_until([] { return false; }, Duration::seconds(1));  // its MSG_ERR lands
  EXPECT_EQ(cluster.engine(1).ses().tx_promised(), 0u);
}

}  // namespace
}  // namespace spray
