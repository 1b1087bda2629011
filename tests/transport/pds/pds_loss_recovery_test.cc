// PDS when packets do not get through, driven directly (two Pds instances, headers
// carried by hand, time set by the test): retransmission and its ACKs, SACK and RACK,
// timeouts and their probes, trims, refusals for room, two-copy resends, and retries
// running out.
#include <gtest/gtest.h>

#include <array>
#include <variant>
#include <vector>

#include "tests/transport/pds/pds_pair.h"
#include "transport/pds/pds.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

TEST_F(Pair, retransmission__is_answered_by_three_ack_copies) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  const auto lost = drain_tx(a, us(0));  // the first copy never arrives
  ASSERT_EQ(lost.size(), 1u);
  a.on_timers(us(1000));  // past the RTO
  const auto resent = drain_tx(a, us(1000));
  ASSERT_EQ(resent.size(), 1u);
  ASSERT_TRUE(resent[0].request.flags & wire::request_flags::kRetransmit);
  // New to B, but the sender heard nothing the first time (the data or B's ACK was lost,
  // maybe on a dead path): the answer goes out in three copies, one per EV.
  EXPECT_EQ(deliver(b, kA, resent[0]), RxVerdict::kDeliver);
  const auto acks = control(b);
  ASSERT_EQ(acks.size(), 3u);
  for (const auto& c : acks) {
    EXPECT_EQ(std::get<wire::PdsAck>(c.header).cack_psn, resent[0].request.psn);
  }
  a.on_ack(kB, std::get<wire::PdsAck>(acks[0].header), us(1010));
  EXPECT_EQ(a.acked().size(), 1u);
  // A first transmission is answered once.
  a.enqueue(kB, Mode::kRud, run(1, 1), us(1020));
  for (const auto& pkt : drain_tx(a, us(1020))) EXPECT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
  EXPECT_EQ(control(b).size(), 1u);
}

// ROD: a packet SACKed behind a gap is held at the target, not delivered. Its send
// completes when the gap fills, and fails (rather than having succeeded) if the PDC
// fails first.
TEST_F(Pair, rod__a_sacked_packet_completes_only_once_the_gap_before_it_fills) {
  a.enqueue(kB, Mode::kRod, run(0, 1), us(0));
  a.enqueue(kB, Mode::kRod, run(1, 1), us(0));
  const auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(deliver(b, kA, tx[1], 0x1111), RxVerdict::kHold);  // the first is still missing
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).at(0).header), us(5));
  EXPECT_TRUE(a.acked().empty());  // SACKed, but held: message 1 is not delivered yet
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDeliver);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).at(0).header), us(10));
  ASSERT_EQ(a.acked().size(), 2u);  // each reported once, in order
  EXPECT_EQ(a.acked()[0].message, 0u);
  EXPECT_EQ(a.acked()[1].message, 1u);
}

TEST_F(Pair, rod__a_held_packets_send_fails_with_its_pdc) {
  a.enqueue(kB, Mode::kRod, run(0, 1), us(0));
  a.enqueue(kB, Mode::kRod, run(1, 1), us(0));
  const auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  deliver(b, kA, tx[1], 0x1111);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).at(0).header), us(5));
  // The first packet never gets through: retries run out and the PDC fails.
  for (int64_t t = 100; a.failed().empty() && t < 1'000'000; t += 100) {
    a.on_timers(us(t));
    drain_tx(a, us(t));
  }
  EXPECT_TRUE(a.acked().empty());
  std::vector<uint32_t> failed;
  for (const auto& f : a.failed()) failed.push_back(f.message);
  EXPECT_EQ(failed, (std::vector<uint32_t>{0, 1}));
}

// Retries are counted in 8 bits: asked for more than Pds::kMaxRetries, a PSN still
// gives up after kMaxRetries. (Asked for 300, the count wrapped at 255 and a dead peer's
// PDC retried for ever.)
PdsConfig many_retries_config() {
  PdsConfig c = config();
  c.max_retries = 300;
  c.max_rto = Duration::microseconds(200);  // keeps the test's clock loop short
  return c;
}
using ManyRetriesPair = PairWith<many_retries_config>;

TEST_F(ManyRetriesPair, a_dead_peer__fails_the_pdc_after_at_most_kmaxretries) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  size_t sent = drain_tx(a, us(0)).size();
  for (int64_t t = 10; a.failed().empty() && t < 10'000'000; t += 10) {
    a.on_timers(us(t));
    sent += drain_tx(a, us(t)).size();
  }
  ASSERT_EQ(a.failed().size(), 1u);
  // The first try, kMaxRetries resends, and from kTwinFromTry on a second copy of each.
  EXPECT_EQ(sent, 1 + Pds::kMaxRetries + (Pds::kMaxRetries - Pds::kTwinFromTry + 1));
}

TEST_F(Pair, reordered_acks__the_overtaken_one_is_stale_not_bad) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  deliver(b, kA, tx[0]);
  const auto first = control(b);
  deliver(b, kA, tx[1]);
  const auto second = control(b);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  a.on_ack(kB, std::get<wire::PdsAck>(second[0].header), us(10));  // sprayed: arrives first
  a.on_ack(kB, std::get<wire::PdsAck>(first[0].header), us(11));
  EXPECT_EQ(a.acked().size(), 2u);
  EXPECT_EQ(a.stats().stale_acks, 1u);
  EXPECT_EQ(a.stats().bad_packets, 0u);
}

TEST_F(Pair, sack__acknowledges_around_a_hole_and_rack_retransmits_it) {
  a.enqueue(kB, Mode::kRud, run(0, 10), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 10u);
  for (size_t i = 0; i < tx.size(); ++i) {
    if (i != 2) deliver(b, kA, tx[i]);
  }
  auto acks = control(b);
  ASSERT_FALSE(acks.empty());
  const auto& ack = std::get<wire::PdsAck>(acks.back().header);
  EXPECT_EQ(ack.cack_psn, tx[1].request.psn);
  EXPECT_EQ(ack.sack_bitmap, 0x7fu << 1);  // PSNs 3..9 relative to the hole at bit 0
  a.on_ack(kB, ack, us(40));
  EXPECT_EQ(a.acked().size(), 9u);
  // A later-sent packet was acknowledged long after: the hole is lost, not reordered.
  // (RACK compares send times; all were sent at t=0 so nothing is inferred yet.)
  EXPECT_TRUE(drain_tx(a, us(40)).empty());
  // The RTO recovers it. That ACK gave a 40 us RTT sample: RTO = 40 + 4 * 20 = 120 us,
  // armed at t=40, so the timer fires at 160 and not before.
  a.on_timers(us(150));
  EXPECT_TRUE(drain_tx(a, us(150)).empty());
  a.on_timers(us(160));
  auto rtx = drain_tx(a, us(160));
  ASSERT_EQ(rtx.size(), 1u);
  EXPECT_EQ(rtx[0].request.psn, tx[2].request.psn);
  EXPECT_TRUE(rtx[0].request.flags & wire::request_flags::kRetransmit);
  EXPECT_EQ(deliver(b, kA, rtx[0]), RxVerdict::kDeliver);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(170));
  EXPECT_EQ(a.acked().size(), 10u);
}

TEST_F(Pair, timeout__probes_with_one_packet_when_only_acks_were_lost) {
  a.enqueue(kB, Mode::kRud, run(0, 20), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 20u);
  for (const auto& pkt : tx) deliver(b, kA, pkt);
  control(b);  // every ACK is lost on the way back
  a.on_timers(us(100));
  auto probe = drain_tx(a, us(100));
  ASSERT_EQ(probe.size(), 1u);  // not the whole window
  EXPECT_EQ(probe[0].request.psn, tx[0].request.psn);
  EXPECT_EQ(deliver(b, kA, probe[0]), RxVerdict::kDuplicate);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(110));
  EXPECT_EQ(a.acked().size(), 20u);
  EXPECT_TRUE(drain_tx(a, us(110)).empty());
  EXPECT_EQ(a.stats().retransmits, 1u);
}

TEST_F(Pair, timeout__probe_ack_makes_rack_resend_a_lost_tail_at_once) {
  a.enqueue(kB, Mode::kRud, run(0, 20), us(0));
  auto tx = drain_tx(a, us(0));
  for (size_t i = 0; i < 10; ++i) deliver(b, kA, tx[i]);
  control(b);  // PSNs 10..19 and every ACK are lost
  a.on_timers(us(100));
  auto probe = drain_tx(a, us(100));
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].request.psn, tx[0].request.psn);
  deliver(b, kA, probe[0]);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(110));
  EXPECT_EQ(a.acked().size(), 10u);
  // The probe, sent at t=100, was acknowledged: everything sent at t=0 and still
  // outstanding is lost. It goes now, not one timeout per packet.
  auto tail = drain_tx(a, us(110));
  ASSERT_EQ(tail.size(), 10u);
  for (size_t i = 0; i < tail.size(); ++i) {
    EXPECT_EQ(tail[i].request.psn, tx[10 + i].request.psn);
    deliver(b, kA, tail[i]);
  }
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(120));
  EXPECT_EQ(a.acked().size(), 20u);
  EXPECT_EQ(a.stats().rack_retransmits, 10u);
}

// A timeout that was only late (the target busy, its ACKs still on their way) resends
// the oldest PSN. When the late ACK for its first copy comes, the resend's send time
// must not make RACK take every packet sent before it for lost: they arrived, and their
// ACKs follow. That ACK names another PSN as its trigger (the newest the target had),
// while the target answers the resend itself with an ACK that names it (see
// timeout__probe_ack_makes_rack_resend_a_lost_tail_at_once).
TEST_F(Pair, rack__an_ack_not_triggered_by_a_resend_does_not_date_it) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  ASSERT_EQ(deliver(b, kA, drain_tx(a, us(0)).at(0)), RxVerdict::kDeliver);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(30));  // RTT 30 us
  a.enqueue(kB, Mode::kRud, run(1, 20), us(100));
  const auto tx = drain_tx(a, us(100));
  ASSERT_EQ(tx.size(), 20u);
  for (size_t i = 0; i < 10; ++i) ASSERT_EQ(deliver(b, kA, tx[i]), RxVerdict::kDeliver);
  const auto first_half = std::get<wire::PdsAck>(control(b).back().header);
  for (size_t i = 10; i < 20; ++i) ASSERT_EQ(deliver(b, kA, tx[i]), RxVerdict::kDeliver);
  const auto second_half = std::get<wire::PdsAck>(control(b).back().header);
  // Both ACKs are late: the timeout resends the oldest PSN at t=400.
  a.on_timers(us(400));
  const auto probe = drain_tx(a, us(400));
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].request.psn, tx[0].request.psn);
  // 50 us after the resend, longer than the 30 us round trip: only its trigger, the tenth
  // PSN, tells that it answers the first copy.
  ASSERT_EQ(first_half.cack_psn + static_cast<uint32_t>(first_half.ack_psn_offset),
            tx[9].request.psn);
  a.on_ack(kB, first_half, us(450));
  EXPECT_TRUE(drain_tx(a, us(450)).empty());
  a.on_ack(kB, second_half, us(460));
  EXPECT_EQ(a.acked().size(), 21u);
  EXPECT_EQ(a.stats().rack_retransmits, 0u);
  EXPECT_EQ(a.stats().retransmits, 1u);  // the timeout's probe alone
}

TEST_F(Pair, rack__infers_loss_from_a_later_sent_packet) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  auto first = drain_tx(a, us(0));
  a.enqueue(kB, Mode::kRud, run(1, 1), us(50));
  auto second = drain_tx(a, us(50));  // sent 50 us later, beyond the reorder window
  deliver(b, kA, second[0]);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(60));
  auto rtx = drain_tx(a, us(60));
  ASSERT_EQ(rtx.size(), 1u);
  EXPECT_EQ(rtx[0].request.psn, first[0].request.psn);
  EXPECT_EQ(a.stats().rack_retransmits, 1u);
}

TEST_F(Pair, trimmed__nack_triggers_immediate_retransmission) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  auto tx = drain_tx(a, us(0));
  RxClass c = b.classify_request(kA, tx[0].request, /*trimmed=*/true, 0, us(1));
  EXPECT_EQ(c.verdict, RxVerdict::kReject);
  auto nacks = control(b);
  ASSERT_EQ(nacks.size(), 1u);
  const auto& nack = std::get<wire::PdsNack>(nacks[0].header);
  EXPECT_EQ(nack.code, wire::NackCode::kTrimmed);
  a.on_nack(kB, nack, us(2));
  auto rtx = drain_tx(a, us(2));
  ASSERT_EQ(rtx.size(), 1u);
  EXPECT_EQ(rtx[0].request.psn, tx[0].request.psn);
  EXPECT_EQ(a.stats().trim_retransmits, 1u);
}

TEST_F(Pair, trimmed__many_times_is_congestion_not_a_dead_peer) {
  // max_retries is 3 here: a packet trimmed ten times in a row (a long incast) must
  // keep being retransmitted, because every trim NACK proves the target alive.
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  auto tx = drain_tx(a, us(0));
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(tx.size(), 1u) << "trim " << i;
    b.classify_request(kA, tx[0].request, /*trimmed=*/true, 0, us(1 + i));
    a.on_nack(kB, std::get<wire::PdsNack>(control(b).back().header), us(2 + i));
    tx = drain_tx(a, us(2 + i));
  }
  EXPECT_TRUE(a.failed().empty());
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDeliver);
  EXPECT_EQ(a.stats().trim_retransmits, 10u);
}

TEST_F(Pair, refused_for_room__many_times_is_not_a_dead_peer) {
  // max_retries is 3 here. A target out of message slots refuses ten times in a row;
  // each refusal proves it alive, so the RTO keeps retrying instead of failing the PDC.
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  auto tx = drain_tx(a, us(0));
  int64_t t = 1;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(tx.size(), 1u) << "refusal " << i;
    // As the engine does: PDS would deliver it, SES has no room, PDS refuses it.
    ASSERT_EQ(b.classify_request(kA, tx[0].request, false, 0, us(t)).verdict, RxVerdict::kDeliver);
    b.refuse_request(kA, tx[0].request, wire::NackCode::kNoSesMessageAvailable);
    const auto nacks = control(b);
    ASSERT_EQ(nacks.size(), 1u);
    a.on_nack(kB, std::get<wire::PdsNack>(nacks[0].header), us(t));
    EXPECT_TRUE(drain_tx(a, us(t)).empty());  // not at once: the target needs time
    t += 25'000;                              // past the RTO, however far backed off
    a.on_timers(us(t));
    tx = drain_tx(a, us(t));
  }
  EXPECT_TRUE(a.failed().empty());
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDeliver);
}

// A packet the target refused while the PDC was still in SYN form goes again as soon as
// the target names its PDC, not at the next RTO: the RTO restarts at every ACK that
// makes progress, so with the window streaming the refused packet waited behind all of
// it while its neighbours' retries ran out.
TEST_F(Pair, refused_syn_packet__goes_again_once_the_target_names_its_pdc) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  ASSERT_EQ(b.classify_request(kA, tx[0].request, false, 0, us(1)).verdict, RxVerdict::kDeliver);
  b.refuse_request(kA, tx[0].request, wire::NackCode::kNoSesMessageAvailable);
  const auto nacks = control(b);
  ASSERT_EQ(nacks.size(), 1u);
  a.on_nack(kB, std::get<wire::PdsNack>(nacks[0].header), us(2));
  EXPECT_TRUE(drain_tx(a, us(2)).empty());  // still SYN form: it waits for the RTO
  // The second packet opens the PDC at B; its ACK names it.
  ASSERT_EQ(deliver(b, kA, tx[1]), RxVerdict::kDeliver);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(10));
  const auto again = drain_tx(a, us(10));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].request.psn, tx[0].request.psn);
  EXPECT_FALSE(again[0].request.is_syn());
  EXPECT_EQ(deliver(b, kA, again[0]), RxVerdict::kDeliver);
  a.on_ack(kB, std::get<wire::PdsAck>(control(b).back().header), us(20));
  EXPECT_EQ(a.acked().size(), 2u);
}

// A SYN refused for want of room after timeouts had backed its RTO off is resent a plain
// RTO apart: the refusal shows the target alive, and the target holds its turn only a
// few RTOs (pds_reclaim.cc). Resent every backed-off RTO, one rank's SYN lost its turn
// before each retry while the other ranks' SYNs took every slot that freed.
TEST_F(Pair, syn_refused_for_room__goes_again_a_plain_rto_apart_after_backing_off) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  ASSERT_EQ(drain_tx(a, us(0)).size(), 1u);
  int64_t t = 0;
  std::vector<TxPacket> resend;
  for (int lost = 0; lost < 2; ++lost) resend = next_send_of_a(t);  // RTO doubles twice
  ASSERT_EQ(resend.size(), 1u);
  wire::PdsNack refusal;
  refusal.code = wire::NackCode::kNoPdcAvailable;
  refusal.psn = resend[0].request.psn;
  refusal.dpdcid = resend[0].request.spdcid;
  a.on_nack(kB, refusal, us(t + 10));
  ASSERT_EQ(next_send_of_a(t).size(), 1u);  // the timer armed before the refusal
  const int64_t before = t;
  ASSERT_EQ(next_send_of_a(t).size(), 1u);
  const Duration plain = config().initial_rto;
  EXPECT_LE(us(t) - us(before), plain + Duration::microseconds(10));
  EXPECT_TRUE(a.failed().empty());
}

// A target that refuses a SYN for want of room (NO_PDC_AVAIL) got it on that EV and
// answered on it: the resend goes there too. Knowing no good EV, REPS explored a fresh
// one for every try, and with one of two paths dead a PSN's twelve tries went ten times
// to it (spray-transfer seed 8).
TEST_F(RepsPair, syn_refused_for_room__goes_again_on_the_ev_that_reached_the_target) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 1u);
  // The first copy is lost; the timeout's resend explores another EV and reaches B.
  int64_t t = 0;
  const std::vector<TxPacket> again = next_send_of_a(t, 50);
  ASSERT_EQ(again.size(), 1u);
  const uint16_t reached = again[0].entropy;
  wire::PdsNack refusal;
  refusal.code = wire::NackCode::kNoPdcAvailable;
  refusal.psn = again[0].request.psn;
  refusal.dpdcid = again[0].request.spdcid;
  a.on_nack(kB, refusal, us(t + 10));
  // Each later resend of the refused SYN takes that EV.
  for (int i = 0; i < 3; ++i) {
    const std::vector<TxPacket> next = next_send_of_a(t, 50);
    ASSERT_EQ(next.size(), 1u) << "resend " << i;
    EXPECT_EQ(next[0].entropy, reached) << "resend " << i;
    refusal.psn = next[0].request.psn;
    a.on_nack(kB, refusal, us(t + 10));
  }
  EXPECT_TRUE(a.failed().empty());
}

// From a PSN's third try (Pds::kTwinFromTry) each resend goes as two copies on
// different EVs, and the ACK, which cannot tell which copy arrived, reports neither EV
// good.
TEST_F(RepsPair, resend_from_the_third_try__goes_as_two_copies_on_different_evs) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  const auto first = drain_tx(a, us(0));
  ASSERT_EQ(first.size(), 1u);
  int64_t t = 0;
  for (uint8_t tries = 1; tries < Pds::kTwinFromTry; ++tries) {
    ASSERT_EQ(next_send_of_a(t).size(), 1u) << "try " << int{tries};
  }
  const auto twins = next_send_of_a(t);
  ASSERT_EQ(twins.size(), 2u);
  EXPECT_EQ(twins[0].request.psn, first[0].request.psn);
  EXPECT_EQ(twins[1].request.psn, first[0].request.psn);
  EXPECT_NE(twins[0].entropy, twins[1].entropy);
  EXPECT_EQ(a.stats().twin_copies, 1u);
  EXPECT_EQ(a.stats().retransmits, uint64_t{Pds::kTwinFromTry});  // a copy is no try

  ASSERT_EQ(deliver(b, kA, twins[1]), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(b, kA, twins[0]), RxVerdict::kDuplicate);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(t + 10));
  ASSERT_EQ(a.acked().size(), 1u);
  std::array<uint16_t, 8> good{};
  EXPECT_EQ(a.pdc(twins[1].pdc)->paths->good_entropies(good), 0u);
}

// With one EV there is no second copy to send: the resend goes alone, and its ACK names
// its EV good as any ACK does (it was once marked as sent twice, and REPS lost the report).
PdsConfig one_ev_reps_config() {
  PdsConfig c = reps_config();
  c.entropy_count = 1;
  return c;
}
using OneEvRepsPair = PairWith<one_ev_reps_config>;

TEST_F(OneEvRepsPair, resend_with_no_second_ev__goes_once_and_its_ack_names_its_ev) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  ASSERT_EQ(drain_tx(a, us(0)).size(), 1u);
  int64_t t = 0;
  std::vector<TxPacket> resend;
  for (uint8_t tries = 1; tries <= Pds::kTwinFromTry; ++tries) {
    resend = next_send_of_a(t);
    ASSERT_EQ(resend.size(), 1u) << "try " << int{tries};
  }
  EXPECT_EQ(a.stats().twin_copies, 0u);
  ASSERT_EQ(deliver(b, kA, resend[0]), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(t + 10));
  ASSERT_EQ(a.acked().size(), 1u);
  std::array<uint16_t, 8> good{};
  ASSERT_EQ(a.pdc(resend[0].pdc)->paths->good_entropies(good), 1u);
  EXPECT_EQ(good[0], resend[0].entropy);
}

TEST_F(Pair, retries__exhausted_fail_the_messages_with_peer_unreachable) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  a.enqueue(kB, Mode::kRud, run(1, 5), us(0));
  drain_tx(a, us(0));
  int64_t t = 0;
  for (int i = 0; i < 50 && a.failed().empty(); ++i) {
    t += 25'000;
    a.on_timers(us(t));
    drain_tx(a, us(t));
  }
  ASSERT_FALSE(a.failed().empty());
  for (const auto& f : a.failed()) EXPECT_EQ(f.status, Status::kPeerUnreachable);
  EXPECT_EQ(a.open_pdcs(), 0u);
  EXPECT_EQ(a.failed_peers(), std::vector<PeerIndex>{kB});
  EXPECT_GE(a.stats().timeouts, 3u);
  // Why, for the log: the first send and every retry went unanswered.
  EXPECT_EQ(a.stats().pdcs_failed_unanswered, 1u);
  EXPECT_EQ(a.last_pdc_failure().why, PdcFailure::kUnanswered);
  EXPECT_EQ(a.last_pdc_failure().peer, kB);
  EXPECT_EQ(a.last_pdc_failure().tries, a.config().max_retries + 1);
}

// A RUD packet SACKed is reported acknowledged at once, and its message may finish and
// its SES slot go to another message. When the PDC fails later, only what was never
// reported acknowledged may be reported failed: a second report for that slot failed
// an innocent message whose run was still queued (a heap overflow followed).
TEST_F(Pair, rud_sacked_packet__is_not_reported_failed_when_its_pdc_fails) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  a.enqueue(kB, Mode::kRud, run(1, 1), us(0));
  const auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  ASSERT_EQ(deliver(b, kA, tx[1]), RxVerdict::kDeliver);  // message 0's packet is lost
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
  ASSERT_EQ(a.acked().size(), 1u);
  EXPECT_EQ(a.acked()[0].message, 1u);  // SACKed behind the hole
  int64_t t = 1;
  for (int i = 0; i < 50 && a.failed().empty(); ++i) {
    t += 25'000;
    a.on_timers(us(t));
    drain_tx(a, us(t));
  }
  ASSERT_EQ(a.failed().size(), 1u);
  EXPECT_EQ(a.failed()[0].message, 0u);
}

}  // namespace
}  // namespace spray::pds
