// The PDC lifecycle driven directly: closing (never while ROD packets wait to go up),
// answers detoured while a refusal holds our PDC, and forgetting the PDCs of a peer we
// lost answers to. Full tables are in pdc_full_table_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
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

// What the engine asks before it lets a peer's word on its send order pass over ids
// (transport/ses/ses_order_query.cc): PDS acknowledged these packets, SES has not seen
// them.
TEST_F(RodLineStalledAtInitiator, holds_unseen_from__while_acknowledged_packets_wait) {
  EXPECT_FALSE(a.holds_unseen_from(kB));
  stall_a_line_from_b();
  EXPECT_TRUE(a.holds_unseen_from(kB));
  release_line();
  EXPECT_FALSE(a.holds_unseen_from(kB));
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

// Both ends opened a PDC to each other. While a request of ours that the peer refused
// for want of room holds our PDC's window, our answers to the peer go on the PDC it
// opened: its room may wait for them (pds_answer_detour.cc; the chaos case tiny_tables,
// seed 1042, stalled with 511 PSNs behind such a request). Otherwise they stay on ours.
TEST_F(Pair, answers__detour_to_the_peers_pdc_while_ours_is_held_by_a_refusal) {
  // The two SYNs cross, so each end opens its own PDC (and A holds B's too).
  const auto [a_syn, b_syn] = open_crossing_pdcs();
  const uint16_t b_pdc = b_syn.request.spdcid;

  // Unheld, an answer goes on A's own PDC.
  a.enqueue(kB, Mode::kRud, answer(2, 1), us(2));
  auto out = drain_tx(a, us(2));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].pdc, a_syn.pdc);
  ASSERT_EQ(deliver(b, kA, out[0]), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(2));

  // A request B refuses; an answer queued behind it before the NACK arrives moves.
  request_b_refuses(3, us(3));
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
      EXPECT_EQ(pkt.pdc, a_syn.pdc);
      continue;
    }
    detoured.push_back(pkt.ref.message);
    EXPECT_NE(pkt.pdc, a_syn.pdc);
    EXPECT_EQ(pkt.request.dpdcid, b_pdc);
    EXPECT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
  }
  EXPECT_EQ(detoured, (std::vector<uint32_t>{4, 6}));
  EXPECT_EQ(a.stats().answer_detours, 2u);
}

// An answer detoured from its next packet has packets on two PDCs. When one PDC fails
// it, the other must neither send its data on nor report it again: SES has ended the
// message, and its run and slot go to the next message. Its PSNs there still go, as
// CTRL ACK_REQs, so that PDC moves on. (Before: reported again, acknowledged or failed,
// and resent empty, which the engine does not send, so that PDC failed too.)
TEST_F(Pair, answer_on_two_pdcs__failed_on_one_is_ended_on_the_other) {
  const uint32_t own = open_crossing_pdcs().first.pdc;

  // B refuses A's request; before the NACK arrives, A sends the first of 3 packets of
  // an answer on its own PDC. The NACK moves the rest to B's PDC.
  request_b_refuses(3, us(3));
  a.enqueue(kB, Mode::kRud, answer(4, 3), us(3));
  uint32_t pdc = 0;
  TxPacket first;
  ASSERT_TRUE(a.pop_ready(pdc));
  ASSERT_TRUE(a.next_tx(pdc, us(3), first));
  ASSERT_EQ(first.ref.message, 4u);
  ASSERT_EQ(first.pdc, own);
  const auto nacks = headers_of<wire::PdsNack>(control(b));
  ASSERT_EQ(nacks.size(), 1u);
  a.on_nack(kB, nacks[0], us(4));
  const auto rest = drain_tx(a, us(4));
  ASSERT_EQ(rest.size(), 2u);
  const uint32_t detour = rest[0].pdc;
  for (const TxPacket& pkt : rest) {
    EXPECT_EQ(pkt.ref.message, 4u);
    EXPECT_NE(pkt.pdc, own);
  }

  // B's PDC at A loses everything (its path died) and fails; on A's own, B keeps
  // refusing the answer's first packet (refusals spend no retries) and takes the rest.
  // Each of A's packets on its own PDC goes to B; B's answers come back at once.
  const auto to_b = [&](const TxPacket& pkt, int64_t now, bool refuse_answer) {
    if (pkt.pdc != own) return;  // lost
    if (pkt.is_ctrl) {
      b.on_ctrl(kA, pkt.ctrl, 0, us(now));
    } else if (pkt.ref.message == 4 && refuse_answer) {
      ASSERT_EQ(b.classify_request(kA, pkt.request, false, 0, us(now)).verdict,
                RxVerdict::kDeliver);
      b.refuse_request(kA, pkt.request, wire::NackCode::kNoSesMessageAvailable);
    } else {
      deliver(b, kA, pkt, 0, us(now));
    }
    for (const ControlPacket& c : control(b)) {
      if (const auto* ack = std::get_if<wire::PdsAck>(&c.header)) a.on_ack(kB, *ack, us(now));
      if (const auto* nack = std::get_if<wire::PdsNack>(&c.header)) a.on_nack(kB, *nack, us(now));
    }
  };
  int64_t t = 5;
  const auto answer_failed = [&] {
    return std::any_of(a.failed().begin(), a.failed().end(),
                       [](const FailedMessage& f) { return f.message == 4; });
  };
  for (; t < 100'000 && !answer_failed(); t += 50) {
    a.on_timers(us(t));
    for (const TxPacket& pkt : drain_tx(a, us(t))) to_b(pkt, t, true);
  }
  ASSERT_TRUE(answer_failed()) << "the answer never failed";
  ASSERT_EQ(a.pdc(detour), nullptr) << "B's PDC at A should have failed";
  ASSERT_NE(a.pdc(own), nullptr) << "A's own PDC failed too";
  a.failed().clear();
  a.acked().clear();
  // A's own PDC sends nothing of the answer again and reports nothing of it; the PSN
  // the answer held goes as an ACK_REQ, B acknowledges it, and the PDC drains.
  for (int i = 0; i < 100 && a.pdc(own) != nullptr && a.pdc(own)->snd_una != a.pdc(own)->snd_nxt;
       ++i, t += 50) {
    a.on_timers(us(t));
    for (const TxPacket& pkt : drain_tx(a, us(t))) {
      EXPECT_TRUE(pkt.is_ctrl || pkt.ref.message != 4u) << "the ended answer was sent again";
      to_b(pkt, t, false);
    }
  }
  ASSERT_NE(a.pdc(own), nullptr) << "A's own PDC failed";
  EXPECT_EQ(a.pdc(own)->snd_una, a.pdc(own)->snd_nxt);
  for (const FailedMessage& f : a.failed()) EXPECT_NE(f.message, 4u) << "failed again";
  for (const PacketRef& r : a.acked()) EXPECT_NE(r.message, 4u) << "acknowledged after failing";
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
  // B's failure and A's, each with its cause for the log.
  EXPECT_EQ(b.last_pdc_failure().why, PdcFailure::kUnanswered);
  EXPECT_EQ(a.stats().pdcs_failed_unknown_at_peer, 1u);
  EXPECT_EQ(a.last_pdc_failure().why, PdcFailure::kUnknownAtPeer);
  EXPECT_EQ(a.last_pdc_failure().nack, wire::NackCode::kInvalidDpdcid);
  EXPECT_EQ(a.last_pdc_failure().peer, kB);
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
// probe, or A takes it for proof that B still holds the answer and waits for good. A
// takes B's NACK for a PDC B forgot, and probes again on one of its own
// (pds_orphan.cc): B refuses its SYN, and A gives B up.
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
  EXPECT_EQ(a.stats().pdcs_reopened, 1u);
  const auto again = drain_tx(a, us(t + 5));
  ASSERT_EQ(again.size(), 1u);
  ASSERT_TRUE(again[0].is_ctrl);
  ASSERT_TRUE(again[0].ctrl.flags & wire::ctrl_flags::kSyn);
  b.on_ctrl(kA, again[0].ctrl, 0, us(t + 6));
  const auto refusals = headers_of<wire::PdsNack>(control(b));
  ASSERT_FALSE(refusals.empty());
  EXPECT_EQ(refusals[0].code, wire::NackCode::kInvalidSyn);
  a.on_nack(kB, refusals[0], us(t + 7));
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
