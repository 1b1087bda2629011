// Full PDC tables driven directly (pds_reclaim.cc): a target that refuses SYNs asks an
// idle initiator to close, frees orphans, and gives freed slots to refused SYNs in turn;
// an initiator closes its idle PDCs and its sends wait, at most pdc_wait unless they
// answer the peer; one peer cannot hold more than its share of target PDCs.
#include <gtest/gtest.h>

#include "tests/transport/pds/pds_pair.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

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
  EXPECT_EQ(slow.stats().pdcs_failed_peer_full, 1u);
  EXPECT_EQ(slow.last_pdc_failure().why, PdcFailure::kPeerStayedFull);
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

}  // namespace
}  // namespace spray::pds
