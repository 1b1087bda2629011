// PDC ids that come back: an engine gives its PDCs ids in turn from 1, so a process that
// restarts at a peer's address opens its first PDCs under the ids its predecessor used,
// with start PSNs of its own. Where the restart was seen, the peer forgot the
// predecessor's PDCs (Pds::forget_peer); where it was not (the predecessor opened them
// with packets that named no incarnation: responses, probes), the new SYNs met them.
// Until 2026-12-07 they fell in the old PDC's window and were refused as out of it, or
// refused as late copies of a closed one, and the new engine's sends failed after all
// their retries; a late packet of the old PDC, naming our reused id, also taught our new
// PDC a peer id that led nowhere. Found by restart_mid_flight_test.cc.
#include <gtest/gtest.h>

#include "tests/transport/pds/pds_pair.h"

namespace spray::pds {
namespace {

using namespace spray::pds::test;

PdsConfig successor_config() {
  PdsConfig c = config();
  c.seed = 2;  // other start PSNs than A's
  return c;
}

struct ReusedPdcId : Pair {
  Pds a2{successor_config()};  // A after a restart: a new engine at A's address

  // A's PDC to B, taken by B and acknowledged. Returns A's SYN.
  TxPacket open_a_to_b() {
    a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
    const auto syn = drain_tx(a, us(0));
    EXPECT_EQ(syn.size(), 1u);
    EXPECT_EQ(deliver(b, kA, syn.at(0)), RxVerdict::kDeliver);
    for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
    return syn.at(0);
  }
  // The successor's first SYN, under the same PDC id as `old` and another start PSN.
  TxPacket successors_syn(const TxPacket& old, Time now) {
    a2.enqueue(kB, Mode::kRud, run(1, 1), now);
    const auto syn = drain_tx(a2, now);
    EXPECT_EQ(syn.size(), 1u);
    EXPECT_EQ(syn.at(0).request.spdcid, old.request.spdcid);
    EXPECT_NE(syn.at(0).request.psn, old.request.psn);
    return syn.at(0);
  }
};

TEST_F(ReusedPdcId, a_syn_with_another_start_under_an_open_pdcs_id_opens_a_new_pdc) {
  const TxPacket old = open_a_to_b();
  const TxPacket syn = successors_syn(old, us(2));
  EXPECT_EQ(deliver(b, kA, syn, 0, us(2)), RxVerdict::kDeliver);
  EXPECT_EQ(b.stats().pdcs_superseded, 1u);
  EXPECT_EQ(b.open_pdcs(), 1u);
  // B's ACK names the new PDC, and the successor's next packet is taken on it.
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a2.on_ack(kB, ack, us(3));
  a2.enqueue(kB, Mode::kRud, run(2, 1), us(4));
  const auto next = drain_tx(a2, us(4));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_FALSE(next[0].request.is_syn()) << "the successor never heard B's ACK";
  EXPECT_EQ(deliver(b, kA, next[0], 0, us(4)), RxVerdict::kDeliver);
}

TEST_F(ReusedPdcId, a_late_copy_of_the_open_pdcs_syn_is_a_duplicate) {
  const TxPacket old = open_a_to_b();
  EXPECT_EQ(deliver(b, kA, old, 0, us(2)), RxVerdict::kDuplicate);
  EXPECT_EQ(b.stats().pdcs_superseded, 0u);
  EXPECT_EQ(b.open_pdcs(), 1u);
}

TEST_F(ReusedPdcId, a_syn_under_a_closed_pdcs_id_opens_a_new_pdc_where_a_late_copy_does_not) {
  const TxPacket old = open_a_to_b();
  ASSERT_EQ(a.close(kB, Mode::kRud, us(2)), Status::kOk);
  const auto close = drain_tx(a, us(2));
  ASSERT_EQ(close.size(), 1u);
  b.on_ctrl(kA, close[0].ctrl, 0, us(3));
  ASSERT_EQ(b.open_pdcs(), 0u) << "B still holds the PDC A closed";
  control(b);
  EXPECT_EQ(deliver(b, kA, old, 0, us(4)), RxVerdict::kReject) << "a late SYN reopened it";
  EXPECT_TRUE(control(b).empty());
  EXPECT_EQ(deliver(b, kA, successors_syn(old, us(5)), 0, us(5)), RxVerdict::kDeliver);
  EXPECT_EQ(b.open_pdcs(), 1u);
}

// The successor's PDC has sent its SYN and heard nothing yet; a late packet of B's on the
// PDC A's predecessor opened names the same id of ours. Its PSN is far outside our
// window: it is not B's answer to our SYN, and its PDC id (B's old one) must not become
// our PDC's peer id.
TEST_F(ReusedPdcId, a_late_packet_on_the_predecessors_pdc_teaches_ours_nothing) {
  const TxPacket old = open_a_to_b();
  b.enqueue(kA, Mode::kRud, answer(2, 1), us(2));  // on the PDC A opened
  const auto late = drain_tx(b, us(2));
  ASSERT_EQ(late.size(), 1u);
  ASSERT_EQ(late[0].request.dpdcid, old.request.spdcid);
  (void)successors_syn(old, us(3));  // lost
  EXPECT_EQ(deliver(a2, kB, late[0], 0, us(4)), RxVerdict::kReject);
  const auto nacks = headers_of<wire::PdsNack>(control(a2));
  ASSERT_FALSE(nacks.empty());
  EXPECT_EQ(nacks[0].code, wire::NackCode::kInvalidDpdcid);
  uint32_t index = 0;
  while (a2.pdc(index) == nullptr) ++index;
  EXPECT_FALSE(a2.pdc(index)->remote_known) << "our PDC took the old one's peer id";
}

// B restarts, and a late copy of A's SYN reaches its successor, which numbers its PDCs
// from 1 as B did: it opens a phantom of A's PDC under the id B had given it, and A's
// next packets, which name that id, land on it. Until 2026-12-08 the successor took them
// while A, deaf to its ACKs (they name PSNs behind A's left edge), failed them all the
// same (restart_mid_flight_test seeds 2357, 5186). A's packets say its left edge
// (clear_psn_offset): past the phantom's next PSN, what A had acknowledged was not
// acknowledged here, and the phantom goes as a PDC the successor never knew.
TEST_F(ReusedPdcId, a_pdc_opened_by_a_late_copy_of_its_syn_goes_when_its_sender_is_ahead) {
  const TxPacket old = open_a_to_b();
  Pds b2{config()};  // B after a restart: a new engine at B's address
  EXPECT_EQ(deliver(b2, kA, old, 0, us(2)), RxVerdict::kDeliver);  // the late copy
  a.enqueue(kB, Mode::kRud, run(1, 2), us(3));
  const auto more = drain_tx(a, us(3));
  ASSERT_EQ(more.size(), 2u);
  EXPECT_EQ(deliver(b, kA, more[0], 0, us(3)), RxVerdict::kDeliver);
  EXPECT_EQ(deliver(b, kA, more[1], 0, us(3)), RxVerdict::kDeliver);
  // Its left edge is the phantom's next PSN: nothing says it is a phantom yet.
  EXPECT_EQ(deliver(b2, kA, more[0], 0, us(3)), RxVerdict::kDeliver);
  for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(4));
  a.enqueue(kB, Mode::kRud, run(2, 1), us(5));
  const auto ahead = drain_tx(a, us(5));
  ASSERT_EQ(ahead.size(), 1u);
  ASSERT_EQ(ahead[0].request.clear_psn_offset, 0) << "B acknowledged everything before it";
  control(b2);
  EXPECT_EQ(deliver(b2, kA, ahead[0], 0, us(5)), RxVerdict::kReject);
  EXPECT_EQ(b2.stats().phantom_pdcs, 1u);
  EXPECT_EQ(b2.open_pdcs(), 0u);
  const auto nacks = headers_of<wire::PdsNack>(control(b2));
  ASSERT_FALSE(nacks.empty());
  for (const auto& nack : nacks) EXPECT_EQ(nack.code, wire::NackCode::kInvalidDpdcid);
  // At B, which did acknowledge them, the same packet is taken.
  EXPECT_EQ(deliver(b, kA, ahead[0], 0, us(5)), RxVerdict::kDeliver);
  EXPECT_EQ(b.stats().phantom_pdcs, 0u);
}

TEST_F(ReusedPdcId, received_before__tells_a_copy_of_a_packet_taken) {
  const TxPacket old = open_a_to_b();
  EXPECT_TRUE(b.received_before(kA, old.request));
  a.enqueue(kB, Mode::kRud, run(1, 1), us(2));
  const auto next = drain_tx(a, us(2));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_FALSE(b.received_before(kA, next[0].request));
  EXPECT_EQ(deliver(b, kA, next[0], 0, us(2)), RxVerdict::kDeliver);
  EXPECT_TRUE(b.received_before(kA, next[0].request));
  Pds b2{config()};
  EXPECT_FALSE(b2.received_before(kA, old.request)) << "a PDC it never had";
}

}  // namespace
}  // namespace spray::pds
