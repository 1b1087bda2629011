// Held ACKs: a send nobody waits on (an inject: SendSpec::completion_awaited false) goes
// without ACK-requested when it is alone in flight, and its target holds the ACK for a
// later step that sends something, where it leaves behind those packets, or until it is
// overdue (PdsConfig::ack_hold_limit), or until the owner is about to sleep. Everything
// else asks for its ACK and gets it at the end of the receiving step, as before. Driven
// over an in-memory wire that records what each tx_burst carried.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nic_sim/loopback_pair.h"
#include "tests/transport/engine/forwarding_port.h"
#include "transport/engine/engine.h"

namespace spray {
namespace {

// One packet as it left: a request (and whether it asked for an ACK) or an ACK.
struct SentPacket {
  bool request = false;
  bool ack_requested = false;
  bool ack = false;
};

// LoopbackPort that records, per tx_burst, the PDS kind of every packet.
class PacketRecordingPort : public test::ForwardingPort {
 public:
  using ForwardingPort::ForwardingPort;
  size_t tx_burst(dp::PacketBuf** b, size_t n) {
    std::vector<SentPacket>& burst = bursts.emplace_back();
    for (size_t i = 0; i < n; ++i) {
      wire::Prologue h;
      if (b[i]->len == 0 ||
          wire::decode_prologue({b[i]->data, b[i]->len}, h) != wire::DecodeError::kOk) {
        continue;
      }
      SentPacket p;
      p.request = h.type == wire::PdsType::kRudRequest || h.type == wire::PdsType::kRudCcRequest;
      p.ack_requested = p.request && (h.flags & wire::request_flags::kAckRequested) != 0;
      p.ack = h.type == wire::PdsType::kAck || h.type == wire::PdsType::kAckCc;
      burst.push_back(p);
    }
    return ForwardingPort::tx_burst(b, n);
  }

  // Every packet sent since the last call, in order, and forgets them.
  std::vector<SentPacket> take() {
    std::vector<SentPacket> all;
    for (const auto& burst : bursts) all.insert(all.end(), burst.begin(), burst.end());
    bursts.clear();
    return all;
  }
  std::vector<std::vector<SentPacket>> bursts;
};
static_assert(dp::Datapath<PacketRecordingPort>);

// A receive of `len` bytes into `buffer`.
ses::RecvSpec into(void* buffer, uint64_t len, ses::UserContext ctx) {
  return {static_cast<uint8_t*>(buffer), len, ctx};
}

size_t count_acks(const std::vector<SentPacket>& packets) {
  size_t n = 0;
  for (const SentPacket& p : packets) n += p.ack ? 1 : 0;
  return n;
}

class HeldAck : public ::testing::Test {
 protected:
  sim::LoopbackPair wire{4096, 4096};
  PacketRecordingPort pa{wire.a()}, pb{wire.b()};
  engine::Engine<PacketRecordingPort> a{pa, {}}, b{pb, {}};
  pds::PeerIndex to_b = a.add_peer(pb.local_address());
  pds::PeerIndex to_a = b.add_peer(pa.local_address());
  Time now{};
  ses::SendSpec inject;  // completion_awaited = false
  ses::SendSpec awaited;

  void SetUp() override { inject.completion_awaited = false; }

  void step() { now = now + Duration::microseconds(1); }

  // Waits for one completion of `e` within a bounded number of steps of both engines.
  bool completion(engine::Engine<PacketRecordingPort>& e, ses::Completion& out) {
    for (int i = 0; i < 1000; ++i) {
      if (e.poll_completion(out)) return true;
      step();
      a.progress(now);
      b.progress(now);
    }
    return false;
  }

  // A message A -> B that asks for its ACK, so that the PDC is established and later
  // sends may go without the request.
  void establish() {
    char byte = 1, got = 0;
    ASSERT_EQ(b.post_recv(into(&got, 1, 100)), Status::kOk);
    ASSERT_EQ(a.send(to_b, &byte, 1, 200, awaited), Status::kOk);
    ses::Completion c;
    ASSERT_TRUE(completion(b, c));
    ASSERT_TRUE(completion(a, c));
    ASSERT_EQ(c.status, Status::kOk);
    for (int i = 0; i < 3; ++i) {  // let both ends settle, then forget what they sent
      step();
      a.progress(now);
      b.progress(now);
    }
    pa.take();
    pb.take();
  }

  // B posts a receive into `got`; A sends `value` with `spec` (context `ctx`) and puts it
  // on the wire. Returns what A sent.
  std::vector<SentPacket> send_to_b(const uint64_t& value, uint64_t& got, ses::UserContext ctx,
                                    const ses::SendSpec& spec) {
    EXPECT_EQ(b.post_recv(into(&got, 8, ctx + 1000)), Status::kOk);
    EXPECT_EQ(a.send(to_b, &value, 8, ctx, spec), Status::kOk);
    step();
    a.transmit(now);
    return pa.take();
  }

  // A's PDC to B (the one establish() opened).
  const pds::Pdc* initiator_pdc() const {
    for (uint32_t i = 0; i < 1024; ++i) {
      if (const pds::Pdc* p = a.pds().pdc(i); p != nullptr && p->initiator) return p;
    }
    return nullptr;
  }

  // B replies `pong` by inject (context 4): the reply leaves first, in the one burst that
  // also carries the ACK B held.
  void reply_carries_the_held_ack(const uint64_t& pong) {
    ASSERT_EQ(b.send(to_a, &pong, 8, 4, inject), Status::kOk);
    step();
    b.transmit(now);
    ASSERT_EQ(pb.bursts.size(), 1u) << "reply and ACK in one burst";
    const auto burst = pb.take();
    ASSERT_EQ(burst.size(), 2u);
    EXPECT_TRUE(burst[0].request) << "the reply leaves first";
    EXPECT_TRUE(burst[1].ack);
    EXPECT_FALSE(b.holds_acks());
  }

  // Runs both engines until A's send `ctx` completes; its status.
  Status send_status(ses::UserContext ctx) {
    ses::Completion c;
    while (completion(a, c)) {
      if (c.context == ctx) return c.status;
    }
    ADD_FAILURE() << "send " << ctx << " did not complete";
    return Status::kInvalidArgument;
  }
};

// The ping-pong of injects: the ping goes without ACK-requested, B's step that receives
// it sends nothing, and B's reply leaves first in the burst that carries the ACK.
TEST_F(HeldAck, inject__ack_is_held_by_the_target_and_leaves_behind_its_reply) {
  establish();
  uint64_t ping = 0x1122334455667788, pong = 0x99aabbccddeeff00, got_ping = 0, got_pong = 0;
  ASSERT_EQ(a.post_recv(into(&got_pong, 8, 2)), Status::kOk);
  const auto sent_by_a = send_to_b(ping, got_ping, 3, inject);
  ASSERT_EQ(sent_by_a.size(), 1u);
  EXPECT_TRUE(sent_by_a[0].request);
  EXPECT_FALSE(sent_by_a[0].ack_requested) << "alone in flight and nobody waits on it";

  step();
  b.progress(now);
  EXPECT_TRUE(pb.take().empty()) << "the step that received the ping held its ACK";
  EXPECT_TRUE(b.holds_acks());
  ses::Completion c;
  ASSERT_TRUE(b.poll_completion(c));
  EXPECT_EQ(got_ping, ping);

  reply_carries_the_held_ack(pong);
  EXPECT_EQ(b.pds().stats().acks_held, 1u);

  // A has its reply and its send's completion, with no retransmission.
  bool sent = false, received = false;
  for (int i = 0; i < 100 && !(sent && received); ++i) {
    step();
    a.progress(now);
    while (a.poll_completion(c)) {
      EXPECT_EQ(c.status, Status::kOk);
      sent = sent || c.context == 3;
      received = received || c.context == 2;
    }
  }
  EXPECT_TRUE(sent && received);
  EXPECT_EQ(got_pong, pong);
  EXPECT_EQ(a.pds().stats().retransmits, 0u);
}

// An application that polls its completion queue again after taking the message (Open
// MPI's progress loop reads until the queue is empty) makes a step that finds nothing
// before it replies: the ACK stays held through it, and the reply still carries it.
TEST_F(HeldAck, inject__a_reply_after_idle_polls_still_carries_the_ack) {
  establish();
  uint64_t ping = 1, pong = 2, got_ping = 0, got_pong = 0;
  ASSERT_EQ(a.post_recv(into(&got_pong, 8, 2)), Status::kOk);
  send_to_b(ping, got_ping, 3, inject);
  step();
  b.progress(now);  // receives the ping
  for (int i = 0; i < 3; ++i) {
    step();
    b.progress(now);  // polls that find nothing
  }
  EXPECT_TRUE(pb.take().empty());
  reply_carries_the_held_ack(pong);
  EXPECT_EQ(send_status(3), Status::kOk);
  EXPECT_EQ(got_ping, ping);
}

// Without a reply, the held ACK leaves alone at the first step past the hold limit.
TEST_F(HeldAck, inject__held_ack_leaves_alone_once_overdue) {
  establish();
  const Duration limit = pds::PdsConfig{}.ack_hold_limit;
  const uint64_t value = 42;
  uint64_t got = 0;
  send_to_b(value, got, 2, inject);
  step();
  const Time arrived = now;
  b.progress(now);
  while (now + Duration::microseconds(1) - arrived < limit) {
    step();
    b.progress(now);
    ASSERT_EQ(count_acks(pb.take()), 0u) << "held " << (now - arrived).ps << " ps";
  }
  step();
  b.progress(now);
  EXPECT_EQ(count_acks(pb.take()), 1u);
  EXPECT_FALSE(b.holds_acks());
  EXPECT_EQ(b.pds().stats().acks_held, 1u);
  EXPECT_EQ(send_status(2), Status::kOk);
  EXPECT_EQ(got, value);
}

// An owner about to sleep sends its held ACKs first, however young.
TEST_F(HeldAck, inject__send_held_acks_sends_them_at_once) {
  establish();
  const uint64_t value = 43;
  uint64_t got = 0;
  send_to_b(value, got, 2, inject);
  step();
  b.progress(now);
  EXPECT_TRUE(b.holds_acks());
  EXPECT_EQ(b.send_held_acks(now), 1u);
  EXPECT_EQ(count_acks(pb.take()), 1u);
  EXPECT_FALSE(b.holds_acks());
  EXPECT_EQ(send_status(2), Status::kOk);
}

// A second inject sent while the first is unacknowledged asks for its ACK, and the
// target acknowledges both in the step that receives them.
TEST_F(HeldAck, inject__a_send_behind_an_unacknowledged_one_asks_for_the_ack) {
  establish();
  uint64_t v1 = 1, v2 = 2, g1 = 0, g2 = 0;
  ASSERT_EQ(b.post_recv(into(&g1, 8, 1)), Status::kOk);
  ASSERT_EQ(b.post_recv(into(&g2, 8, 2)), Status::kOk);
  ASSERT_EQ(a.send(to_b, &v1, 8, 3, inject), Status::kOk);
  ASSERT_EQ(a.send(to_b, &v2, 8, 4, inject), Status::kOk);
  step();
  a.transmit(now);
  const auto sent = pa.take();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[0].ack_requested);
  EXPECT_TRUE(sent[1].ack_requested);
  step();
  b.progress(now);
  EXPECT_EQ(count_acks(pb.take()), 1u) << "one ACK covering both, in the receiving step";
  EXPECT_FALSE(b.holds_acks());
  EXPECT_EQ(b.pds().stats().acks_held, 0u);
  EXPECT_EQ(g1, v1);
  EXPECT_EQ(g2, v2);
}

// A send whose completion is awaited asks for its ACK on every packet, and the target
// acknowledges in the step that receives it.
TEST_F(HeldAck, awaited_send__every_packet_asks_and_the_ack_is_not_held) {
  establish();
  std::vector<uint8_t> src(10000, 7), dst(src.size(), 0);  // three packets of 4096 B
  ASSERT_EQ(b.post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(a.send(to_b, src.data(), src.size(), 2, awaited), Status::kOk);
  step();
  a.transmit(now);
  const auto sent = pa.take();
  ASSERT_EQ(sent.size(), 3u);
  for (const SentPacket& p : sent) EXPECT_TRUE(p.request && p.ack_requested);
  step();
  b.progress(now);
  EXPECT_EQ(count_acks(pb.take()), 1u);
  EXPECT_FALSE(b.holds_acks());
  EXPECT_EQ(dst, src);
}

// The first packet on a new PDC (a SYN) asks for its ACK even from an inject: the
// initiator learns the target's PDC from it.
TEST_F(HeldAck, inject__the_first_packet_of_a_pdc_asks_for_its_ack) {
  const uint64_t value = 5;
  uint64_t got = 0;
  const auto sent = send_to_b(value, got, 2, inject);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].ack_requested);
}

// A target that went off to compute after receiving an inject holds its ACK: the
// initiator's timeout resends the packet asking for the ACK, but takes it for no loss
// (no backoff, congestion window as it was), and the resend is acknowledged at once.
TEST_F(HeldAck, inject__a_timeout_while_the_ack_may_be_held_is_no_loss) {
  establish();
  const pds::Pdc* pdc = initiator_pdc();
  ASSERT_NE(pdc, nullptr);
  const uint32_t window = pdc->cc->window_bytes();
  const uint64_t value = 77;
  uint64_t got = 0;
  send_to_b(value, got, 2, inject);
  step();
  b.progress(now);  // receives it and holds the ACK; then makes no step for 2 ms
  EXPECT_TRUE(b.holds_acks());
  now = now + Duration::milliseconds(2);
  a.progress(now);
  const auto resent = pa.take();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_TRUE(resent[0].request && resent[0].ack_requested);
  EXPECT_EQ(a.pds().stats().timeout_retransmits, 1u);
  EXPECT_EQ(pdc->backoff, 0u);
  EXPECT_EQ(pdc->cc->window_bytes(), window);
  step();
  b.progress(now);
  EXPECT_GE(count_acks(pb.take()), 1u);
  EXPECT_EQ(send_status(2), Status::kOk);
  EXPECT_EQ(got, value);
}

// A held ACK gives no RTT sample: it counts the target application's time, not the
// network's. Here the target takes 10 ms to its next step; the initiator's smoothed RTT
// stays at the few microseconds the awaited send measured.
TEST_F(HeldAck, inject__held_ack_gives_no_rtt_sample) {
  establish();
  const pds::Pdc* pdc = initiator_pdc();
  ASSERT_NE(pdc, nullptr);
  const Duration srtt = pdc->rtt.srtt();
  ASSERT_GT(srtt.ps, 0);
  ASSERT_LT(srtt.ps, Duration::microseconds(100).ps);
  const uint64_t value = 9;
  uint64_t got = 0;
  send_to_b(value, got, 2, inject);
  step();
  b.progress(now);  // holds the ACK
  now = now + Duration::milliseconds(10);
  b.progress(now);  // sends it
  a.progress(now);
  ses::Completion c;
  ASSERT_TRUE(a.poll_completion(c));
  EXPECT_EQ(c.context, 2u);
  EXPECT_EQ(pdc->rtt.srtt().ps, srtt.ps);
}

}  // namespace
}  // namespace spray
