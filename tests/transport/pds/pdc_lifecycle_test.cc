// The PDC lifecycle driven directly: closing (never while ROD packets wait to go up),
// full PDC tables and making room in them (pds_reclaim.cc), the per-peer cap on target
// PDCs.
#include <gtest/gtest.h>

#include <set>

#include "tests/transport/pds/pds_pair.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

// ROD packets from the target wait at the initiator behind one SES could not take yet
// (a stalled line). Freeing the PDC then would drop them, though the target has them
// acknowledged; the close waits until they have gone up.
struct RodLineStalledAtInitiator : Pair {
  uint32_t pdc = 0;  // A's PDC to B
  void SetUp() override {
    a.enqueue(kB, Mode::kRod, run(0, 1), us(0));
    for (const TxPacket& pkt : drain_tx(a, us(0))) {
      RxClass c = b.classify_request(kA, pkt.request, false, 0, us(0));
      b.commit_request(c, false);
    }
    for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
    ASSERT_EQ(a.open_pdcs(), 1u);
    while (a.pdc(pdc) == nullptr) ++pdc;
  }
  // B sends A two ROD packets on the same PDC; the second arrives first and is held,
  // and SES refuses it when it comes up: the line stalls.
  void stall_a_line_from_b() {
    b.enqueue(kA, Mode::kRod, run(1, 2), us(2));
    const auto tx = drain_tx(b, us(2));
    ASSERT_EQ(tx.size(), 2u);
    EXPECT_EQ(deliver(a, kB, tx[1], 0x2), RxVerdict::kHold);
    EXPECT_EQ(deliver(a, kB, tx[0]), RxVerdict::kDeliver);
    uint64_t held = 0;
    ASSERT_TRUE(a.pop_in_order(pdc, held));
    EXPECT_EQ(held, 0x2u);
    a.unpop_in_order(pdc, held);  // SES had no room
    for (const auto& ack : headers_of<wire::PdsAck>(control(a))) b.on_ack(kA, ack, us(3));
  }
  void release_line() {
    uint64_t held = 0;
    ASSERT_TRUE(a.pop_in_order(pdc, held));
    EXPECT_EQ(held, 0x2u);
    EXPECT_FALSE(a.pop_in_order(pdc, held));
  }
};

TEST_F(RodLineStalledAtInitiator, close__is_not_sent_until_the_line_has_gone_up) {
  stall_a_line_from_b();
  ASSERT_EQ(a.close(kB, Mode::kRod, us(4)), Status::kOk);
  EXPECT_TRUE(drain_tx(a, us(4)).empty());
  release_line();
  const auto close = drain_tx(a, us(5));
  ASSERT_EQ(close.size(), 1u);
  EXPECT_TRUE(close[0].is_ctrl);
  EXPECT_EQ(close[0].ctrl.type, wire::CtrlType::kClose);
}

TEST_F(RodLineStalledAtInitiator, close__acknowledged_meanwhile_frees_the_pdc_only_after_it) {
  ASSERT_EQ(a.close(kB, Mode::kRod, us(2)), Status::kOk);
  const auto close = drain_tx(a, us(2));
  ASSERT_EQ(close.size(), 1u);
  stall_a_line_from_b();  // B's packets cross the CLOSE; B has them acknowledged
  b.on_ctrl(kA, close[0].ctrl, 0, us(4));
  EXPECT_EQ(b.open_pdcs(), 0u);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(5));
  EXPECT_EQ(a.open_pdcs(), 1u);  // held packets still to go up
  EXPECT_TRUE(a.orphaned_buffers().empty());
  release_line();
  EXPECT_EQ(a.open_pdcs(), 0u);
  EXPECT_TRUE(a.orphaned_buffers().empty());
}

// Full PDC tables (pds_reclaim.cc): a third engine, C, and a target whose table holds
// one PDC.
struct FullTable : Pair {
  static constexpr PeerIndex kC = 2;  // how the target names C
  static PdsConfig one_pdc() {
    PdsConfig c = config();
    c.max_pdcs = 1;
    return c;
  }
  Pds c{config()};
  Pds target{one_pdc()};
  // A sends one packet to the target and hears its ACK: A's PDC is then idle.
  void a_talks_to_target(Time now) {
    a.enqueue(kB, Mode::kRud, run(0, 1), now);
    for (const TxPacket& pkt : drain_tx(a, now)) deliver(target, kA, pkt);
    for (const auto& ack : headers_of<wire::PdsAck>(control(target))) a.on_ack(kB, ack, now);
    ASSERT_EQ(a.acked().size(), 1u);
    a.acked().clear();
  }
  static PdsConfig one_pdc_waiting_50us() {
    PdsConfig c = one_pdc();
    c.pdc_wait = Duration::microseconds(50);
    return c;
  }
  // `p` sends B a packet that is never acknowledged: its only PDC stays busy.
  void keep_busy_sending_to_b(Pds& p) {
    p.enqueue(kB, Mode::kRud, run(0, 1), us(0));
    drain_tx(p, us(0));
  }
  // A's PDC to the target stays busy (a packet the target never receives), so A declines
  // to close it and the target stays full.
  void keep_a_busy() {
    a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
    deliver(target, kA, drain_tx(a, us(0)).at(0));
  }
  static PdsConfig patient() {
    PdsConfig c = config();
    c.pdc_wait = Duration::milliseconds(50);
    return c;
  }
  // `from` (C to the full target) sends from time 0 for up to `rtos` RTOs of 20 ms, or
  // until it fails something; every try is refused, and A is asked to close but cannot.
  // Returns the time reached.
  Time refuse_syns_from(Pds& from, int rtos) {
    Time now = us(0);
    for (int i = 0; i < rtos && from.failed().empty(); ++i) {
      for (const TxPacket& pkt : drain_tx(from, now)) {
        EXPECT_EQ(deliver(target, kC, pkt), RxVerdict::kReject);
      }
      for (const ControlPacket& out : control(target)) {
        if (const auto* n = std::get_if<wire::PdsNack>(&out.header)) from.on_nack(kB, *n, now);
        if (const auto* ask = std::get_if<wire::PdsCtrl>(&out.header)) a.on_ctrl(kB, *ask, 0, now);
      }
      EXPECT_EQ(a.stats().pdcs_reclaimed, 0u);
      now = now + Duration::milliseconds(20);  // past the RTO, which does not back off
      from.on_timers(now);
    }
    return now;
  }
};

TEST_F(FullTable, target__asks_an_idle_initiator_to_close_and_then_takes_the_refused_syn) {
  a_talks_to_target(us(0));
  ASSERT_EQ(c.enqueue(kB, Mode::kRud, run(1, 1), us(10)), Status::kOk);
  const TxPacket syn = drain_tx(c, us(10)).at(0);
  EXPECT_EQ(deliver(target, kC, syn), RxVerdict::kReject);
  // The refusal, and a CLOSE_REQ to A, whose PDC is the least recently active idle one.
  const auto out = control(target);
  const auto nacks = headers_of<wire::PdsNack>(out);
  ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies});  // copies of one NACK
  EXPECT_EQ(nacks[0].code, wire::NackCode::kNoPdcAvailable);
  const auto asks = headers_of<wire::PdsCtrl>(out);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].type, wire::CtrlType::kCloseRequest);
  EXPECT_EQ(target.stats().close_requests, 1u);
  c.on_nack(kB, nacks[0], us(11));
  EXPECT_TRUE(c.failed().empty());  // a full table is not a dead peer

  // A closes: CLOSE, the target frees its PDC and acknowledges, A frees its own.
  a.on_ctrl(kB, asks[0], 0, us(12));
  EXPECT_EQ(a.stats().pdcs_reclaimed, 1u);
  const auto close = drain_tx(a, us(12));
  ASSERT_EQ(close.size(), 1u);
  ASSERT_TRUE(close[0].is_ctrl);
  EXPECT_EQ(close[0].ctrl.type, wire::CtrlType::kClose);
  target.on_ctrl(kA, close[0].ctrl, 0, us(13));
  EXPECT_EQ(target.open_pdcs(), 0u);
  for (const auto& ack : headers_of<wire::PdsAck>(control(target))) a.on_ack(kB, ack, us(14));
  EXPECT_EQ(a.open_pdcs(), 0u);

  // C's RTO sends the SYN again, and this time it gets in.
  c.on_timers(us(1000));
  const auto again = drain_tx(c, us(1000));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].request.is_syn());
  EXPECT_EQ(deliver(target, kC, again[0]), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(target))) c.on_ack(kB, ack, us(1001));
  ASSERT_EQ(c.acked().size(), 1u);
  EXPECT_EQ(c.acked()[0].message, 1u);
  EXPECT_TRUE(c.failed().empty());
}

// Both ends opened a PDC to each other. While a request of ours that the peer refused
// for want of room holds our PDC's window, our answers to the peer go on the PDC it
// opened: its room may wait for them (pds_answer_detour.cc; the chaos case tiny_tables,
// seed 1042, stalled with 511 PSNs behind such a request). Otherwise they stay on ours.
TEST_F(Pair, answers__detour_to_the_peers_pdc_while_ours_is_held_by_a_refusal) {
  // The two SYNs cross, so each end opens its own PDC.
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  const auto a_syn = drain_tx(a, us(0));
  b.enqueue(kA, Mode::kRud, run(1, 1), us(0));
  const auto b_syn = drain_tx(b, us(0));
  ASSERT_EQ(a_syn.size(), 1u);
  ASSERT_EQ(b_syn.size(), 1u);
  ASSERT_EQ(deliver(b, kA, a_syn[0]), RxVerdict::kDeliver);
  ASSERT_EQ(deliver(a, kB, b_syn[0]), RxVerdict::kDeliver);  // A holds B's PDC too
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
  for (const auto& ack : headers_of<wire::PdsAck>(control(a))) b.on_ack(kA, ack, us(1));
  const uint16_t b_pdc = b_syn[0].request.spdcid;

  // Unheld, an answer goes on A's own PDC.
  a.enqueue(kB, Mode::kRud, answer(2, 1), us(2));
  auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].pdc, a_syn[0].pdc);
  ASSERT_EQ(deliver(b, kA, out[0]), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(2));

  // A request B refuses; an answer queued behind it before the NACK arrives moves.
  a.enqueue(kB, Mode::kRud, run(3, 1), us(3));
  const auto refused = drain_tx(a, us(3));
  ASSERT_EQ(refused.size(), 1u);
  ASSERT_EQ(b.classify_request(kA, refused[0].request, false, 0, us(3)).verdict,
            RxVerdict::kDeliver);
  b.refuse_request(kA, refused[0].request, wire::NackCode::kNoSesMessageAvailable);
  a.enqueue(kB, Mode::kRud, answer(4, 1), us(3));
  a.enqueue(kB, Mode::kRud, run(5, 1), us(3));  // a request stays behind
  const auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_EQ(nacks.size(), 1u);
  a.on_nack(kB, nacks[0], us(4));
  // A later answer goes straight to B's PDC while the refused request holds A's.
  a.enqueue(kB, Mode::kRud, answer(6, 1), us(4));
  out = drain_tx(a, us(4));
  ASSERT_EQ(out.size(), 3u);
  std::vector<uint32_t> detoured;
  for (const TxPacket& pkt : out) {
    if (pkt.ref.message == 5) {
      EXPECT_EQ(pkt.pdc, a_syn[0].pdc);
      continue;
    }
    detoured.push_back(pkt.ref.message);
    EXPECT_NE(pkt.pdc, a_syn[0].pdc);
    EXPECT_EQ(pkt.request.dpdcid, b_pdc);
    EXPECT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
  }
  EXPECT_EQ(detoured, (std::vector<uint32_t>{4, 6}));
  EXPECT_EQ(a.stats().answer_detours, 2u);
}

// A failed its PDC to the target (every ACK lost), and nothing told the target: its
// PDC is an orphan. Asked to close it, A answers that it does not know it, and the target
// frees the slot for the SYN it refused. An unasked-for NACK frees nothing.
TEST_F(FullTable, target__frees_a_pdc_its_initiator_no_longer_knows) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  ASSERT_EQ(deliver(target, kA, drain_tx(a, us(0)).at(0)), RxVerdict::kDeliver);
  control(target);  // the ACKs are lost, and so is everything A sends from now on
  for (int64_t t = 100; t < 100'000 && a.failed_peers().empty(); t += 100) {
    a.on_timers(us(t));
    drain_tx(a, us(t));
  }
  ASSERT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});
  ASSERT_EQ(a.open_pdcs(), 0u);
  ASSERT_EQ(target.open_pdcs(), 1u);

  // A NACK the target did not ask for (forged, or late) leaves its PDC alone.
  wire::PdsNack forged;
  forged.code = wire::NackCode::kInvalidDpdcid;
  forged.dpdcid = target.pdc(0)->local_id;
  forged.spdcid = target.pdc(0)->remote_id;
  forged.psn = target.pdc(0)->snd_nxt;
  target.on_nack(kA, forged, us(200'000));
  EXPECT_EQ(target.open_pdcs(), 1u);

  ASSERT_EQ(c.enqueue(kB, Mode::kRud, run(1, 1), us(200'000)), Status::kOk);
  EXPECT_EQ(deliver(target, kC, drain_tx(c, us(200'000)).at(0), 0, us(200'000)),
            RxVerdict::kReject);
  const auto out = control(target);
  for (const auto& n : headers_of<wire::PdsNack>(out)) c.on_nack(kB, n, us(200'001));
  const auto asks = headers_of<wire::PdsCtrl>(out);
  ASSERT_EQ(asks.size(), 1u);
  a.on_ctrl(kB, asks[0], 0, us(200'002));
  const auto answers = headers_of<wire::PdsNack>(control(a));
  ASSERT_FALSE(answers.empty());
  EXPECT_EQ(answers[0].code, wire::NackCode::kInvalidDpdcid);
  target.on_nack(kA, answers[0], us(200'003));
  EXPECT_EQ(target.open_pdcs(), 0u);
  EXPECT_EQ(target.stats().orphan_pdcs_freed, 1u);

  // C's RTO sends the SYN again, and it gets in.
  c.on_timers(us(201'000));
  const auto again = drain_tx(c, us(201'000));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(deliver(target, kC, again[0], 0, us(201'000)), RxVerdict::kDeliver);
  EXPECT_TRUE(c.failed().empty());
}

TEST_F(FullTable, target__that_stays_full_fails_the_syn_with_no_pdc_available) {
  Pds slow{patient()};
  keep_a_busy();
  slow.enqueue(kB, Mode::kRud, run(1, 1), us(0));
  const Time now = refuse_syns_from(slow, 10);
  // Refused at 0 and sent again at every RTO; failed at the first RTO past pdc_wait.
  EXPECT_EQ(now, Time{} + Duration::milliseconds(60));
  EXPECT_EQ(slow.stats().retransmits, 2u);
  ASSERT_EQ(slow.failed().size(), 1u);
  EXPECT_EQ(slow.failed()[0].status, Status::kNoPdcAvailable);
  EXPECT_EQ(slow.failed()[0].message, 1u);
  EXPECT_TRUE(slow.failed_peers().empty());  // alive, only full: nothing else fails with it
  EXPECT_EQ(target.open_pdcs(), 1u);
}

TEST_F(FullTable, target__gives_a_freed_slot_to_the_syn_refused_first) {
  a_talks_to_target(us(0));
  c.enqueue(kB, Mode::kRud, run(1, 1), us(10));
  const TxPacket c_syn = drain_tx(c, us(10)).at(0);
  EXPECT_EQ(deliver(target, kC, c_syn), RxVerdict::kReject);  // refused first: C's turn next
  const auto asks = headers_of<wire::PdsCtrl>(control(target));
  ASSERT_EQ(asks.size(), 1u);
  // A closes; the slot is free when D's SYN, refused never before, lands first.
  a.on_ctrl(kB, asks[0], 0, us(12));
  target.on_ctrl(kA, drain_tx(a, us(12)).at(0).ctrl, 0, us(13));
  ASSERT_EQ(target.open_pdcs(), 0u);
  constexpr PeerIndex kD = 3;
  Pds d{config()};
  d.enqueue(kB, Mode::kRud, run(2, 1), us(14));
  EXPECT_EQ(deliver(target, kD, drain_tx(d, us(14)).at(0)), RxVerdict::kReject);
  EXPECT_EQ(target.open_pdcs(), 0u);
  EXPECT_EQ(deliver(target, kC, c_syn), RxVerdict::kDeliver);  // C's retry takes it
  EXPECT_EQ(target.open_pdcs(), 1u);
}

TEST_F(FullTable, initiator__closes_its_idle_pdc_and_the_waiting_sends_go_in_order) {
  Pds small{one_pdc()};
  small.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  for (const TxPacket& pkt : drain_tx(small, us(0))) deliver(b, kA, pkt);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) small.on_ack(kB, ack, us(1));
  // Two sends to C: no slot, so they wait while the idle PDC to B closes.
  ASSERT_EQ(small.enqueue(kC, Mode::kRud, run(1, 1), us(2)), Status::kOk);
  ASSERT_EQ(small.enqueue(kC, Mode::kRud, run(2, 1), us(2)), Status::kOk);
  EXPECT_EQ(small.waiting_for_pdc(), 1u);
  EXPECT_EQ(small.stats().pdcs_reclaimed, 1u);
  const auto close = drain_tx(small, us(2));
  ASSERT_EQ(close.size(), 1u);
  ASSERT_TRUE(close[0].is_ctrl);
  b.on_ctrl(kA, close[0].ctrl, 0, us(3));
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) small.on_ack(kB, ack, us(4));
  EXPECT_EQ(small.waiting_for_pdc(), 0u);
  const auto to_c = drain_tx(small, us(4));
  ASSERT_EQ(to_c.size(), 2u);
  EXPECT_EQ(to_c[0].peer, kC);
  EXPECT_TRUE(to_c[0].request.is_syn());
  EXPECT_EQ(to_c[0].ref.message, 1u);
  EXPECT_EQ(to_c[1].ref.message, 2u);
  EXPECT_TRUE(small.failed().empty());
}

TEST_F(FullTable, initiator__fails_waiting_sends_after_pdc_wait_when_nothing_frees) {
  Pds small{one_pdc_waiting_50us()};
  keep_busy_sending_to_b(small);
  ASSERT_EQ(small.enqueue(kC, Mode::kRud, run(1, 1), us(1)), Status::kOk);
  EXPECT_EQ(small.stats().pdcs_reclaimed, 0u);
  small.on_timers(us(120));
  ASSERT_EQ(small.failed().size(), 1u);
  EXPECT_EQ(small.failed()[0].message, 1u);
  EXPECT_EQ(small.failed()[0].status, Status::kNoPdcAvailable);
  EXPECT_EQ(small.waiting_for_pdc(), 0u);
  EXPECT_EQ(small.stats().pdc_wait_failures, 1u);
}

TEST_F(FullTable, initiator__keeps_answers_waiting_past_pdc_wait) {
  // An answer (a response the peer waits for) that timed out would leave the peer
  // waiting forever, so only the user's send beside it fails.
  Pds small{one_pdc_waiting_50us()};
  keep_busy_sending_to_b(small);
  TxRun* answer = run(2, 1);
  answer->answer = true;
  ASSERT_EQ(small.enqueue(kC, Mode::kRud, run(1, 1), us(1)), Status::kOk);
  ASSERT_EQ(small.enqueue(kC, Mode::kRud, answer, us(1)), Status::kOk);
  small.on_timers(us(120));
  ASSERT_EQ(small.failed().size(), 1u);
  EXPECT_EQ(small.failed()[0].message, 1u);
  EXPECT_EQ(small.waiting_for_pdc(), 1u);
  small.on_timers(us(400));              // pdc_wait has passed again since
  EXPECT_EQ(small.failed().size(), 1u);  // still waiting, not failed
  EXPECT_EQ(small.waiting_for_pdc(), 1u);
}

TEST_F(FullTable, target__keeps_a_slot_freed_for_a_refused_syn_from_its_own_later_sends) {
  // A two-slot target: its own PDC to X (idle) and A's PDC to it. It refuses C's SYN and
  // closes its own PDC to make room; a send of its own that began waiting after the
  // refusal must not take that slot (it starved C's SYN for over 10 s between 4 ranks).
  PdsConfig two = config();
  two.max_pdcs = 2;
  Pds host{two};
  Pds x{config()};
  constexpr PeerIndex kX = 4, kY = 5;  // how host names X and a later peer Y
  host.enqueue(kX, Mode::kRud, run(0, 1), us(0));
  for (const TxPacket& pkt : drain_tx(host, us(0))) deliver(x, kA, pkt);
  for (const auto& ack : headers_of<wire::PdsAck>(control(x))) host.on_ack(kX, ack, us(1));
  a.enqueue(kB, Mode::kRud, run(1, 1), us(2));
  for (const TxPacket& pkt : drain_tx(a, us(2))) deliver(host, kA, pkt);
  for (const auto& ack : headers_of<wire::PdsAck>(control(host))) a.on_ack(kB, ack, us(3));
  ASSERT_EQ(host.open_pdcs(), 2u);

  c.enqueue(kB, Mode::kRud, run(2, 1), us(10));
  const TxPacket c_syn = drain_tx(c, us(10)).at(0);
  EXPECT_EQ(deliver(host, kC, c_syn), RxVerdict::kReject);
  EXPECT_EQ(host.stats().pdcs_reclaimed, 1u);  // its own idle PDC to X closes
  ASSERT_EQ(host.enqueue(kY, Mode::kRud, run(3, 1), us(11)), Status::kOk);
  EXPECT_EQ(host.waiting_for_pdc(), 1u);
  const auto close = drain_tx(host, us(11));
  ASSERT_EQ(close.size(), 1u);
  ASSERT_TRUE(close[0].is_ctrl);
  x.on_ctrl(kA, close[0].ctrl, 0, us(12));
  for (const auto& ack : headers_of<wire::PdsAck>(control(x))) host.on_ack(kX, ack, us(13));
  EXPECT_EQ(host.open_pdcs(), 1u);                           // the slot is free...
  EXPECT_EQ(host.waiting_for_pdc(), 1u);                     // ...and kept from the later send to Y
  EXPECT_EQ(deliver(host, kC, c_syn), RxVerdict::kDeliver);  // C's retry takes it
  EXPECT_EQ(host.open_pdcs(), 2u);
  EXPECT_TRUE(host.failed().empty());
}

// A refused SYN keeps its turn for as long as its initiator may take to send it again: an
// RTO, which can be as long as max_rto. Forgotten after a few initial RTOs, a rank whose
// RTO had grown lost its turn before every retry, and the other ranks' fresh SYNs took
// every slot that freed until its send failed (4 ranks with 2-PDC tables, under ASan).
struct RefusedTurns : FullTable {
  static constexpr PeerIndex kD = 3;  // how the target names D
  Pds d{config()};
  TxPacket c_syn, d_syn;
  // C's SYN is refused, then D's; A's idle PDC then closes, freeing the only slot.
  void SetUp() override {
    a_talks_to_target(us(0));
    c.enqueue(kB, Mode::kRud, run(1, 1), us(10));
    c_syn = drain_tx(c, us(10)).at(0);
    ASSERT_EQ(deliver(target, kC, c_syn, 0, us(10)), RxVerdict::kReject);
    const auto asks = headers_of<wire::PdsCtrl>(control(target));
    ASSERT_EQ(asks.size(), 1u);
    d.enqueue(kB, Mode::kRud, run(2, 1), us(20));
    d_syn = drain_tx(d, us(20)).at(0);
    ASSERT_EQ(deliver(target, kD, d_syn, 0, us(20)), RxVerdict::kReject);
    a.on_ctrl(kB, asks[0], 0, us(30));
    const auto close = drain_tx(a, us(30));
    ASSERT_EQ(close.size(), 1u);
    target.on_ctrl(kA, close[0].ctrl, 0, us(31));
    ASSERT_EQ(target.open_pdcs(), 0u);
  }
};

TEST_F(RefusedTurns, a_syn_resent_a_max_rto_later_still_comes_first) {
  ASSERT_GT(config().max_rto, config().initial_rto * 40);
  // D tries again 5 ms on (50 initial RTOs): the slot is C's, which is not yet overdue.
  EXPECT_EQ(deliver(target, kD, d_syn, 0, us(5000)), RxVerdict::kReject);
  // C's retry, one max_rto after its refusal, takes it.
  const Time c_retry = us(10) + config().max_rto;
  EXPECT_EQ(deliver(target, kC, c_syn, 0, c_retry), RxVerdict::kDeliver);
  EXPECT_EQ(target.open_pdcs(), 1u);
}

TEST_F(RefusedTurns, a_syn_not_resent_for_a_few_max_rtos_loses_its_turn) {
  // C gave up (or died): after four max_rtos without its retry, D may have the slot.
  const Time late = us(10) + config().max_rto * 4 + Duration::microseconds(1);
  EXPECT_EQ(deliver(target, kD, d_syn, 0, late), RxVerdict::kDeliver);
  EXPECT_EQ(target.open_pdcs(), 1u);
}

TEST_F(FullTable, initiator__carrying_an_answer_keeps_sending_a_refused_syn_past_pdc_wait) {
  // As target__that_stays_full_fails_the_syn_with_no_pdc_available, but the run is an
  // answer the target waits for: failing it would leave the target waiting for good.
  Pds slow{patient()};
  keep_a_busy();
  TxRun* answer = run(1, 1);
  answer->answer = true;
  slow.enqueue(kB, Mode::kRud, answer, us(0));
  refuse_syns_from(slow, 10);
  EXPECT_TRUE(slow.failed().empty());       // 200 ms, four times pdc_wait: still trying
  EXPECT_GE(slow.stats().retransmits, 8u);  // the SYN, again at every RTO
  EXPECT_EQ(slow.open_pdcs(), 1u);
}

TEST_F(Pair, pdc_table__one_peer_cannot_hold_more_than_its_share_of_target_pdcs) {
  // A source whose every SYN names a new PDC (forged or broken) gets at most
  // max_target_pdcs_per_peer of them; other peers still get theirs.
  PdsConfig small = config();
  small.max_pdcs = 8;
  small.max_target_pdcs_per_peer = 2;
  Pds target(small);
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  const TxPacket syn = drain_tx(a, us(0)).at(0);
  ASSERT_TRUE(syn.request.is_syn());
  auto from_pdc = [&](uint16_t spdcid) {
    TxPacket forged = syn;
    forged.request.spdcid = spdcid;
    return forged;
  };
  EXPECT_EQ(deliver(target, kA, from_pdc(100)), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(target, kA, from_pdc(101)), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(target, kA, from_pdc(102)), RxVerdict::kReject);
  EXPECT_EQ(deliver(target, kA, from_pdc(100)), RxVerdict::kDuplicate);  // its own PDC still works
  EXPECT_EQ(target.stats().pdcs_refused, 1u);
  target.flush_acks();
  const auto& out = target.control_out();
  EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](const ControlPacket& c) {
    const auto* n = std::get_if<wire::PdsNack>(&c.header);
    return n && n->code == wire::NackCode::kNoPdcAvailable;
  }));
  constexpr PeerIndex kOther = 2;
  EXPECT_EQ(deliver(target, kOther, from_pdc(102)), RxVerdict::kDeliver);
  EXPECT_EQ(target.stats().pdcs_opened, 3u);
}

// A peer that cannot be reached from here (our PDC to it failed) while it still reaches
// us: the answers we owed it went with our PDC, so its PDC to us must fail too, or its
// liveness probes, which we would keep acknowledging, let it wait for them forever.
// (Plain ECMP over a black-holed path: B's own PDC to A hashes onto the dead path, A's
// to B does not.)
TEST_F(Pair, losing_answers_to_a_peer__fails_its_pdc_to_us_at_its_next_packet) {
  // B opens its own PDC to A first, so that its answer to A travels on it, not on the
  // PDC A opens to B; B acknowledges A's request, which now waits for that answer.
  open_both_ways(answer(1, 1));
  for (const ControlPacket& c : control(b)) {
    if (const auto* ack = std::get_if<wire::PdsAck>(&c.header)) a.on_ack(kB, *ack, us(1));
  }
  ASSERT_EQ(a.acked().size(), 1u);
  ASSERT_EQ(b.open_pdcs(), 2u);  // B's PDC to A and A's PDC to B
  int64_t t = 2;
  for (; t < 100'000 && b.failed_peers().empty(); t += 50) {
    drain_tx(b, us(t));  // lost
    b.on_timers(us(t));
  }
  ASSERT_EQ(b.failed_peers(), std::vector<PeerIndex>{kA}) << "B's PDC to A never failed";
  EXPECT_EQ(b.stats().pdcs_forgotten, 1u);
  EXPECT_EQ(b.open_pdcs(), 0u);  // A's PDC to B went with B's own
  // A probes B (it waits for an answer and has nothing in flight): B no longer knows
  // the PDC and says so, and A gives B up.
  ASSERT_EQ(a.probe(kB, Mode::kRud, us(t)), Status::kOk);
  const auto probe = drain_tx(a, us(t));
  ASSERT_EQ(probe.size(), 1u);
  ASSERT_TRUE(probe[0].is_ctrl);
  b.on_ctrl(kA, probe[0].ctrl, 0, us(t));
  const auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies});  // copies of one NACK
  EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidDpdcid);
  a.on_nack(kB, nacks[0], us(t + 1));
  EXPECT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});
}

// The PDCs of A's that B forgets may carry B's own traffic too (B sends on a peer's PDC
// when it has none of its own): those messages must fail with them, not wait forever.
TEST_F(Pair, losing_answers_to_a_peer__fails_our_messages_on_the_pdcs_we_forget) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  a.enqueue(kB, Mode::kRod, run(1, 1), us(0));
  for (const TxPacket& pkt : drain_tx(a, us(0))) {
    ASSERT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
  }
  control(b);                    // B's ACKs: not needed
  ASSERT_EQ(b.open_pdcs(), 2u);  // A's RUD and ROD PDCs, the ones B sends A on
  b.enqueue(kA, Mode::kRud, answer(2, 1), us(1));
  drain_tx(b, us(1));  // lost, like all B sends A here
  // B's own ROD send goes on A's ROD PDC a little later, so the RUD one fails first.
  b.enqueue(kA, Mode::kRod, run(3, 1), us(400));
  drain_tx(b, us(400));
  int64_t t = 400;
  for (; t < 100'000 && b.failed_peers().empty(); t += 50) {
    drain_tx(b, us(t));
    b.on_timers(us(t));
  }
  ASSERT_EQ(b.failed_peers(), std::vector<PeerIndex>{kA});
  EXPECT_EQ(b.stats().pdcs_failed, 1u);     // the RUD PDC, with the answer
  EXPECT_EQ(b.stats().pdcs_forgotten, 1u);  // the ROD PDC, with message 3 aboard
  EXPECT_EQ(b.open_pdcs(), 0u);
  std::set<uint32_t> failed;
  for (const FailedMessage& f : b.failed()) failed.insert(f.message);
  EXPECT_EQ(failed, (std::set<uint32_t>{2, 3}));
}

// As above, but A held no PDC to B when B gave up (A's had closed, as one does to make
// room): nothing to forget, so B refuses A's SYNs for a while instead. Else the PDC A's
// probe opens would be acknowledged, and A would wait for B's lost answer forever.
TEST_F(Pair, losing_answers_to_a_peer_with_no_pdc_to_us__refuses_its_syns_for_a_while) {
  b.enqueue(kA, Mode::kRud, answer(1, 1), us(0));
  const int64_t failed_at = fail_b_to_a();
  EXPECT_EQ(b.stats().pdcs_forgotten, 0u);

  // A comes back only after a whole notice has passed (its table was full, say): the
  // notice runs from B's first refusal, not from the failure, so A still hears of it.
  const Duration notice{config().max_rto.ps * (config().max_retries + 2)};
  const int64_t t = failed_at + static_cast<int64_t>(notice.as_microseconds()) + 10;
  ASSERT_EQ(a.probe(kB, Mode::kRud, us(t)), Status::kOk);
  const auto syn = drain_tx(a, us(t));
  ASSERT_EQ(syn.size(), 1u);
  ASSERT_TRUE(syn[0].is_ctrl);
  for (int copy = 1; copy <= 2; ++copy) {  // the second: our NACK was lost, A sent it again
    b.on_ctrl(kA, syn[0].ctrl, 0, us(t + copy));
    const auto nacks = headers_of<wire::PdsNack>(control(b));
    ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies}) << copy;
    EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidSyn);
    EXPECT_EQ(b.stats().syns_refused_after_lost_answers, static_cast<uint64_t>(copy));
    if (copy == 2) a.on_nack(kB, nacks[0], us(t + 3));
  }
  EXPECT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});  // A's waiting operations fail
  EXPECT_EQ(b.open_pdcs(), 0u);

  // Any PDC A opens while B is still telling it is refused: B cannot know whether A got
  // the word (the NACKs may all be lost)...
  a.enqueue(kB, Mode::kRud, run(2, 1), us(t + 10));
  const auto next = drain_tx(a, us(t + 10));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(deliver(b, kA, next[0], 0, us(t + 11)), RxVerdict::kReject);
  EXPECT_EQ(b.stats().syns_refused_after_lost_answers, 3u);
  // ...until A's retries would have run out anyway, counted from the first refusal:
  // then B dropped A's state once, not A for good.
  const Time later = us(t + 1) + notice;
  EXPECT_EQ(deliver(b, kA, next[0], 0, later - Duration::microseconds(1)), RxVerdict::kReject);
  EXPECT_EQ(b.stats().syns_refused_after_lost_answers, 4u);
  EXPECT_EQ(deliver(b, kA, next[0], 0, later), RxVerdict::kDeliver);
  EXPECT_EQ(b.stats().syns_refused_after_lost_answers, 4u);
}

// As above, but B, having given the answer up, opens a new PDC to A (a send of its
// own) and A, holding none of its own to B, probes B on that one: B must not ACK the
// probe, or A takes it for proof that B still holds the answer and waits for good.
TEST_F(Pair, losing_answers_to_a_peer__its_probes_on_our_next_pdc_fail_it) {
  b.enqueue(kA, Mode::kRud, answer(1, 1), us(0));
  const int64_t t = fail_b_to_a() + 10;
  b.enqueue(kA, Mode::kRud, run(2, 1), us(t));
  ASSERT_EQ(deliver(a, kB, drain_tx(b, us(t)).at(0), 0, us(t + 1)), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(a))) b.on_ack(kA, ack, us(t + 2));
  ASSERT_EQ(b.pdc(0)->state, PdcState::kEstablished);  // both ends know B's new PDC

  ASSERT_EQ(a.probe(kB, Mode::kRud, us(t + 3)), Status::kOk);
  const auto probe = drain_tx(a, us(t + 3));
  ASSERT_EQ(probe.size(), 1u);
  ASSERT_TRUE(probe[0].is_ctrl);
  ASSERT_EQ(probe[0].ctrl.type, wire::CtrlType::kAckRequest);
  b.on_ctrl(kA, probe[0].ctrl, 0, us(t + 4));
  const auto out = control(b);
  EXPECT_TRUE(headers_of<wire::PdsAck>(out).empty()) << "B acknowledged A's probe";
  const auto nacks = headers_of<wire::PdsNack>(out);
  ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies});
  EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidDpdcid);
  a.on_nack(kB, nacks[0], us(t + 5));
  EXPECT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});  // A's waiting operations fail
}

// B's answer travels on the PDC A opened, and A closes that PDC (for room) while B's
// answer is still failing: B refuses the CLOSE while busy; once B has given the answer
// up, A's retransmitted CLOSE must not be acknowledged as if the PDC had closed
// normally, or A never learns and waits for the answer through its next PDC for good.
TEST_F(Pair, losing_answers_on_a_pdc_its_initiator_is_closing__fails_the_close) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  ASSERT_EQ(deliver(b, kA, drain_tx(a, us(0)).at(0)), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
  b.enqueue(kA, Mode::kRud, answer(1, 1), us(2));  // on A's PDC, the one B has to A
  ASSERT_EQ(b.open_pdcs(), 1u);
  drain_tx(b, us(2));  // lost

  ASSERT_EQ(a.close(kB, Mode::kRud, us(3)), Status::kOk);
  const auto close = drain_tx(a, us(3));
  ASSERT_EQ(close.size(), 1u);
  b.on_ctrl(kA, close[0].ctrl, 0, us(4));
  auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies});
  EXPECT_EQ(nacks[0].code, wire::NackCode::kClosing);  // busy with the answer
  a.on_nack(kB, nacks[0], us(5));

  const int64_t failed_at = fail_b_to_a();
  EXPECT_EQ(b.open_pdcs(), 0u);
  // A's RTO sends the CLOSE again.
  std::vector<TxPacket> again;
  int64_t t = failed_at;
  for (; t < failed_at + 50'000 && again.empty(); t += 50) {
    a.on_timers(us(t));
    again = drain_tx(a, us(t));
  }
  ASSERT_EQ(again.size(), 1u);
  b.on_ctrl(kA, again[0].ctrl, 0, us(t));
  nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_EQ(nacks.size(), size_t{Pds::kControlCopies})
      << "the CLOSE was acknowledged as if the PDC closed normally";
  EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidDpdcid);
  a.on_nack(kB, nacks[0], us(t + 1));
  EXPECT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});  // A's waiting operations fail
}

// A PDC closed (for room, say) leaves the EVs it found good; the next PDC to that peer
// sends on them first instead of exploring blind, which over half-dead paths cost each
// new PDC's SYN a coin toss per try.
TEST_F(RepsPair, a_new_pdc_starts_on_the_evs_the_closed_one_found_good) {
  a.enqueue(kB, Mode::kRud, run(0, 4), us(0));
  std::set<uint16_t> good;
  for (const TxPacket& pkt : drain_tx(a, us(0))) {
    ASSERT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
    good.insert(pkt.entropy);
  }
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(10));
  ASSERT_EQ(a.acked().size(), 4u);

  ASSERT_EQ(a.close(kB, Mode::kRud, us(20)), Status::kOk);
  const auto close = drain_tx(a, us(20));
  ASSERT_EQ(close.size(), 1u);
  b.on_ctrl(kA, close[0].ctrl, 0, us(21));
  const auto close_acks = headers_of<wire::PdsAck>(control(b));
  ASSERT_EQ(close_acks.size(), static_cast<size_t>(Pds::kControlCopies));
  for (const auto& ack : close_acks) a.on_ack(kB, ack, us(22));
  ASSERT_EQ(a.open_pdcs(), 0u);
  ASSERT_EQ(b.open_pdcs(), 0u);

  a.enqueue(kB, Mode::kRud, run(1, 3), us(30));
  const auto fresh = drain_tx(a, us(30));
  ASSERT_EQ(fresh.size(), 3u);
  for (const TxPacket& pkt : fresh) EXPECT_TRUE(good.count(pkt.entropy)) << pkt.entropy;
  EXPECT_EQ(a.stats().pdcs_with_remembered_paths, 1u);
}

// Only lost answers leave the peer waiting. User sends that fail are reported here, and
// the peer's PDCs to us, and its next ones, are left alone.
TEST_F(Pair, losing_only_user_sends_to_a_peer__leaves_its_pdcs_alone) {
  open_both_ways(run(1, 1));
  fail_b_to_a();
  EXPECT_EQ(b.stats().pdcs_forgotten, 0u);
  EXPECT_EQ(b.open_pdcs(), 1u);  // A's PDC to B
  a.enqueue(kB, Mode::kRud, run(2, 1), us(200'000));
  EXPECT_EQ(deliver(b, kA, drain_tx(a, us(200'000)).at(0)), RxVerdict::kDeliver);
  EXPECT_EQ(b.stats().syns_refused_after_lost_answers, 0u);
}

}  // namespace
}  // namespace spray::pds
