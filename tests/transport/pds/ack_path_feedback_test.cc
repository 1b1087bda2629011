// What an ACK teaches the sender's path selector. The target returns each ACK on the EV
// of the request that triggered it, so an ACK that arrives on that EV shows the EV's
// paths work both ways (Feedback::kGood); the other packets it covers are known only to
// have got there (kDelivered). REPS recycles and resends on both, and a timeout's freeze
// keeps to the EVs known good both ways while it knows any (congestion/paths/reps.h).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "congestion/paths/reps.h"
#include "tests/transport/pds/pds_pair.h"
#include "transport/pds/pds.h"

namespace spray::pds::test {
namespace {

struct AckPathFeedback : RepsPair {
  // A sends four packets, B gets them all and answers with one ACK.
  void SetUp() override {
    a.enqueue(kB, Mode::kRud, run(0, 4), us(0));
    sent = drain_tx(a, us(0));
    ASSERT_EQ(sent.size(), 4u);
    for (const TxPacket& pkt : sent) {
      ASSERT_EQ(deliver(b, kA, pkt), RxVerdict::kDeliver);
      sent_evs.insert(pkt.entropy);
    }
    const auto out = control(b);
    ASSERT_EQ(out.size(), 1u);
    ack_ev = out[0].entropy;
    ack = std::get<wire::PdsAck>(out[0].header);
  }
  // A sends two packets more, both lost; its timeout resends the first and freezes its
  // selector. Returns the EVs of the 8 packets A sends next, during the freeze.
  std::vector<uint16_t> evs_sent_in_a_freeze() {
    a.enqueue(kB, Mode::kRud, run(1, 2), us(20));
    EXPECT_EQ(drain_tx(a, us(20)).size(), 2u);
    int64_t t = 20;
    std::vector<uint16_t> evs;
    for (const TxPacket& pkt : next_send_of_a(t)) evs.push_back(pkt.entropy);
    EXPECT_EQ(evs.size(), 1u);
    EXPECT_TRUE(static_cast<const paths::RepsSelector&>(*a.pdc(sent[0].pdc)->paths).frozen());
    a.enqueue(kB, Mode::kRud, run(2, 7), us(t));
    for (const TxPacket& pkt : drain_tx(a, us(t))) evs.push_back(pkt.entropy);
    EXPECT_EQ(evs.size(), 8u);
    return evs;
  }
  size_t recycled() const {
    return static_cast<const paths::RepsSelector&>(*a.pdc(sent[0].pdc)->paths).cached();
  }
  std::vector<TxPacket> sent;
  std::set<uint16_t> sent_evs;
  std::optional<uint16_t> ack_ev;
  wire::PdsAck ack;
};

TEST_F(AckPathFeedback, the_ack_returns_on_the_ev_of_its_trigger) {
  ASSERT_TRUE(ack_ev.has_value());
  EXPECT_EQ(*ack_ev, sent.back().entropy);
  EXPECT_EQ(ack.cack_psn + static_cast<uint32_t>(ack.ack_psn_offset), sent.back().request.psn);
}

TEST_F(AckPathFeedback, arriving_on_its_triggers_ev__makes_that_ev_alone_a_freezes_choice) {
  a.on_ack(kB, ack, us(10), sent.back().entropy);
  ASSERT_EQ(a.acked().size(), 4u);
  EXPECT_EQ(a.stats().acks_on_trigger_ev, 1u);
  EXPECT_EQ(recycled(), 4u);  // all four got there: all are reused for new packets
  for (uint16_t ev : evs_sent_in_a_freeze()) EXPECT_EQ(ev, sent.back().entropy);
}

// An extra copy of an ACK goes on another EV than its trigger's (Pds::kControlCopies):
// it shows that EV's way back works, but not the way there. With no EV known good both
// ways, a freeze falls back to the delivered ones: the timeout blames the first lost
// packet's EV, recycled from the first of the four, and drops it with the older ones.
TEST_F(AckPathFeedback, arriving_on_another_ev__shows_delivery_only) {
  uint16_t other = 0;
  while (sent_evs.count(other) != 0) ++other;
  a.on_ack(kB, ack, us(10), other);
  ASSERT_EQ(a.acked().size(), 4u);
  EXPECT_EQ(a.stats().acks_on_trigger_ev, 0u);
  EXPECT_EQ(recycled(), 4u);
  const std::set<uint16_t> newer{sent[1].entropy, sent[2].entropy, sent[3].entropy};
  std::set<uint16_t> used;
  for (uint16_t ev : evs_sent_in_a_freeze()) used.insert(ev);
  EXPECT_EQ(used, newer);
}

// A datapath that does not show the arrival EV (verbs) sprays ACKs: every packet an ACK
// covers counts as good both ways, as before the distinction was made. The timeout
// blames the first lost packet's EV, recycled from the first of the four, and with it
// drops the older ones: the freeze cycles over the other three.
TEST_F(AckPathFeedback, with_no_arrival_ev__every_covered_ev_is_good_both_ways) {
  a.on_ack(kB, ack, us(10));
  ASSERT_EQ(a.acked().size(), 4u);
  const std::set<uint16_t> newer{sent[1].entropy, sent[2].entropy, sent[3].entropy};
  std::set<uint16_t> used;
  for (uint16_t ev : evs_sent_in_a_freeze()) used.insert(ev);
  EXPECT_EQ(used, newer);
}

}  // namespace
}  // namespace spray::pds::test
