// Engine features end to end over a clean fabric: immediate data, tag matching with
// ignore bits and any source, unexpected messages, datagrams, PDC close and reopen,
// zero-length operations and a 1 GiB message.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

class Features : public ::testing::Test {
 protected:
  Features() : cluster(fabric(), {}), waiter(cluster) {}
  static sim::FabricConfig fabric() {
    sim::FabricConfig f;
    f.hosts = 3;
    return f;
  }
  sim::Cluster cluster;
  CompletionWaiter waiter;
};

TEST_F(Features, send__carries_immediate_data_to_the_receive_completion) {
  std::vector<uint8_t> src(10, 1), dst(10);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(
      cluster.engine(0).send(1, src.data(), src.size(), 1, {.has_data = true, .data = 0xabcd1234}),
      Status::kOk);
  auto c = waiter.wait(1, 1);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->has_data);
  EXPECT_EQ(c->data, 0xabcd1234u);
  EXPECT_EQ(c->peer, 0u);
}

TEST_F(Features, write__with_immediate_data_notifies_the_target) {
  std::vector<uint8_t> region(100, 0), src(40, 9);
  ASSERT_EQ(cluster.engine(1).register_memory(
                {region.data(), region.size(), 0x1000, 3, ses::access::kRemoteWrite}),
            Status::kOk);
  // Virtual addressing: the region's base address is 0x1000.
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0x1010, 3, 1,
                                    {.has_data = true, .data = 77}),
            Status::kOk);
  auto c = waiter.wait(0, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kOk);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), region.begin() + 0x10));
  ses::Completion t;
  ASSERT_TRUE(cluster.engine(1).poll_completion(t));
  EXPECT_EQ(t.op, ses::OpKind::kRemoteWrite);
  EXPECT_EQ(t.data, 77u);
  EXPECT_EQ(t.length, 40u);
}

// transmit(): a message just posted leaves without a receive poll first; what waits in
// the receive ring stays there for the next progress.
TEST_F(Features, transmit__sends_what_is_ready_and_leaves_the_receive_side_alone) {
  std::vector<uint8_t> a(8, 0xa), b(8, 0xb), ra(8), rb(8);
  ASSERT_EQ(cluster.engine(0).post_recv({ra.data(), ra.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).post_recv({rb.data(), rb.size(), 2}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, b.data(), b.size(), 20), Status::kOk);
  EXPECT_EQ(cluster.engine(1).transmit(cluster.now()), 1u);
  // The fabric alone runs: host 1's packet lands in host 0's receive ring, unread.
  cluster.fabric().advance_to(cluster.now() + Duration::milliseconds(1));
  ASSERT_EQ(cluster.engine(0).send(1, a.data(), a.size(), 10), Status::kOk);
  EXPECT_EQ(cluster.engine(0).transmit(cluster.now()), 1u);
  EXPECT_EQ(cluster.engine(0).stats().tx_packets, 1u);
  EXPECT_EQ(cluster.engine(0).stats().rx_packets, 0u);
  // Progress then delivers both ways.
  ASSERT_TRUE(waiter.wait(0, 1));
  ASSERT_TRUE(waiter.wait(1, 2));
  ASSERT_TRUE(waiter.wait(0, 10));
  EXPECT_EQ(ra, b);
  EXPECT_EQ(rb, a);
}

TEST_F(Features, tagged__ignore_bits_and_any_source_match) {
  std::vector<uint8_t> a(8, 0xa), b(8, 0xb), ra(8), rb(8);
  ses::RecvSpec wildcard{ra.data(), ra.size(), 1, true, 0x1200, 0x00ff, pds::kNoPeer};
  ses::RecvSpec exact{rb.data(), rb.size(), 2, true, 0x5555, 0, 2};
  ASSERT_EQ(cluster.engine(1).post_recv(exact), Status::kOk);
  ASSERT_EQ(cluster.engine(1).post_recv(wildcard), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, a.data(), 8, 10, {.tagged = true, .tag = 0x12ab}),
            Status::kOk);
  ASSERT_EQ(cluster.engine(2).send(1, b.data(), 8, 20, {.tagged = true, .tag = 0x5555}),
            Status::kOk);
  auto ca = waiter.wait(1, 1);
  auto cb = waiter.wait(1, 2);
  ASSERT_TRUE(ca && cb);
  EXPECT_EQ(ca->tag, 0x12abu);
  EXPECT_EQ(ca->peer, 0u);
  EXPECT_EQ(ra, a);
  EXPECT_EQ(cb->peer, 2u);
  EXPECT_EQ(rb, b);
}

TEST_F(Features, unexpected__messages_wait_for_their_receive_in_send_order) {
  std::vector<std::vector<uint8_t>> src(5);
  for (size_t i = 0; i < src.size(); ++i) src[i].assign(100 * (i + 1), static_cast<uint8_t>(i));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(cluster.engine(0).send(1, src[i].data(), src[i].size(), i), Status::kOk);
  }
  cluster.run_until([] { return false; }, Duration::microseconds(100));  // all arrive first
  EXPECT_EQ(cluster.engine(1).ses().stats().unexpected_messages, 5u);
  for (size_t i = 0; i < src.size(); ++i) {
    std::vector<uint8_t> dst(1000, 0xff);
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 100 + i}), Status::kOk);
    auto c = waiter.wait(1, 100 + i);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->length, src[i].size());  // receives get messages in the order sent
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst.begin()));
  }
}

TEST_F(Features, zero_length__send_write_read_complete) {
  uint8_t byte = 0;
  std::vector<uint8_t> region(8);
  ASSERT_EQ(
      cluster.engine(1).register_memory({region.data(), region.size(), 0, 1,
                                         ses::access::kRemoteRead | ses::access::kRemoteWrite}),
      Status::kOk);
  ASSERT_EQ(cluster.engine(1).post_recv({&byte, 0, 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, nullptr, 0, 1), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write(1, nullptr, 0, 0, 1, 2), Status::kOk);
  ASSERT_EQ(cluster.engine(0).read(1, nullptr, 0, 0, 1, 3), Status::kOk);
  for (uint64_t ctx : {1, 2, 3}) {
    auto c = waiter.wait(0, ctx);
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kOk);
  }
  auto r = waiter.wait(1, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, 0u);
}

TEST_F(Features, datagram__delivered_best_effort_in_one_packet) {
  std::vector<uint8_t> src(500, 3), dst(500);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send_datagram(1, src.data(), src.size(), 1), Status::kOk);
  auto tx = waiter.wait(0, 1);
  auto rx = waiter.wait(1, 1);
  ASSERT_TRUE(tx && rx);
  EXPECT_EQ(rx->length, 500u);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(cluster.engine(0).pds().open_pdcs(), 0u);  // UUD uses no PDC
}

TEST_F(Features, rudi__idempotent_write_needs_no_pdc_and_reports_errors) {
  std::vector<uint8_t> region(100000, 0), src(70000);
  std::iota(src.begin(), src.end(), 0);
  ASSERT_EQ(cluster.engine(1).register_memory(
                {region.data(), region.size(), 0, 8, ses::access::kRemoteWrite}),
            Status::kOk);
  ASSERT_EQ(cluster.engine(0).write_idempotent(1, src.data(), src.size(), 1000, 8, 1), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write_idempotent(1, src.data(), 10, 0, 9, 2), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write_idempotent(1, src.data(), 10, region.size() - 5, 8, 3),
            Status::kOk);
  auto ok = waiter.wait(0, 1);
  auto bad_key = waiter.wait(0, 2);
  auto oob = waiter.wait(0, 3);
  ASSERT_TRUE(ok && bad_key && oob);
  EXPECT_EQ(ok->status, Status::kOk);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), region.begin() + 1000));
  EXPECT_EQ(bad_key->status, Status::kBadKey);
  EXPECT_EQ(oob->status, Status::kOutOfBounds);
  EXPECT_EQ(cluster.engine(0).pds().open_pdcs(), 0u);
  EXPECT_EQ(cluster.engine(1).pds().open_pdcs(), 0u);
}

TEST_F(Features, rudi__to_a_dead_peer_fails_after_retries) {
  cluster.fabric().set_host_up(1, false);
  std::vector<uint8_t> src(10000, 1);
  ASSERT_EQ(cluster.engine(0).write_idempotent(1, src.data(), src.size(), 0, 8, 1), Status::kOk);
  auto c = waiter.wait(0, 1, Duration::seconds(5));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);
}

TEST(FeaturesSmallRudiWindow, rudi__message_failing_with_packets_still_queued_is_released_once) {
  sim::FabricConfig f;
  f.hosts = 3;
  engine::EngineConfig e;
  e.rudi.max_outstanding = 4;  // most of the message waits in the queue
  e.rudi.max_retries = 3;
  sim::Cluster cluster(f, e);
  CompletionWaiter waiter(cluster);
  std::vector<uint8_t> region(200000), src(100000, 5);
  ASSERT_EQ(cluster.engine(2).register_memory(
                {region.data(), region.size(), 0, 8, ses::access::kRemoteWrite}),
            Status::kOk);
  cluster.fabric().set_host_up(1, false);
  ASSERT_EQ(cluster.engine(0).write_idempotent(1, src.data(), src.size(), 0, 8, 1), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write_idempotent(2, src.data(), src.size(), 0, 8, 2), Status::kOk);
  auto dead = waiter.wait(0, 1, Duration::seconds(5));
  auto live = waiter.wait(0, 2, Duration::seconds(5));
  ASSERT_TRUE(dead && live);
  EXPECT_EQ(dead->status, Status::kPeerUnreachable);
  EXPECT_EQ(live->status, Status::kOk);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), region.begin()));
  EXPECT_EQ(waiter.pending(0), 0u);  // each completed exactly once
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);
}

// A path dies under load and comes back: traffic leaves it while it is down (REPS stops
// using it) and returns to it after (exploration finds it again).
TEST_F(Features, path__down_then_up_is_abandoned_and_then_reused) {
  std::vector<uint8_t> src(1 << 20, 9), dst(1 << 20);
  auto transfer = [&](uint64_t ctx) {
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), ctx}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), ctx), Status::kOk);
    auto rx = waiter.wait(1, ctx, Duration::seconds(5));
    ASSERT_TRUE(rx);
    EXPECT_EQ(rx->status, Status::kOk);
    EXPECT_EQ(dst, src);
  };
  auto& stats = cluster.fabric().stats();
  transfer(1);
  cluster.fabric().set_path_up(2, false);
  transfer(2);
  transfer(3);
  const uint64_t drops_while_down = stats.dropped_path_down;
  EXPECT_GT(drops_while_down, 0u);
  const uint64_t before = stats.path_packets[2];
  cluster.fabric().set_path_up(2, true);
  transfer(4);
  transfer(5);
  EXPECT_EQ(stats.dropped_path_down, drops_while_down);
  EXPECT_GT(stats.path_packets[2], before + 10);  // the path carries traffic again
}

// The target sends each ACK on the EV its latest request arrived on, a path that has
// just delivered, not on an EV of its own choosing, half of which, with half the paths
// dead, would lose it.
TEST_F(Features, ack__returns_on_the_ev_its_request_arrived_on) {
  std::set<uint16_t> request_evs;
  size_t acks = 0, acks_elsewhere = 0;
  cluster.fabric().set_drop_filter([&](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::Prologue h;
    if (wire::decode_prologue({p.data, p.len}, h) != wire::DecodeError::kOk) return false;
    const bool request =
        h.type == wire::PdsType::kRudRequest || h.type == wire::PdsType::kRudCcRequest;
    if (from == 0 && request) request_evs.insert(p.entropy);
    if (from == 1 && (h.type == wire::PdsType::kAck || h.type == wire::PdsType::kAckCc)) {
      ++acks;
      acks_elsewhere += request_evs.count(p.entropy) == 0 ? 1 : 0;
    }
    return false;  // an observer: drops nothing
  });
  std::vector<uint8_t> src(256 * 1024, 3), dst(src.size());
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  auto rx = waiter.wait(1, 1, Duration::seconds(5));
  ASSERT_TRUE(rx);
  EXPECT_EQ(dst, src);
  EXPECT_GT(acks, 5u);
  EXPECT_GT(request_evs.size(), 5u);  // sprayed: the ACKs had many EVs to choose from
  EXPECT_EQ(acks_elsewhere, 0u);
  cluster.fabric().set_drop_filter({});
}

// ROD with a receive table too small for the messages in flight: in-order delivery
// must wait for room (stall), never drop a held packet.
TEST(FeaturesTinyReceiveTable, rod__stalls_instead_of_dropping_when_ses_is_full) {
  sim::FabricConfig f;
  f.hosts = 2;
  f.faults.reorder = 0.5;  // plenty of early packets held for reordering
  engine::EngineConfig e;
  e.ses.max_rx_messages = 2;
  sim::Cluster cluster(f, e);
  CompletionWaiter waiter(cluster);
  constexpr int kMessages = 40;
  std::vector<std::vector<uint8_t>> src(kMessages), dst(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    src[i].assign(10000, static_cast<uint8_t>(i));
    dst[i].assign(10000, 0);
    ASSERT_EQ(cluster.engine(0).send(1, src[i].data(), src[i].size(), uint64_t(i),
                                     {.tagged = true, .tag = uint64_t(i), .mode = pds::Mode::kRod}),
              Status::kOk);
  }
  // Two unexpected messages fill the table; the rest arrive, some early and held.
  cluster.run_until([] { return false; }, Duration::microseconds(300));
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(cluster.engine(1).post_recv(
                  {dst[i].data(), dst[i].size(), uint64_t(i), true, uint64_t(i), 0}),
              Status::kOk);
  }
  for (int i = 0; i < kMessages; ++i) {
    auto c = waiter.wait(1, uint64_t(i), Duration::seconds(5));
    ASSERT_TRUE(c) << i;
    EXPECT_EQ(c->status, Status::kOk);
    EXPECT_EQ(dst[i], src[i]) << i;
  }
  EXPECT_EQ(cluster.engine(1).stats().rx_rod_dropped, 0u);
}

// Liveness probes must not fail a peer that is alive but slow: a rendezvous send waits
// 50 ms (many probe rounds) for its receive, then completes normally.
TEST_F(Features, probe__keeps_a_slow_but_alive_peer) {
  std::vector<uint8_t> src(300000, 4), dst(300000);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  cluster.run_until([] { return false; }, Duration::milliseconds(50));
  EXPECT_FALSE(waiter.take(0, 1));
  EXPECT_GT(cluster.engine(1).pds().stats().rx_packets, 10u);  // probes kept arriving
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  auto tx = waiter.wait(0, 1);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
  EXPECT_EQ(dst, src);
}

TEST_F(Features, close__frees_both_ends_and_traffic_reopens_a_pdc) {
  std::vector<uint8_t> src(3000, 1), dst(3000);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
    ASSERT_TRUE(waiter.wait(0, 1) && waiter.wait(1, 1));
    ASSERT_EQ(cluster.engine(0).close(1), Status::kOk);
    ASSERT_TRUE(cluster.run_until(
        [&] {
          return cluster.engine(0).pds().open_pdcs() == 0 &&
                 cluster.engine(1).pds().open_pdcs() == 0;
        },
        Duration::milliseconds(10)));
  }
  EXPECT_EQ(cluster.engine(0).pds().stats().pdcs_closed, 3u);
  EXPECT_EQ(cluster.engine(1).pds().stats().pdcs_closed, 3u);
}

TEST_F(Features, close__with_traffic_in_flight_is_refused) {
  std::vector<uint8_t> src(100000, 1), dst(100000);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  EXPECT_EQ(cluster.engine(0).close(1), Status::kAgain);
  ASSERT_TRUE(waiter.wait(1, 1));
}

TEST_F(Features, send__one_gibibyte_message_arrives_intact) {
  const uint64_t size = uint64_t{1} << 30;
  std::vector<uint8_t> src(size), dst(size, 0);
  for (uint64_t i = 0; i < size; i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  src[size - 1] = 0x5a;
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), size, 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), size, 1), Status::kOk);
  auto rx = waiter.wait(1, 1, Duration::seconds(30));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(rx->length, size);
  EXPECT_TRUE(src == dst);
  EXPECT_EQ(cluster.engine(0).ses().stats().rendezvous_sends, 1u);
}

// A rendezvous send hands its buffer back to the application at completion, so no read
// response may still be copying from it then (a retransmission after completion read
// freed memory in a 4-rank all-reduce over the provider). With loss, the receiver's
// final response often overtakes the ACKs of the last read-response packets.
TEST(RendezvousLifetime, send_completes_only_after_its_read_responses_are_acknowledged) {
  sim::FabricConfig f;
  f.hosts = 2;
  f.faults.loss = 0.05;
  f.faults.reorder = 0.2;
  f.seed = 7;
  sim::Cluster cluster(f, {});
  CompletionWaiter waiter(cluster);
  for (uint64_t i = 1; i <= 30; ++i) {
    std::vector<uint8_t> src(200000 + i * 1000, static_cast<uint8_t>(i)), dst(src.size());
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), i}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), i), Status::kOk);
    auto sent = waiter.wait(0, i, Duration::seconds(5));
    ASSERT_TRUE(sent) << "send " << i;
    EXPECT_EQ(sent->status, Status::kOk);
    // Nothing of this send may be in flight any more: no read response reads src. (A
    // probe may be: the send waited long enough for the receiver's response to ask.)
    EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), cluster.engine(0).ses().probes_in_flight())
        << "send " << i;
    auto got = waiter.wait(1, i, Duration::seconds(5));
    ASSERT_TRUE(got);
    EXPECT_EQ(dst, src);
  }
}

}  // namespace
}  // namespace spray
