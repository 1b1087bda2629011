// A target PDC its initiator no longer knows (pds_orphan.cc), driven directly. B opened
// a PDC to A, and A sends on it; then B forgets it, as when B fails it. `forgetful`
// stands for B from then on: a Pds with no PDC at all, which answers every packet on the
// old PDC INVALID_DPDCID, as B does. What A then sends again must be exactly what B never
// delivered, in order, on a PDC of A's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/transport/pds/pds_pair.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

struct OrphanPdc : Pair {
  Pds forgetful{config()};  // B after it forgot its PDC to A
  uint16_t old_id = 0;      // A's id of B's PDC

  // B opens a PDC to A in `mode`; A acknowledges, so both ends know it.
  void b_opens_a_pdc(Mode mode = Mode::kRud) {
    b.enqueue(kA, mode, run(0, 1), us(0));
    const auto syn = drain_tx(b, us(0));
    ASSERT_EQ(syn.size(), 1u);
    ASSERT_EQ(deliver(a, kB, syn[0]), RxVerdict::kDeliver);
    for (const auto& ack : headers_of<wire::PdsAck>(control(a))) b.on_ack(kA, ack, us(1));
    ASSERT_EQ(a.open_pdcs(), 1u);
    old_id = a.pdc(0)->local_id;
    ASSERT_FALSE(a.pdc(0)->initiator);
  }
  // A's packets as the forgetful B answers them: its NACKs (one of each copy set).
  wire::PdsNack nack_of(const TxPacket& pkt) {
    EXPECT_EQ(deliver(forgetful, kA, pkt), RxVerdict::kReject);
    const auto nacks = headers_of<wire::PdsNack>(control(forgetful));
    EXPECT_FALSE(nacks.empty());
    EXPECT_EQ(nacks.at(0).code, wire::NackCode::kInvalidDpdcid);
    return nacks.at(0);
  }
  // A's packets delivered to the forgetful B in order, and its ACKs back to A.
  void deliver_and_ack(const std::vector<TxPacket>& out, Time now) {
    for (const TxPacket& pkt : out) {
      if (pkt.is_ctrl) {
        forgetful.on_ctrl(kA, pkt.ctrl, pkt.entropy, now);
      } else {
        EXPECT_EQ(deliver(forgetful, kA, pkt), RxVerdict::kDeliver) << "psn " << pkt.request.psn;
      }
    }
    for (const auto& ack : headers_of<wire::PdsAck>(control(forgetful))) a.on_ack(kB, ack, now);
  }
  // What A reported acknowledged (packet indices, or messages) and failed (messages).
  std::vector<uint32_t> acked_indices() {
    std::vector<uint32_t> out;
    for (const PacketRef& r : a.acked()) out.push_back(r.index);
    return out;
  }
  std::vector<uint32_t> acked_messages() {
    std::vector<uint32_t> out;
    for (const PacketRef& r : a.acked()) out.push_back(r.message);
    return out;
  }
  std::vector<uint32_t> failed_messages() {
    std::vector<uint32_t> out;
    for (const FailedMessage& f : a.failed()) out.push_back(f.message);
    std::sort(out.begin(), out.end());
    return out;
  }
  // A sends message 1 (one packet) on B's PDC, and again at its timeout; returns the
  // resend, with `t` (us) when it went.
  TxPacket send_message_1_twice(int64_t& t) {
    a.enqueue(kB, Mode::kRud, run(1, 1), us(2));
    EXPECT_EQ(drain_tx(a, us(2)).size(), 1u);
    t = 2;
    return next_send_of_a(t).at(0);
  }
  // A sends messages 1 and 2 (one packet each) on B's PDC; returns the two packets.
  std::vector<TxPacket> send_messages_1_and_2() {
    a.enqueue(kB, Mode::kRud, run(1, 1), us(2));
    a.enqueue(kB, Mode::kRud, run(2, 1), us(2));
    auto out = drain_tx(a, us(2));
    EXPECT_EQ(out.size(), 2u);
    return out;
  }
  // Runs A's timers from `t` (us) in 10 us steps until it sends again; returns that.
  std::vector<TxPacket> sends_after_the_deadline(int64_t& t) {
    std::vector<TxPacket> out;
    for (; t < 100'000 && out.empty(); t += 10) {
      a.on_timers(us(t));
      out = drain_tx(a, us(t));
    }
    return out;
  }
};

// A's three packets: B had the middle one (SACKed, so reported delivered) when it forgot
// the PDC, and NACKs the other two. The PDC reopens as A's own once both NACKs are in:
// same PSNs in the same order, the middle one a no-op, each message packet reported
// acknowledged exactly once, and nothing failed.
TEST_F(OrphanPdc, reopens_once_every_packet_in_flight_is_known_and_sends_what_b_lacks) {
  b_opens_a_pdc();
  a.enqueue(kB, Mode::kRud, run(1, 3), us(2));
  const auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(deliver(b, kA, out[1]), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(3));
  ASSERT_EQ(a.acked().size(), 1u);  // the middle packet, by SACK
  EXPECT_EQ(a.acked()[0].index, 1u);
  a.acked().clear();

  a.on_nack(kB, nack_of(out[0]), us(4));
  EXPECT_TRUE(drain_tx(a, us(4)).empty()) << "sent while the third packet's fate was open";
  EXPECT_EQ(a.stats().pdcs_reopened, 0u);
  a.on_nack(kB, nack_of(out[2]), us(5));
  EXPECT_EQ(a.stats().pdcs_reopened, 1u);
  ASSERT_NE(a.pdc(0), nullptr);
  EXPECT_TRUE(a.pdc(0)->initiator);
  EXPECT_NE(a.pdc(0)->local_id, old_id);

  const auto again = drain_tx(a, us(6));
  ASSERT_EQ(again.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const uint32_t psn = again[i].is_ctrl ? again[i].ctrl.psn : again[i].request.psn;
    EXPECT_EQ(psn, out[i].request.psn) << i;
  }
  EXPECT_FALSE(again[0].is_ctrl);
  EXPECT_EQ(again[0].ref.index, 0u);
  EXPECT_TRUE(again[0].request.flags & wire::request_flags::kSyn);
  EXPECT_TRUE(again[1].is_ctrl) << "the packet B delivered went again";
  EXPECT_EQ(again[1].ctrl.type, wire::CtrlType::kAckRequest);
  EXPECT_FALSE(again[2].is_ctrl);
  EXPECT_EQ(again[2].ref.index, 2u);

  deliver_and_ack(again, us(7));
  EXPECT_EQ(acked_indices(), (std::vector<uint32_t>{0, 2}));
  EXPECT_TRUE(a.failed().empty());
  EXPECT_TRUE(a.failed_peers().empty());
  EXPECT_EQ(a.pdc(0)->state, PdcState::kEstablished);
  EXPECT_EQ(a.pdc(0)->snd_una, a.pdc(0)->snd_nxt);
  EXPECT_EQ(forgetful.open_pdcs(), 1u);  // A's new PDC
  EXPECT_EQ(a.stats().pdcs_failed, 0u);
}

// A run queued behind the window when the NACK came waits, and follows on the new PDC.
TEST_F(OrphanPdc, runs_queued_meanwhile_follow_on_the_new_pdc) {
  b_opens_a_pdc();
  a.enqueue(kB, Mode::kRud, run(1, 1), us(2));
  const auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 1u);
  a.on_nack(kB, nack_of(out[0]), us(3));
  a.enqueue(kB, Mode::kRud, run(2, 2), us(3));  // reopened already: straight behind
  const auto again = drain_tx(a, us(4));
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].ref.message, 1u);
  EXPECT_EQ(again[1].ref.message, 2u);
  EXPECT_EQ(again[2].ref.message, 2u);
  deliver_and_ack(again, us(5));
  EXPECT_EQ(a.acked().size(), 3u);
  EXPECT_TRUE(a.failed().empty());
}

// ROD: B held the SACKed packet behind the first, which it never had, and dropped it with
// the PDC. So it goes again with its data, not as a no-op, and is reported only once the
// new PDC acknowledges it in order.
TEST_F(OrphanPdc, rod_packets_b_held_go_again_whole) {
  b_opens_a_pdc(Mode::kRod);
  a.enqueue(kB, Mode::kRod, run(1, 2), us(2));
  const auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(deliver(b, kA, out[1], 0x7), RxVerdict::kHold);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(3));
  EXPECT_TRUE(a.acked().empty());  // held: not reported yet
  a.on_nack(kB, nack_of(out[0]), us(4));
  const auto again = drain_tx(a, us(5));
  ASSERT_EQ(again.size(), 2u);
  EXPECT_FALSE(again[1].is_ctrl);
  EXPECT_EQ(again[1].ref.index, 1u);
  deliver_and_ack(again, us(6));
  EXPECT_EQ(acked_indices(), (std::vector<uint32_t>{0, 1}));
}

// A packet that went twice may have been delivered the first time, before B forgot the
// PDC: nothing tells. Its message fails (its MSG_ERR ends what B holds of it) and its PSN
// goes as a no-op; the message sent once goes again.
TEST_F(OrphanPdc, a_resent_packet_nacked__fails_its_message_alone) {
  b_opens_a_pdc();
  int64_t t = 0;
  const TxPacket resent = send_message_1_twice(t);
  a.enqueue(kB, Mode::kRud, run(2, 1), us(t));
  const auto second = drain_tx(a, us(t));
  ASSERT_EQ(second.size(), 1u);
  a.on_nack(kB, nack_of(resent), us(t + 1));
  a.on_nack(kB, nack_of(second[0]), us(t + 1));
  EXPECT_EQ(failed_messages(), std::vector<uint32_t>{1});
  EXPECT_EQ(a.stats().orphan_messages_failed, 1u);
  EXPECT_EQ(a.stats().pdcs_reopened, 1u);
  EXPECT_EQ(a.stats().pdcs_failed, 0u);
  EXPECT_TRUE(a.failed_peers().empty());
  const auto again = drain_tx(a, us(t + 2));
  ASSERT_EQ(again.size(), 2u);
  EXPECT_TRUE(again[0].is_ctrl) << "the message in doubt went again";
  EXPECT_FALSE(again[1].is_ctrl);
  EXPECT_EQ(again[1].ref.message, 2u);
  a.failed().clear();
  deliver_and_ack(again, us(t + 3));
  EXPECT_EQ(acked_messages(), std::vector<uint32_t>{2});
  EXPECT_TRUE(a.failed().empty());
}

// No answer for one packet within an RTO of the first NACK: it may have arrived before B
// forgot the PDC, so its message fails; the one NACKed goes again.
TEST_F(OrphanPdc, a_packet_unanswered_by_the_deadline__fails_its_message) {
  b_opens_a_pdc();
  const auto out = send_messages_1_and_2();
  ASSERT_EQ(out.size(), 2u);
  a.on_nack(kB, nack_of(out[0]), us(3));  // out[1] is lost
  int64_t t = 3;
  const auto again = sends_after_the_deadline(t);
  EXPECT_LE(t, 3 + 100 + 20);  // an RTO (100 us here) after the NACK, not a backed-off one
  EXPECT_EQ(failed_messages(), std::vector<uint32_t>{2});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].ref.message, 1u);
  EXPECT_TRUE(again[1].is_ctrl);
  EXPECT_EQ(a.stats().pdcs_failed, 0u);
}

// Every packet in doubt and nothing else to send: the orphan is freed, not reopened.
TEST_F(OrphanPdc, nothing_left_to_send__frees_it) {
  b_opens_a_pdc();
  int64_t t = 0;
  a.on_nack(kB, nack_of(send_message_1_twice(t)), us(t));
  ASSERT_EQ(a.failed().size(), 1u);
  EXPECT_EQ(a.stats().orphan_pdcs_freed, 1u);
  EXPECT_EQ(a.open_pdcs(), 0u);
  EXPECT_TRUE(drain_tx(a, us(t + 1)).empty());
}

// ROD: B may have had the packet in doubt, filled its gap, and delivered the SACKed one
// held behind it: that one is in doubt too, and its message fails with it.
TEST_F(OrphanPdc, rod_packets_behind_one_in_doubt__are_in_doubt_too) {
  b_opens_a_pdc(Mode::kRod);
  a.enqueue(kB, Mode::kRod, run(1, 1), us(2));
  a.enqueue(kB, Mode::kRod, run(2, 1), us(2));
  a.enqueue(kB, Mode::kRod, run(3, 1), us(2));
  const auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(deliver(b, kA, out[1], 0x7), RxVerdict::kHold);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(3));
  a.on_nack(kB, nack_of(out[2]), us(4));  // out[0]: no word
  int64_t t = 4;
  const auto again = sends_after_the_deadline(t);
  EXPECT_EQ(failed_messages(), (std::vector<uint32_t>{1, 2}));
  ASSERT_EQ(again.size(), 3u);
  EXPECT_TRUE(again[0].is_ctrl);
  EXPECT_TRUE(again[1].is_ctrl);
  EXPECT_EQ(again[2].ref.message, 3u);
}

TEST_F(OrphanPdc, a_late_ack_for_the_unanswered_packet__lets_it_reopen) {
  b_opens_a_pdc();
  const auto out = send_messages_1_and_2();
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(deliver(b, kA, out[0]), RxVerdict::kDeliver);  // B delivered it; its ACK is late
  const auto late_acks = headers_of<wire::PdsAck>(control(b));
  a.on_nack(kB, nack_of(out[1]), us(3));
  EXPECT_EQ(a.stats().pdcs_reopened, 0u);
  for (const auto& ack : late_acks) a.on_ack(kB, ack, us(4));
  EXPECT_EQ(a.stats().pdcs_reopened, 1u);
  const auto again = drain_tx(a, us(5));
  ASSERT_EQ(again.size(), 1u) << "message 1 went again, though B delivered it";
  EXPECT_EQ(again[0].ref.message, 2u);
  deliver_and_ack(again, us(6));
  EXPECT_EQ(acked_messages(), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(a.failed().empty());
}

// B itself, having failed its PDC, remembers what it delivered on it. A's packet whose
// ACK was lost is then known delivered (not in doubt), and a packet lost on the way is
// asked about again at the deadline, instead of its message failing.
TEST_F(OrphanPdc, a_peer_that_remembers__says_what_it_delivered_and_is_asked_again) {
  b_opens_a_pdc();
  const auto out = send_messages_1_and_2();
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(deliver(b, kA, out[0]), RxVerdict::kDeliver);
  control(b);  // its ACK is lost; out[1] is lost on the way
  b.enqueue(kA, Mode::kRud, run(3, 1), us(2));
  const int64_t failed_at = fail_b_to_a();

  // A sends a third message on the PDC B no longer has: B says it never delivered it.
  a.enqueue(kB, Mode::kRud, run(4, 1), us(failed_at));
  const auto third = drain_tx(a, us(failed_at));
  ASSERT_EQ(third.size(), 1u);
  ASSERT_EQ(deliver(b, kA, third[0], 0, us(failed_at)), RxVerdict::kReject);
  auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_FALSE(nacks.empty());
  EXPECT_EQ(nacks[0].vendor_code, static_cast<uint8_t>(wire::ForgottenPsn::kNeverDelivered));
  a.on_nack(kB, nacks[0], us(failed_at + 1));

  // At the deadline A asks again about the two it had no word of.
  int64_t t = failed_at + 1;
  const auto asked = sends_after_the_deadline(t);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_TRUE(a.failed().empty());
  for (const TxPacket& pkt : asked) {
    ASSERT_EQ(deliver(b, kA, pkt, 0, us(t)), RxVerdict::kReject);
    for (const auto& n : headers_of<wire::PdsNack>(control(b))) a.on_nack(kB, n, us(t));
  }
  EXPECT_EQ(acked_messages(), std::vector<uint32_t>{1});  // delivered before B forgot
  EXPECT_TRUE(a.failed().empty());
  EXPECT_EQ(a.stats().pdcs_reopened, 1u);
  const auto again = drain_tx(a, us(t + 1));
  ASSERT_EQ(again.size(), 3u);
  EXPECT_TRUE(again[0].is_ctrl);  // message 1's PSN, as a no-op
  EXPECT_EQ(again[1].ref.message, 2u);
  EXPECT_EQ(again[2].ref.message, 4u);
}

// B forgets its PDC to A as one to a restarted peer (Pds::forget_peer), before A's ACK
// told it A's id: the restart was seen from a request of the successor's, which had
// taken B's SYN. When that successor sends on the PDC, B says what became of each packet
// (nothing of it was delivered), as after a failure, rather than nothing, which put the
// successor's sends in doubt and failed them (restart_mid_flight_test.cc, seed 1238).
TEST_F(OrphanPdc, a_peer_that_forgot_it_at_a_restart__says_what_it_delivered) {
  b.enqueue(kA, Mode::kRud, run(0, 1), us(0));
  const auto syn = drain_tx(b, us(0));
  ASSERT_EQ(syn.size(), 1u);
  ASSERT_EQ(deliver(a, kB, syn[0]), RxVerdict::kDeliver);
  control(a);  // its ACK is lost
  b.forget_peer(kA, us(1));
  a.enqueue(kB, Mode::kRud, run(1, 1), us(2));  // on the PDC B opened
  const auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(deliver(b, kA, out[0], 0, us(2)), RxVerdict::kReject);
  const auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_FALSE(nacks.empty());
  EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidDpdcid);
  EXPECT_EQ(nacks[0].vendor_code, static_cast<uint8_t>(wire::ForgottenPsn::kNeverDelivered));
}

}  // namespace
}  // namespace spray::pds
