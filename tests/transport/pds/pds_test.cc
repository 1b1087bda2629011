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
  done.flags = wire::request_flags::kAckRequested;  // no SYN; asks for its ACK, as sent
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
  const auto acks = headers_of<wire::PdsAck>(control(b));
  ASSERT_EQ(acks.size(), 1u);
  // On the established PDC: a SYN with another start PSN would open another one
  // (reused_pdc_id_test.cc).
  wire::PdsRequest far = tx[0].request;
  far.flags &= static_cast<uint8_t>(~wire::request_flags::kSyn);
  far.dpdcid = acks[0].spdcid;
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

namespace spray::pds {
namespace {

// The initial congestion window (NSCC starts at one bandwidth-delay product) of the PDC
// that `pds` opened to `peer`; 0 when it has none.
uint32_t start_window_to(const Pds& pds, PeerIndex peer) {
  for (uint32_t i = 0; i < pds.config().max_pdcs; ++i) {
    const Pdc* p = pds.pdc(i);
    if (p != nullptr && p->peer == peer) return p->cc->window_bytes();
  }
  return 0;
}

// An engine that reaches some peers over shared memory and others over the network gives
// the latter their own base RTT; the PDCs opened to them size their window by it.
TEST(PeerBaseRtt, pdcs_to_a_peer_with_its_own_base_rtt_start_from_its_bandwidth_delay_product) {
  PdsConfig c = test::config();
  c.max_pdcs = 8;
  c.cc_name = "nscc";
  c.cc.line_rate_gbps = 100;
  c.cc.base_rtt = Duration::microseconds(10);  // 125,000 bytes in flight at 100 Gbit/s
  Pds pds(c);
  constexpr PeerIndex kNear = 1, kFar = 2, kFarThenReset = 3;
  pds.set_peer_base_rtt(kFar, Duration::microseconds(75));  // 937,500 bytes
  pds.set_peer_base_rtt(kFarThenReset, Duration::microseconds(75));
  pds.set_peer_base_rtt(kFarThenReset, Duration{});
  pds.set_peer_base_rtt(kNoPeer, Duration::microseconds(75));  // ignored
  std::vector<TxRun> runs(3);
  for (PeerIndex peer : {kNear, kFar, kFarThenReset}) {
    TxRun& r = runs[peer - 1];
    r.message = peer;
    r.packet_count = 1;
    r.packet_bytes = 1000;
    ASSERT_EQ(pds.enqueue(peer, Mode::kRud, &r, test::us(0)), Status::kOk);
  }
  EXPECT_EQ(start_window_to(pds, kNear), 125'000u);
  EXPECT_EQ(start_window_to(pds, kFar), 937'500u);
  EXPECT_EQ(start_window_to(pds, kFarThenReset), 125'000u);
}

}  // namespace
}  // namespace spray::pds
