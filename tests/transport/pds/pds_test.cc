// PDS driven directly: two Pds instances, headers carried by hand, time set by the test.
#include "transport/pds/pds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>

#include <variant>

#include "tests/transport/pds/pds_pair.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

TEST_F(Pair, syn__establishes_without_an_extra_round_trip) {
  ASSERT_EQ(a.enqueue(kB, Mode::kRud, run(0, 3), us(0)), Status::kOk);
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 3u);
  for (const auto& p : tx) {
    EXPECT_TRUE(p.request.is_syn());  // every packet before the first ACK carries SYN
    EXPECT_EQ(p.request.syn.psn_offset, p.request.psn - tx[0].request.psn);
  }
  // B delivers data from the very first packet: no handshake round trip.
  for (const auto& p : tx) EXPECT_EQ(deliver(b, kA, p), RxVerdict::kDeliver);
  auto acks = control(b);
  ASSERT_EQ(acks.size(), 1u);
  const auto& ack = std::get<wire::PdsAck>(acks[0].header);
  EXPECT_EQ(ack.cack_psn, tx[2].request.psn);
  EXPECT_EQ(ack.dpdcid, tx[0].request.spdcid);
  a.on_ack(kB, ack, us(5));
  EXPECT_EQ(a.acked().size(), 3u);
  // The ACK named B's PDC; the next packet uses it and drops SYN.
  ASSERT_EQ(a.enqueue(kB, Mode::kRud, run(1, 1), us(5)), Status::kOk);
  auto next = drain_tx(a, us(5));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_FALSE(next[0].request.is_syn());
  EXPECT_EQ(next[0].request.dpdcid, ack.spdcid);
  EXPECT_EQ(deliver(b, kA, next[0]), RxVerdict::kDeliver);
}

TEST_F(Pair, duplicates__are_suppressed_and_reacknowledged) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  auto tx = drain_tx(a, us(0));
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDuplicate);
  EXPECT_EQ(deliver(b, kA, tx[1]), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(b, kA, tx[1]), RxVerdict::kDuplicate);
  EXPECT_EQ(b.stats().rx_duplicates, 2u);
  // A duplicate means an ACK was lost: each is answered at once, in three identical
  // copies (the engine sends each on its own EV, so they take different return paths).
  const auto acks = control(b);
  ASSERT_EQ(acks.size(), 6u);
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(std::get<wire::PdsAck>(acks[i].header).cack_psn, tx[i / 3].request.psn) << i;
  }
  // Once answered, the next ACK is single again.
  a.enqueue(kB, Mode::kRud, run(1, 1), us(1));
  for (const auto& pkt : drain_tx(a, us(1))) EXPECT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
  EXPECT_EQ(control(b).size(), 1u);
}

// An ACK returns on the EV the latest request arrived on: that path just delivered and,
// where both directions are routed alike, it returns too. Extra copies name no EV (the
// engine sends each on its next EV in turn). A NACK returns on its request's EV too.
TEST_F(Pair, acks_and_nacks__return_on_the_ev_their_request_arrived_on) {
  a.enqueue(kB, Mode::kRud, run(0, 2), us(0));
  auto tx = drain_tx(a, us(0));
  ASSERT_EQ(tx.size(), 2u);
  tx[0].entropy = 7;  // as if they arrived on these EVs
  tx[1].entropy = 9;
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(b, kA, tx[1]), RxVerdict::kDeliver);
  auto out = control(b);
  ASSERT_EQ(out.size(), 1u);  // one ACK for both
  EXPECT_EQ(out[0].entropy, std::optional<uint16_t>{9});
  tx[0].entropy = 11;
  EXPECT_EQ(deliver(b, kA, tx[0]), RxVerdict::kDuplicate);
  out = control(b);
  ASSERT_EQ(out.size(), size_t{Pds::kControlCopies});
  EXPECT_EQ(out[0].entropy, std::optional<uint16_t>{11});
  for (size_t i = 1; i < out.size(); ++i) EXPECT_FALSE(out[i].entropy) << i;

  a.enqueue(kB, Mode::kRud, run(1, 1), us(1));
  const TxPacket cut = drain_tx(a, us(1)).at(0);
  EXPECT_EQ(b.classify_request(kA, cut.request, /*trimmed=*/true, 13, us(2)).verdict,
            RxVerdict::kReject);
  out = control(b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::get<wire::PdsNack>(out[0].header).code, wire::NackCode::kTrimmed);
  EXPECT_EQ(out[0].entropy, std::optional<uint16_t>{13});
}

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
  std::vector<TxPacket> again;
  while (again.empty() && t < 10'000) {
    t += 50;
    a.on_timers(us(t));
    again = drain_tx(a, us(t));
  }
  ASSERT_EQ(again.size(), 1u);
  const uint16_t reached = again[0].entropy;
  wire::PdsNack refusal;
  refusal.code = wire::NackCode::kNoPdcAvailable;
  refusal.psn = again[0].request.psn;
  refusal.dpdcid = again[0].request.spdcid;
  a.on_nack(kB, refusal, us(t + 10));
  // Each later resend of the refused SYN takes that EV.
  for (int i = 0; i < 3; ++i) {
    std::vector<TxPacket> next;
    while (next.empty() && t < 100'000) {
      t += 50;
      a.on_timers(us(t));
      next = drain_tx(a, us(t));
    }
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
  auto next_resend = [&] {
    std::vector<TxPacket> out;
    while (out.empty() && t < 100'000) {
      t += 10;
      a.on_timers(us(t));
      out = drain_tx(a, us(t));
    }
    return out;
  };
  for (uint8_t tries = 1; tries < Pds::kTwinFromTry; ++tries) {
    ASSERT_EQ(next_resend().size(), 1u) << "try " << int{tries};
  }
  const auto twins = next_resend();
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
    resend.clear();
    while (resend.empty() && t < 100'000) {
      t += 10;
      a.on_timers(us(t));
      resend = drain_tx(a, us(t));
    }
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

PdsConfig wide_window_config() {
  PdsConfig c = config();
  c.window_packets = 256;
  return c;
}
using WidePair = PairWith<wide_window_config>;

// An ACK's 64 SACK bits end at the newest PSN when that is far beyond the cumulative
// point (emit_ack). A duplicate of an old PSN arriving among new packets must still be
// reported: it gets an ACK of its own at once. Folded into the next coalesced ACK it was
// not, and the sender resent it until its retries ran out (spray-transfer seed 1087 of
// the clean sweep).
TEST_F(WidePair, duplicate_behind_the_sack_bits__is_acknowledged_at_once) {
  a.enqueue(kB, Mode::kRud, run(0, 100), us(0));
  const auto first = drain_tx(a, us(0));
  ASSERT_EQ(first.size(), 100u);
  for (size_t i = 1; i < first.size(); ++i) deliver(b, kA, first[i]);  // PSN 0 is lost
  control(b);                                                          // and so are these ACKs
  a.enqueue(kB, Mode::kRud, run(1, 20), us(50));
  const auto more = drain_tx(a, us(50));
  ASSERT_EQ(more.size(), 20u);
  // A copy of PSN 1 (resent, or duplicated by the fabric) arrives with the new packets.
  EXPECT_EQ(deliver(b, kA, first[1]), RxVerdict::kDuplicate);
  for (const auto& pkt : more) deliver(b, kA, pkt);
  for (const auto& c : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, c, us(60));
  const auto& acked = a.acked();
  EXPECT_TRUE(std::any_of(acked.begin(), acked.end(), [](const PacketRef& r) {
    return r.message == 0 && r.index == 1;
  })) << "PSN 1 was never reported";
}

// REPS recycles an EV only when its ACK came back unmarked. The ACK of an ECN-marked
// packet must report that EV as congested, not as good and then congested.
TEST(PathFeedback, an_ecn_marked_ack_does_not_recycle_its_entropy) {
  for (const bool marked : {false, true}) {
    PdsConfig c = config();
    c.path_name = "reps";
    c.entropy_count = 0xffff;  // exploration repeating an EV: 1 in 65535
    Pds a{c}, b{c};
    TxRun first{}, second{};
    first.message = 0;
    second.message = 1;
    first.packet_count = second.packet_count = 1;
    first.packet_bytes = second.packet_bytes = 1000;
    ASSERT_EQ(a.enqueue(kB, Mode::kRud, &first, us(0)), Status::kOk);
    uint32_t pdc = 0;
    TxPacket sent;
    ASSERT_TRUE(a.pop_ready(pdc));
    ASSERT_TRUE(a.next_tx(pdc, us(0), sent));
    RxClass rx = b.classify_request(kA, sent.request, false, 0, us(1));
    ASSERT_EQ(rx.verdict, RxVerdict::kDeliver);
    b.commit_request(rx, marked);
    b.flush_acks();
    ASSERT_EQ(b.control_out().size(), 1u);
    const auto ack = std::get<wire::PdsAck>(b.control_out()[0].header);
    EXPECT_EQ((ack.flags & wire::ack_flags::kEcnMarked) != 0, marked);
    a.on_ack(kB, ack, us(5));
    ASSERT_EQ(a.enqueue(kB, Mode::kRud, &second, us(5)), Status::kOk);
    TxPacket next;
    ASSERT_TRUE(a.pop_ready(pdc));
    ASSERT_TRUE(a.next_tx(pdc, us(5), next));
    if (marked) {
      EXPECT_NE(next.entropy, sent.entropy) << "the marked EV was recycled";
    } else {
      EXPECT_EQ(next.entropy, sent.entropy) << "a clean EV is reused";
    }
  }
}

TEST(Rccc, receiver_shares_its_bdp_among_senders_with_a_backlog) {
  // Four senders ask one receiver for credit (their requests carry their backlog);
  // each ACK grants a quarter of the receiver's BDP, and a sender that is done no
  // longer counts.
  PdsConfig c = config();
  c.cc_name = "rccc";
  c.max_pdcs = 8;
  Pds receiver(c);
  std::vector<std::unique_ptr<Pds>> senders;
  std::vector<TxRun> runs(4);
  std::vector<TxPacket> first(4);
  for (uint32_t i = 0; i < 4; ++i) {
    senders.push_back(std::make_unique<Pds>(c));
    runs[i].message = i;
    runs[i].packet_count = 100;
    runs[i].packet_bytes = 1000;
    ASSERT_EQ(senders[i]->enqueue(100, Mode::kRud, &runs[i], us(0)), Status::kOk);
    uint32_t pdc = 0;
    ASSERT_TRUE(senders[i]->pop_ready(pdc));
    ASSERT_TRUE(senders[i]->next_tx(pdc, us(0), first[i]));
    EXPECT_TRUE(first[i].request.has_cc_state);
    EXPECT_EQ(first[i].request.cc_state, 99u * 1000);  // what is still to come
    RxClass rx = receiver.classify_request(i, first[i].request, false, 0, us(1));
    ASSERT_EQ(rx.verdict, RxVerdict::kDeliver);
    receiver.commit_request(rx, false);
  }
  receiver.flush_acks();
  ASSERT_EQ(receiver.control_out().size(), 4u);
  uint16_t receiver_pdc_of_0 = 0;
  for (const ControlPacket& cp : receiver.control_out()) {
    const auto& ack = std::get<wire::PdsAck>(cp.header);
    EXPECT_EQ(ack.cc_type, wire::kAckCcTypeCredit);
    EXPECT_EQ(ack.cc_state, c.cc.bdp_bytes() / 4);
    if (cp.peer == 0) receiver_pdc_of_0 = ack.spdcid;
  }
  receiver.control_out().clear();
  // Sender 0 says it has nothing left: the other three get a third each.
  wire::PdsRequest done = first[0].request;
  done.psn += 1;
  done.flags = 0;
  done.dpdcid = receiver_pdc_of_0;
  done.cc_state = 0;
  RxClass rx = receiver.classify_request(0, done, false, 0, us(3));
  ASSERT_EQ(rx.verdict, RxVerdict::kDeliver);
  receiver.commit_request(rx, false);
  receiver.flush_acks();
  ASSERT_EQ(receiver.control_out().size(), 1u);
  EXPECT_EQ(std::get<wire::PdsAck>(receiver.control_out()[0].header).cc_state,
            c.cc.bdp_bytes() / 3);
}

TEST(Rccc, a_small_share_paces_the_sender) {
  PdsConfig c = config();
  c.cc_name = "rccc";
  Pds sender(c), receiver(c);
  TxRun r{};
  r.message = 0;
  r.packet_count = 10;
  r.packet_bytes = c.cc.mtu_bytes;
  ASSERT_EQ(sender.enqueue(1, Mode::kRud, &r, us(0)), Status::kOk);
  uint32_t pdc = 0;
  TxPacket pkt;
  ASSERT_TRUE(sender.pop_ready(pdc));
  ASSERT_TRUE(sender.next_tx(pdc, us(0), pkt));
  RxClass rx = receiver.classify_request(0, pkt.request, false, 0, us(1));
  receiver.commit_request(rx, false);
  receiver.flush_acks();
  auto ack = std::get<wire::PdsAck>(receiver.control_out().at(0).header);
  ack.cc_state = c.cc.mtu_bytes / 4;  // as if 4x more senders than the BDP holds packets
  sender.on_ack(1, ack, us(2));
  // One packet per 4 base RTTs now: not at once, but after the gap (the pace timer
  // puts the PDC back on the ready list).
  ASSERT_TRUE(sender.pop_ready(pdc));
  ASSERT_TRUE(sender.next_tx(pdc, us(2), pkt));  // the first since the grant
  EXPECT_FALSE(sender.next_tx(pdc, us(3), pkt));
  rx = receiver.classify_request(0, pkt.request, false, 0, us(3));  // acknowledged quickly:
  receiver.commit_request(rx, false);                               // only the gap holds it
  receiver.control_out().clear();
  receiver.flush_acks();
  ack = std::get<wire::PdsAck>(receiver.control_out().at(0).header);
  ack.cc_state = c.cc.mtu_bytes / 4;
  sender.on_ack(1, ack, us(3));
  EXPECT_FALSE(sender.next_tx(pdc, us(4), pkt));
  const Duration gap = c.cc.base_rtt * 4;
  sender.on_timers(us(3) + gap);
  ASSERT_TRUE(sender.pop_ready(pdc));
  EXPECT_TRUE(sender.next_tx(pdc, us(3) + gap, pkt));
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

TEST_F(Pair, rod__holds_early_packets_and_releases_them_in_order) {
  a.enqueue(kB, Mode::kRod, run(0, 3), us(0));
  auto tx = drain_tx(a, us(0));
  EXPECT_TRUE(tx[0].request.ordered);
  EXPECT_EQ(deliver(b, kA, tx[2], 0xc), RxVerdict::kHold);  // before the PDC even exists
  EXPECT_EQ(deliver(b, kA, tx[1], 0xb), RxVerdict::kHold);
  uint64_t held = 0;
  RxClass first = b.classify_request(kA, tx[0].request, false, 0, us(0));
  ASSERT_EQ(first.verdict, RxVerdict::kDeliver);
  b.commit_request(first, false);
  EXPECT_TRUE(b.pop_in_order(first.pdc, held));
  EXPECT_EQ(held, 0xbu);
  EXPECT_TRUE(b.pop_in_order(first.pdc, held));
  EXPECT_EQ(held, 0xcu);
  EXPECT_FALSE(b.pop_in_order(first.pdc, held));
}

TEST_F(Pair, window__rejects_psns_beyond_it) {
  a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
  auto tx = drain_tx(a, us(0));
  deliver(b, kA, tx[0]);
  control(b);
  wire::PdsRequest far = tx[0].request;
  far.psn += 100000;
  EXPECT_EQ(b.classify_request(kA, far, false, 0, us(1)).verdict, RxVerdict::kReject);
  auto nacks = control(b);
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(std::get<wire::PdsNack>(nacks[0].header).code, wire::NackCode::kPsnOutOfWindow);
}

TEST_F(Pair, window__never_exceeds_the_configured_psn_count) {
  a.enqueue(kB, Mode::kRud, run(0, 200), us(0));
  EXPECT_EQ(drain_tx(a, us(0)).size(), 64u);
}

}  // namespace
}  // namespace spray::pds
