// Ses::check_incarnation on hand-made requests: what the incarnation words of a peer's
// request say about it (transport/ses/ses_incarnation.cc). The engine tests
// (peer_restart_test.cc) drive the same through whole engines.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/transport/pds/pds_pair.h"
#include "transport/ses/ses.h"

namespace spray::ses {
namespace {

constexpr pds::PeerIndex kSender = 1;
constexpr uint16_t kOurIncarnation = 0x1234;

struct Incarnations : ::testing::Test {
  pds::Pds pds{pds::test::config()};
  Ses ses{SesConfig{.incarnation = kOurIncarnation}, pds};

  // The SES bytes of a one-packet send whose `initiator` field holds `sender`'s
  // incarnation and `seen`, ours as the sender knows it.
  static std::vector<uint8_t> request(uint16_t sender, uint16_t seen) {
    wire::SesStandardRequest h;
    h.common.opcode = wire::SesOpcode::kSend;
    h.common.flags = wire::ses_flags::kStartOfMessage | wire::ses_flags::kEndOfMessage;
    h.initiator = (uint32_t{sender} << 16) | seen;
    std::vector<uint8_t> out(wire::kSesStandardBytes);
    EXPECT_EQ(wire::encode(h, out), wire::kSesStandardBytes);
    return out;
  }
  SenderIncarnation check(uint16_t sender, uint16_t seen, uint16_t& told) {
    return ses.check_incarnation(kSender, wire::NextHeader::kSesStandardRequest,
                                 request(sender, seen), true, Time{}, told);
  }
};

TEST_F(Incarnations, the_first_request_teaches_the_peer_and_a_new_one_is_a_restart) {
  uint16_t told = 0;
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u);
  EXPECT_EQ(check(0xaaaa, 0, told), SenderIncarnation::kCurrent);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xaaaa);
  EXPECT_EQ(check(0xaaaa, kOurIncarnation, told), SenderIncarnation::kCurrent);
  EXPECT_EQ(check(0xbbbb, kOurIncarnation, told), SenderIncarnation::kRestarted);
  EXPECT_EQ(told, 0xbbbb);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xaaaa) << "learned only once the engine restarts it";
  ses.on_peer_restarted(kSender, 0xbbbb, Time{});
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xbbbb);
  EXPECT_EQ(ses.stats().peers_restarted, 1u);
  EXPECT_EQ(check(0xbbbb, 0, told), SenderIncarnation::kCurrent);
  // A late packet of the incarnation before: dropped, not taken for another restart.
  EXPECT_EQ(check(0xaaaa, kOurIncarnation, told), SenderIncarnation::kRetired);
  EXPECT_EQ(ses.stats().requests_of_a_retired_incarnation, 1u);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xbbbb);
}

// Refused, and it teaches nothing: its sender may be gone as well (it arrived late).
TEST_F(Incarnations, a_request_meant_for_our_predecessor_is_refused_and_teaches_nothing) {
  uint16_t told = 0;
  EXPECT_EQ(check(0xaaaa, 0x4321, told), SenderIncarnation::kStaleView);
  EXPECT_EQ(told, 0xaaaa) << "the sender's, which the NACK echoes";
  EXPECT_EQ(ses.stats().requests_to_an_earlier_incarnation, 1u);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u);
  EXPECT_EQ(check(0xbbbb, 0, told), SenderIncarnation::kCurrent);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xbbbb);
}

// "Acknowledged at your address, your incarnation unknown" from a sender we have never
// heard of: the engine that acknowledged it was a predecessor of ours, so over a PDC the
// request is refused as one meant for it. Over UUD and RUDI it is taken, learning
// nothing, so that the sender's next request over a PDC is still caught.
TEST_F(Incarnations, acknowledged_by_an_engine_we_do_not_know_is_meant_for_our_predecessor) {
  constexpr uint16_t kUnknown = PeerIncarnations::kAcknowledgedUnknown;
  uint16_t told = 0;
  EXPECT_EQ(ses.check_incarnation(kSender, wire::NextHeader::kSesStandardRequest,
                                  request(0xaaaa, kUnknown), false, Time{}, told),
            SenderIncarnation::kCurrent);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u) << "not learned over UUD or RUDI";
  EXPECT_EQ(check(0xaaaa, kUnknown, told), SenderIncarnation::kStaleView);
  EXPECT_EQ(told, 0xaaaa);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u);
  EXPECT_EQ(ses.stats().requests_to_an_earlier_incarnation, 1u);
}

// The same words from a sender we know: we acknowledged it, and it has not learned ours
// yet (its hello pending). From another incarnation of it: an older one (a newer one has
// had nothing acknowledged here before we learn it), so a late packet, not a restart.
TEST_F(Incarnations, acknowledged_by_us_before_it_learned_ours_is_current) {
  uint16_t told = 0;
  EXPECT_EQ(check(0xaaaa, 0, told), SenderIncarnation::kCurrent);
  EXPECT_EQ(check(0xaaaa, PeerIncarnations::kAcknowledgedUnknown, told),
            SenderIncarnation::kCurrent);
  EXPECT_EQ(check(0xbbbb, PeerIncarnations::kAcknowledgedUnknown, told),
            SenderIncarnation::kRetired);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0xaaaa);
  EXPECT_EQ(ses.stats().requests_of_a_retired_incarnation, 1u);
  EXPECT_EQ(ses.stats().requests_to_an_earlier_incarnation, 0u);
}

// What a sender puts in the low half: the receiver's incarnation once known; before, 0
// until the receiver has acknowledged a request of its over a PDC, then
// kAcknowledgedUnknown; 0 again when the receiver restarts.
TEST(PeerIncarnationWords, say_whether_a_request_was_acknowledged_at_the_peers_address) {
  PeerIncarnations known(4, 0x1234, Duration::milliseconds(10));
  EXPECT_EQ(known.words_to(2), 0x12340000u);
  known.acknowledged_by(2);
  EXPECT_EQ(known.words_to(2), 0x1234ffffu);
  EXPECT_EQ(known.words_to(3), 0x12340000u) << "per peer";
  uint16_t told = 0;
  EXPECT_EQ(known.check(2, 0x5678'1234u, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_FALSE(known.unvouched(2)) << "it named us: it took a request of ours";
  EXPECT_EQ(known.words_to(2), 0x12345678u);
  known.restarted(2, 0x9abc);
  EXPECT_EQ(known.words_to(2), 0x12349abcu);
  known.restarted(2, 0);
  EXPECT_EQ(known.words_to(2), 0x12340000u) << "what the old one acknowledged is forgotten";
}

// A peer whose first request does not name us, after an engine at its address
// acknowledged requests of ours: it may be that engine, whose request crossed ours, or
// its successor, which lacks our order. Our requests go on saying kAcknowledgedUnknown
// until it names us (the engine itself then has our requests and took them), or until
// it refuses one as meant for its predecessor and our order with it starts again.
TEST(PeerIncarnationWords, stay_unvouched_until_the_peer_names_us) {
  PeerIncarnations known(4, 0x1234, Duration::milliseconds(10));
  uint16_t told = 0;
  EXPECT_EQ(known.check(3, 0x5678'0000u, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_FALSE(known.unvouched(3)) << "nothing of ours was acknowledged there";
  EXPECT_EQ(known.words_to(3), 0x12345678u);

  known.acknowledged_by(2);
  EXPECT_EQ(known.check(2, 0x5678'0000u, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_EQ(known.of(2), 0x5678u);
  EXPECT_TRUE(known.unvouched(2));
  EXPECT_EQ(known.words_to(2), 0x1234ffffu);
  EXPECT_EQ(known.check(2, 0x5678'ffffu, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_TRUE(known.unvouched(2)) << "it had a request acknowledged by us: that says nothing";
  EXPECT_EQ(known.check(2, 0x5678'1234u, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_FALSE(known.unvouched(2));
  EXPECT_EQ(known.words_to(2), 0x12345678u);

  known.acknowledged_by(1);
  EXPECT_EQ(known.check(1, 0x9abc'0000u, true, Time{}, told), SenderIncarnation::kCurrent);
  EXPECT_TRUE(known.unvouched(1));
  known.lost_our_order(1);
  EXPECT_FALSE(known.unvouched(1));
  EXPECT_EQ(known.words_to(1), 0x12349abcu) << "it knows nothing of ours, and will learn it";
}

TEST_F(Incarnations, no_words_and_other_headers_say_nothing) {
  uint16_t told = 0;
  EXPECT_EQ(check(0, 0x4321, told), SenderIncarnation::kCurrent);  // built by hand
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u);
  EXPECT_EQ(ses.check_incarnation(kSender, wire::NextHeader::kSesResponse, request(0xaaaa, 1), true,
                                  Time{}, told),
            SenderIncarnation::kCurrent);
  const std::vector<uint8_t> cut(10);  // too short to hold the field: SES drops it later
  EXPECT_EQ(ses.check_incarnation(kSender, wire::NextHeader::kSesStandardRequest, cut, true, Time{},
                                  told),
            SenderIncarnation::kCurrent);
  EXPECT_EQ(ses.check_incarnation(SesConfig{}.max_peers, wire::NextHeader::kSesStandardRequest,
                                  request(0xaaaa, 0), true, Time{}, told),
            SenderIncarnation::kCurrent);
  EXPECT_EQ(ses.peer_incarnation(kSender), 0u);
}

// Incarnations drawn when none is set are never 0 (0 means "none given" on the wire) nor
// 0xffff (kAcknowledgedUnknown), which a configuration may not set either.
TEST(IncarnationDraw, never_zero_nor_all_ones_and_not_all_alike) {
  pds::Pds pds{pds::test::config()};
  std::vector<uint16_t> drawn;
  for (int i = 0; i < 8; ++i) {
    Ses ses{SesConfig{.max_peers = 4, .max_tx_messages = 8, .max_rx_messages = 8}, pds};
    EXPECT_NE(ses.incarnation(), 0u);
    EXPECT_NE(ses.incarnation(), PeerIncarnations::kAcknowledgedUnknown);
    drawn.push_back(ses.incarnation());
  }
  std::sort(drawn.begin(), drawn.end());
  EXPECT_GT(std::unique(drawn.begin(), drawn.end()) - drawn.begin(), 1);
  const uint32_t draws[] = {0, 0xffff, 0x1'0000, 0x3'ffff, 0x2'0007};
  size_t next = 0;
  EXPECT_EQ(PeerIncarnations::draw_from([&] { return draws[next++]; }), 7u);
  EXPECT_EQ(next, 5u);
  EXPECT_THROW((Ses{SesConfig{.incarnation = PeerIncarnations::kAcknowledgedUnknown}, pds}),
               std::invalid_argument);
}

}  // namespace
}  // namespace spray::ses
