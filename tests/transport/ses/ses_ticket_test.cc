// Message tickets (Ses::ticket): what SES names a message by towards PDS carries the tx
// slot's generation, so a PDS report or packet request that outlives its message cannot
// land on the next message to take the slot. Driven on one Ses over a real Pds whose
// packets go nowhere: the test plays the peer's acknowledgements by hand.
#include <gtest/gtest.h>

#include <array>
#include <variant>
#include <vector>

#include "tests/transport/pds/pds_pair.h"
#include "transport/ses/ses.h"

namespace spray::ses {
namespace {

using pds::test::us;
constexpr pds::PeerIndex kPeer = 1;  // how this SES names the peer
constexpr pds::PeerIndex kUs = 0;    // how the peer's PDS names us

struct OneSes : ::testing::Test {
  pds::Pds pds{pds::test::config()};
  Ses ses{SesConfig{}, pds};
  pds::Pds peer{pds::test::config()};  // only acknowledges
  std::array<uint8_t, 100> first{}, second{};
  int64_t t = 0;  // microseconds

  // Sends `buf` (one eager packet) and returns the packet PDS puts on the wire for it.
  pds::TxPacket send_one(const std::array<uint8_t, 100>& buf, UserContext ctx) {
    EXPECT_EQ(ses.send(kPeer, buf.data(), buf.size(), ctx, SendSpec{}, us(t)), Status::kOk);
    std::vector<pds::TxPacket> out;
    uint32_t pdc = 0;
    pds::TxPacket pkt;
    while (pds.pop_ready(pdc)) {
      while (pds.next_tx(pdc, us(t), pkt)) out.push_back(pkt);
    }
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? pds::TxPacket{} : out[0];
  }
  // The peer receives `pkt` and acknowledges it; SES takes what PDS then reports.
  void deliver_and_ack(const pds::TxPacket& pkt) {
    ++t;
    pds::RxClass c = peer.classify_request(kUs, pkt.request, false, pkt.entropy, us(t));
    ASSERT_EQ(c.verdict, pds::RxVerdict::kDeliver);
    peer.commit_request(c, false, 0);
    peer.flush_acks();
    for (const pds::ControlPacket& cp : peer.control_out()) {
      if (const auto* ack = std::get_if<wire::PdsAck>(&cp.header)) pds.on_ack(kPeer, *ack, us(t));
    }
    peer.control_out().clear();
    ses.take_pds_reports(us(t));
  }
  // PDS reports `ref` acknowledged although no ACK said so: the defect tickets guard
  // against (a report that outlived its message).
  void report_acked(pds::PacketRef ref) {
    pds.acked().push_back(ref);
    ses.take_pds_reports(us(t));
  }
  std::vector<Completion> completions() {
    std::vector<Completion> out;
    Completion c;
    while (ses.poll_completion(c)) out.push_back(c);
    return out;
  }
};

TEST_F(OneSes, reports_for_an_ended_message__do_not_touch_the_next_one_in_its_slot) {
  const pds::TxPacket one = send_one(first, 11);
  deliver_and_ack(one);
  auto done = completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].context, 11u);
  EXPECT_EQ(done[0].status, Status::kOk);

  // The next send takes the slot the first one freed, under a new ticket.
  const pds::TxPacket two = send_one(second, 22);
  ASSERT_NE(two.ref.message, one.ref.message);
  ASSERT_EQ(two.ref.message & 0xfffff, one.ref.message & 0xfffff) << "not the same slot";

  // A late duplicate of the first message's acknowledgement, and a failure report for it:
  // before tickets, the first completed the second send before its packet was
  // acknowledged (transmit complete on nothing), the second failed it.
  report_acked(one.ref);
  pds.failed().push_back({one.ref.message, Status::kPeerUnreachable});
  ses.take_pds_reports(us(2));
  EXPECT_TRUE(completions().empty());
  EXPECT_EQ(ses.stats().stale_tickets, 2u);

  // Asked to rebuild the first message's packet (a resend PDS still held), SES builds
  // nothing, where it used to build the second message's packet under the first's name.
  std::array<uint8_t, 4096> out{};
  wire::NextHeader next{};
  EXPECT_EQ(ses.build_packet(one.ref, out, next), 0u);
  EXPECT_GT(ses.build_packet(two.ref, out, next), second.size());

  // The second message's own acknowledgement completes it, once.
  deliver_and_ack(two);
  done = completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].context, 22u);
  EXPECT_EQ(done[0].status, Status::kOk);
}

TEST_F(OneSes, tickets_stay_clear_of_pds_control_values_through_every_generation) {
  // One slot reused past the wrap of its generation counter: no ticket equals a value
  // PDS keeps for its own control packets, and consecutive tickets always differ.
  uint32_t previous = 0;
  for (int i = 0; i < 5000; ++i) {
    const pds::TxPacket p = send_one(first, static_cast<UserContext>(i));
    ASSERT_FALSE(pds::is_control_ref(p.ref)) << "send " << i;
    if (i > 0) {
      ASSERT_NE(p.ref.message, previous) << "send " << i;
    }
    previous = p.ref.message;
    deliver_and_ack(p);
    ASSERT_EQ(completions().size(), 1u) << "send " << i;
  }
}

}  // namespace
}  // namespace spray::ses
