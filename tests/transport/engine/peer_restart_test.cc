// A peer that restarts at the same address (a new engine on the same NIC, as a process
// restarted on a fixed UDP port): each side must take the other's messages from then
// on, and nothing of the old incarnation may be taken for the new one's or hold a
// receive (transport/ses/ses_incarnation.cc). Until 2026-12-07 neither held: the new
// engine's send ids, starting again from 0, were refused as late copies of its
// predecessor's, and ours to it continued the old order, which it held for good
// waiting for ids its predecessor had taken, while our sends completed OK.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kBytes = 3000;  // a packet

class PeerRestart : public ::testing::Test {
 protected:
  PeerRestart() : waiter(cluster) {}

  // `from` sends `count` messages to `to`, whose receives are posted first; each is
  // received whole, in order (receive i gets message i), and completes OK at both ends.
  void send_in_order(uint32_t from, uint32_t to, uint8_t first_fill, int count) {
    std::vector<std::vector<uint8_t>> out, in;
    for (int i = 0; i < count; ++i) {
      out.emplace_back(kBytes, static_cast<uint8_t>(first_fill + i));
      in.emplace_back(kBytes, 0);
    }
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(cluster.engine(to).post_recv({in[i].data(), kBytes, next_ctx + i}), Status::kOk);
    }
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(cluster.engine(from).send(to, out[i].data(), kBytes, next_ctx + i), Status::kOk);
    }
    for (int i = 0; i < count; ++i) {
      auto tx = waiter.wait(from, next_ctx + i);
      ASSERT_TRUE(tx) << "send " << i << " from host " << from << " never completed";
      EXPECT_EQ(tx->status, Status::kOk);
      auto rx = waiter.wait(to, next_ctx + i);
      ASSERT_TRUE(rx) << "host " << to << " never received message " << i << " of host " << from;
      EXPECT_EQ(rx->status, Status::kOk);
      EXPECT_EQ(in[i], out[i]) << "receive " << i << " got another message";
    }
    next_ctx += count;
  }

  // Host 1 has just restarted, and host 0 has sent to it before. Host 0's next send is
  // refused as meant for host 1's predecessor and fails (the peer it was sent to is
  // gone); host 0 then knows the new incarnation, and its later sends arrive in order.
  void first_send_fails_then_the_rest_arrive() {
    send_fails(0, 1, 1);
    EXPECT_GT(cluster.engine(1).ses().stats().requests_to_an_earlier_incarnation, 0u);
    EXPECT_EQ(cluster.engine(0).ses().stats().peers_restarted, 1u);
    EXPECT_EQ(cluster.engine(0).ses().peer_incarnation(1), cluster.engine(1).ses().incarnation());
    send_in_order(0, 1, 0x30, 3);
    EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
  }

  // `from` sends a packet of 0xee to `to` (context `ctx`), and the send fails "peer
  // unreachable".
  void send_fails(uint32_t from, uint32_t to, ses::UserContext ctx) {
    std::vector<uint8_t> lost(kBytes, 0xee);
    ASSERT_EQ(cluster.engine(from).send(to, lost.data(), kBytes, ctx), Status::kOk);
    auto tx = waiter.wait(from, ctx);
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->status, Status::kPeerUnreachable);
  }

  // Every request `host` sends vanishes until the test clears the drop filter (its ACKs
  // go on); the first is kept in `first`, for the test to deliver late.
  void hold_requests_of(uint32_t host, std::vector<uint8_t>& first) {
    cluster.fabric().set_drop_filter(
        [host, &first](uint32_t from, uint32_t, const dp::PacketBuf& p) {
          wire::PdsRequest h;
          if (from != host ||
              wire::decode(std::span<const uint8_t>(p.data, p.len), h) != wire::DecodeError::kOk) {
            return false;
          }
          if (first.empty()) first.assign(p.data, p.data + p.len);
          return true;
        });
  }

  sim::Cluster cluster{sim::FabricConfig{.hosts = 3}, engine::EngineConfig{}};
  CompletionWaiter waiter;
  uint64_t next_ctx = 100;
};

// Both directions had traffic, so both orders are well past 0. Host 0 restarts with the
// same start PSNs as before (the seed the cluster gave it: as every provider process
// had until 2026-12-07), so its new PDCs look like its old ones to PDS.
TEST_F(PeerRestart, a_restarted_peer_is_heard_and_hears) {
  send_in_order(0, 1, 0x10, 3);
  send_in_order(1, 0, 0x20, 3);
  cluster.run_until([] { return false; }, ses::SesConfig{}.hello_after * 2);
  EXPECT_EQ(cluster.engine(1).ses().stats().hellos_sent, 0u) << "its sends told host 0";
  const uint16_t before = cluster.engine(1).ses().peer_incarnation(0);
  cluster.restart(0, cluster.fabric().config().seed * 1000003);
  EXPECT_NE(cluster.engine(0).ses().incarnation(), before);
  send_in_order(0, 1, 0x30, 3);
  EXPECT_EQ(cluster.engine(1).ses().stats().peers_restarted, 1u);
  EXPECT_EQ(cluster.engine(1).ses().peer_incarnation(0), cluster.engine(0).ses().incarnation());
  send_in_order(1, 0, 0x40, 3);
  // Host 2 never talked to host 0 before: nothing to tell apart.
  send_in_order(2, 0, 0x50, 2);
  EXPECT_EQ(cluster.engine(2).ses().stats().peers_restarted, 0u);
}

// Host 0 closes its PDCs before it goes, as an endpoint that closes does: host 1
// remembers their ids as closed (a late SYN must not reopen one), and the new host 0
// opens its PDCs under the same ids. They are the new incarnation's, not late copies.
TEST_F(PeerRestart, a_peer_that_closed_its_pdcs_is_heard_after_its_restart) {
  send_in_order(0, 1, 0x10, 3);
  send_in_order(1, 0, 0x20, 1);
  cluster.engine(0).close_all(cluster.now());
  ASSERT_TRUE(cluster.run_until(
      [&] {
        return cluster.engine(0).pds().open_pdcs() == 0 && cluster.engine(1).pds().open_pdcs() == 0;
      },
      Duration::milliseconds(100)));
  cluster.restart(0, cluster.fabric().config().seed * 1000003);
  send_in_order(0, 1, 0x30, 3);
  send_in_order(1, 0, 0x40, 3);
  EXPECT_EQ(cluster.engine(1).ses().stats().peers_restarted, 1u);
}

// Host 0 only sends, so host 1 told it its incarnation with a hello. Host 1 restarts:
// host 0's next send fails, and the rest arrive.
TEST_F(PeerRestart, a_sender_reaches_a_receiver_that_restarted) {
  send_in_order(0, 1, 0x10, 3);
  cluster.run_until([] { return false; }, ses::SesConfig{}.hello_after * 2);
  EXPECT_EQ(cluster.engine(1).ses().stats().hellos_sent, 1u);
  EXPECT_EQ(cluster.engine(0).ses().peer_incarnation(1), cluster.engine(1).ses().incarnation())
      << "no hello told host 0 of host 1";
  cluster.restart(1, 77);
  first_send_fails_then_the_rest_arrive();
}

// As above, but host 1 restarts before its hello went: host 0 never learned its
// incarnation. Host 0's requests then say that an engine at host 1's address has
// acknowledged its requests before, which the new host 1, never having heard of host 0,
// knows was not itself. Until 2026-12-07 (later) the new host 1 took host 0's next
// sends, whose ids went on from the old order, and held them for good waiting for id 0,
// while they completed OK at host 0.
TEST_F(PeerRestart, a_sender_reaches_a_receiver_that_restarted_before_its_hello) {
  send_in_order(0, 1, 0x10, 3);
  ASSERT_EQ(cluster.engine(1).ses().stats().hellos_sent, 0u) << "the hello went already";
  ASSERT_EQ(cluster.engine(0).ses().peer_incarnation(1), 0u);
  cluster.restart(1, 77);
  first_send_fails_then_the_rest_arrive();
  send_in_order(1, 0, 0x40, 2);
}

// As above, but the new host 1 speaks first: host 0 learns its incarnation from its
// first request, as that of a peer it has never heard, and the request's words do not
// name host 0. Host 1's predecessor had acknowledged host 0's requests, so host 0 goes
// on saying so (kAcknowledgedUnknown) until host 1 names it; the new host 1, which never
// heard of host 0, refuses that as meant for its predecessor, and host 0 starts its
// order to host 1 again. Host 1's order to host 0, taken from its first request on,
// goes on. Until 2026-12-07 (late) host 0 went on in its old order, named the new
// incarnation, and host 1 held its sends for good waiting for id 0.
TEST_F(PeerRestart, a_sender_reaches_a_receiver_that_restarted_and_spoke_first) {
  send_in_order(0, 1, 0x10, 3);
  ASSERT_EQ(cluster.engine(0).ses().peer_incarnation(1), 0u);
  cluster.restart(1, 77);
  send_in_order(1, 0, 0x40, 2);
  EXPECT_EQ(cluster.engine(0).ses().peer_incarnation(1), cluster.engine(1).ses().incarnation());
  EXPECT_TRUE(cluster.engine(0).ses().peer_may_lack_our_order(1));
  first_send_fails_then_the_rest_arrive();
  EXPECT_FALSE(cluster.engine(0).ses().peer_may_lack_our_order(1));
  send_in_order(1, 0, 0x50, 2);
  EXPECT_EQ(cluster.engine(1).ses().stats().peers_restarted, 0u);
}

// The other reading of the same words: host 1's first request left before it heard
// from host 0 and arrives after host 0's requests were acknowledged (it crossed them).
// Host 0 cannot tell that from a successor's and says kAcknowledgedUnknown as above,
// but host 1, which took its requests, knows it and takes them: nothing fails, nothing
// is counted as a restart, and once host 1 names host 0 the words name it again.
TEST_F(PeerRestart, a_request_that_crossed_our_first_ones_is_not_a_restart) {
  std::vector<uint8_t> crossed;
  hold_requests_of(1, crossed);
  std::vector<uint8_t> early(kBytes, 0x5a), in(kBytes, 0);
  ASSERT_EQ(cluster.engine(0).post_recv({in.data(), kBytes, 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, early.data(), kBytes, 1), Status::kOk);
  cluster.run_until([&] { return !crossed.empty(); }, Duration::milliseconds(1));
  ASSERT_FALSE(crossed.empty());
  send_in_order(0, 1, 0x10, 3);
  ASSERT_EQ(cluster.engine(0).ses().peer_incarnation(1), 0u);
  test_support::inject(cluster, 1, 0, crossed);
  auto rx = waiter.wait(0, 1);
  ASSERT_TRUE(rx) << "host 0 never took the request that crossed its own";
  EXPECT_EQ(in, early);
  EXPECT_TRUE(cluster.engine(0).ses().peer_may_lack_our_order(1));
  send_in_order(0, 1, 0x20, 3);  // saying kAcknowledgedUnknown, to the engine that knows
  cluster.fabric().set_drop_filter({});
  auto tx = waiter.wait(1, 1);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
  send_in_order(1, 0, 0x30, 2);
  EXPECT_FALSE(cluster.engine(0).ses().peer_may_lack_our_order(1));
  send_in_order(0, 1, 0x40, 2);
  for (uint32_t host : {0u, 1u}) {
    EXPECT_EQ(cluster.engine(host).ses().stats().peers_restarted, 0u) << "host " << host;
    EXPECT_EQ(cluster.engine(host).ses().stats().requests_to_an_earlier_incarnation, 0u);
  }
}

// A sender whose first request the receiver never acknowledged (it died first) holds no
// order state the receiver's successor lacks: the successor takes the request, resent,
// as a first contact's, and it arrives once, intact, ahead of the sender's next ones.
TEST_F(PeerRestart, a_receiver_that_died_before_acknowledging_anything_is_not_a_restart) {
  cluster.fabric().set_host_up(1, false);
  std::vector<uint8_t> unanswered(kBytes, 0xdd), in(kBytes, 0);
  ASSERT_EQ(cluster.engine(0).send(1, unanswered.data(), kBytes, 1), Status::kOk);
  cluster.run_until([] { return false; }, Duration::milliseconds(1));
  cluster.restart(1, 77);
  cluster.fabric().set_host_up(1, true);
  ASSERT_EQ(cluster.engine(1).post_recv({in.data(), kBytes, 1}), Status::kOk);
  auto tx = waiter.wait(0, 1);
  ASSERT_TRUE(tx) << "the send never completed";
  EXPECT_EQ(tx->status, Status::kOk);
  auto rx = waiter.wait(1, 1);
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(in, unanswered);
  send_in_order(0, 1, 0x30, 3);
  EXPECT_EQ(cluster.engine(0).ses().stats().peers_restarted, 0u);
  EXPECT_EQ(cluster.engine(1).ses().stats().requests_to_an_earlier_incarnation, 0u);
}

// Both hosts restart (new engines on the same NICs, with the same PDC ids and start
// PSNs as before), and a request the old host 1 sent to the old host 0 arrives only now.
// It is meant for an incarnation of host 0 that is gone: the new host 0 refuses it, and
// the NACK goes to host 1's address, where the new host 1 has a PDC of the same id. That
// NACK is not taken for a refusal of the new host 1's own requests (its sends would
// fail), nor does the new host 0 learn the old host 1's incarnation from the request.
TEST_F(PeerRestart, a_late_request_of_a_dead_incarnation_fails_nothing_of_the_new_one) {
  send_in_order(0, 1, 0x10, 1);
  std::vector<uint8_t> late;
  hold_requests_of(1, late);
  std::vector<uint8_t> never(kBytes, 0x66);
  ASSERT_EQ(cluster.engine(1).send(0, never.data(), kBytes, 1), Status::kOk);
  cluster.run_until([&] { return !late.empty(); }, Duration::milliseconds(5));
  ASSERT_FALSE(late.empty());
  cluster.fabric().set_drop_filter({});
  cluster.restart(0, cluster.fabric().config().seed * 1000003);
  cluster.restart(1, cluster.fabric().config().seed * 1000003 + 1);
  test_support::inject(cluster, 1, 0, late);
  send_in_order(1, 0, 0x20, 3);
  send_in_order(0, 1, 0x30, 3);
  EXPECT_EQ(cluster.engine(0).ses().stats().requests_to_an_earlier_incarnation, 1u);
  EXPECT_EQ(cluster.engine(0).ses().stats().peers_restarted, 0u);
  EXPECT_EQ(cluster.engine(1).ses().stats().peers_restarted, 0u);
}

// Host 1's first request to host 0 names no incarnation, and a late copy of it reaches
// host 0's successor, which takes it as a first contact and so knows host 1. Host 1's
// next requests say that an engine at host 0's address acknowledged some of its own
// (kAcknowledgedUnknown), and the successor, which knows host 1, takes them as meant
// for itself: it cannot tell that the ids between went to its predecessor. Host 1's next
// send waits there behind them. Until 2026-12-08 it waited for good, completed OK at
// host 1 (restart_mid_flight_test seed 2676): now the probe that asks whether host 1 is
// still there names the id waited for, host 1 answers that every send of its before its
// next has ended, and the successor passes over those ids (ses_order_query.cc).
TEST_F(PeerRestart, a_successor_that_took_a_late_first_request_hears_what_it_missed) {
  std::vector<uint8_t> copy;
  cluster.fabric().set_drop_filter([&copy](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::PdsRequest h;
    if (from == 1 && copy.empty() &&
        wire::decode(std::span<const uint8_t>(p.data, p.len), h) == wire::DecodeError::kOk) {
      copy.assign(p.data, p.data + p.len);  // a copy: the packet itself goes on
    }
    return false;
  });
  send_in_order(1, 0, 0x10, 3);  // ids 0-2, taken by the first host 0
  cluster.fabric().set_drop_filter({});
  ASSERT_FALSE(copy.empty());
  ASSERT_EQ(cluster.engine(1).ses().peer_incarnation(0), 0u) << "host 0's hello went already";
  cluster.restart(0, 4242);
  std::vector<uint8_t> again(kBytes, 0);
  ASSERT_EQ(cluster.engine(0).post_recv({again.data(), kBytes, 1}), Status::kOk);
  test_support::inject(cluster, 1, 0, copy);
  auto late = waiter.wait(0, 1);
  ASSERT_TRUE(late) << "the successor did not take the late first request";
  EXPECT_EQ(again, std::vector<uint8_t>(kBytes, 0x10));  // the first contact's ambiguity
  // Host 1's next send goes on its PDC with the predecessor. The successor holds a
  // phantom of it, opened by the late copy under the same ids, whose next PSN is the
  // copy's next: the send's packet says PSNs past that were acknowledged to its sender,
  // so the successor drops the phantom, unknown as the predecessor's PDC is, and the
  // send fails, not delivered (until 2026-12-08 the successor took it, and its sender,
  // deaf to ACKs behind its left edge, failed it all the same).
  send_fails(1, 0, 2);
  EXPECT_EQ(cluster.engine(1).pds().stats().pdcs_failed_unknown_at_peer, 1u);
  EXPECT_EQ(cluster.engine(0).pds().stats().phantom_pdcs, 1u);
  EXPECT_EQ(cluster.engine(0).ses().rx_in_use(), 0u) << "it took a send that failed";
  // The one after it names id 4, while the successor waits for id 1.
  std::vector<uint8_t> held(kBytes, 0x44), in(kBytes, 0);
  ASSERT_EQ(cluster.engine(0).post_recv({in.data(), kBytes, 3}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, held.data(), kBytes, 3), Status::kOk);
  auto tx = waiter.wait(1, 3);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk);
  auto rx = waiter.wait(0, 3, Duration::milliseconds(50));  // a probe and its answer
  ASSERT_TRUE(rx) << "a send that completed OK waits behind ids that went elsewhere";
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(in, held);
  EXPECT_EQ(cluster.engine(0).ses().stats().ended_ids_passed_over, 2u);  // ids 1 and 2
  EXPECT_GE(cluster.engine(1).ses().stats().order_answers_sent, 1u);
  send_in_order(1, 0, 0x50, 2);
  send_in_order(0, 1, 0x60, 2);
  EXPECT_EQ(cluster.engine(0).ses().rx_in_use(), 0u);
}

// Host 0's first request to host 1 names no incarnation, and host 1's successor takes
// it; the ACK is lost. Meanwhile a late request of the old host 1 reaches host 0, which
// learns that incarnation from it, so host 0's resend names it. The successor took the
// first copy: the resend is a duplicate, acknowledged whatever its words say. Until
// 2026-12-08 it was refused as meant for a predecessor, and host 0 failed a send that had
// been delivered (restart_mid_flight_test seed 2357).
TEST_F(PeerRestart, a_resend_of_a_request_taken_is_ours_whatever_it_names_now) {
  std::vector<uint8_t> late;
  hold_requests_of(1, late);  // the old host 1's request to host 0, kept back
  std::vector<uint8_t> never(kBytes, 0x66), early(kBytes, 0);
  ASSERT_EQ(cluster.engine(0).post_recv({early.data(), kBytes, 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, never.data(), kBytes, 1), Status::kOk);
  cluster.run_until([&] { return !late.empty(); }, Duration::milliseconds(1));
  ASSERT_FALSE(late.empty());
  cluster.restart(1, 4242);
  // The successor's ACKs to host 0 are lost until the late request has arrived.
  bool acks_lost = true;
  cluster.fabric().set_drop_filter([&acks_lost](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::PdsAck a;
    return acks_lost && from == 1 &&
           wire::decode(std::span<const uint8_t>(p.data, p.len), a) == wire::DecodeError::kOk;
  });
  std::vector<uint8_t> out(kBytes, 0x77), in(kBytes, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({in.data(), kBytes, 2}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, out.data(), kBytes, 2), Status::kOk);
  auto rx = waiter.wait(1, 2, Duration::milliseconds(1));
  ASSERT_TRUE(rx) << "the successor did not take the first contact's request";
  EXPECT_EQ(in, out);
  test_support::inject(cluster, 1, 0, late);  // host 0 learns the old host 1 from it
  ASSERT_TRUE(waiter.wait(0, 1));
  EXPECT_EQ(early, never);
  ASSERT_NE(cluster.engine(0).ses().peer_incarnation(1), 0u);
  ASSERT_NE(cluster.engine(0).ses().peer_incarnation(1), cluster.engine(1).ses().incarnation());
  acks_lost = false;
  auto tx = waiter.wait(0, 2);
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->status, Status::kOk) << "a send delivered was reported failed";
  EXPECT_EQ(cluster.engine(0).ses().stats().peers_restarted, 0u) << "the resend was refused";
}

// Host 0 dies halfway through a send and comes back: the receive it had matched ends
// at once (not after probes), its rx slot comes back, and the new incarnation's first
// send lands in the next receive.
TEST_F(PeerRestart, what_the_old_incarnation_left_ends_when_the_new_one_speaks) {
  constexpr uint64_t kLong = 30000;  // 8 packets
  std::vector<uint8_t> half(kLong, 0x77), dst(kLong, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), kLong, 1}), Status::kOk);
  cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::PdsRequest h;
    size_t consumed = 0;
    const std::span<const uint8_t> bytes(p.data, p.len);
    wire::SesStandardRequest s;
    return from == 0 && wire::decode(bytes, h, &consumed) == wire::DecodeError::kOk &&
           wire::decode(bytes.subspan(consumed), s) == wire::DecodeError::kOk &&
           s.common.opcode == wire::SesOpcode::kSend &&
           !s.common.has(wire::ses_flags::kStartOfMessage) && s.message_offset >= 8192;
  });
  ASSERT_EQ(cluster.engine(0).send(1, half.data(), kLong, 1), Status::kOk);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).ses().rx_in_use() == 1; },
                                Duration::milliseconds(5)));
  cluster.fabric().set_drop_filter({});
  cluster.restart(0, 4242);
  std::vector<uint8_t> fresh(kBytes, 0x99), in(kBytes, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({in.data(), kBytes, 2}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, fresh.data(), kBytes, 2), Status::kOk);
  auto rx = waiter.wait(1, 2, Duration::milliseconds(5));  // well before any probe
  ASSERT_TRUE(rx) << "the new incarnation's send never arrived";
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(in, fresh);
  auto ended = waiter.take(1, 1);
  ASSERT_TRUE(ended) << "the old incarnation's half send still holds its receive";
  EXPECT_EQ(ended->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(1).ses().stats().receives_abandoned, 1u);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
}

// Either host restarts at random moments between exchanges both ways, on a fabric that
// loses, duplicates, corrupts and reorders packets: before or after hellos, first
// contacts and ACKs, one side or both. A send may fail only in the first exchange after
// its receiver restarted, and only as "peer unreachable"; every send that completes OK
// is received, intact, exactly once; no operation hangs; and after the last restart
// both hosts talk both ways again. One run of 40 random steps a seed.
class RandomRestarts {
 public:
  explicit RandomRestarts(uint64_t seed)
      : seed_(seed), rng_(seed), cluster_(fabric(seed), engine_config()), waiter_(cluster_) {}

  void play() {
    uint32_t restarts = 0;
    for (int step = 0; step < 40; ++step) {
      const uint64_t draw = rng_();
      const auto host = static_cast<uint32_t>((draw >> 8) & 1);
      switch (draw % 5) {
        case 0:
          cluster_.restart(host, seed_ * 1000 + static_cast<uint64_t>(step));
          restarted_since_heard_[host] = true;
          ++restarts;
          break;
        case 1:  // around the 10 ms after which a hello goes
          cluster_.run_until([] { return false; }, Duration::microseconds((draw >> 16) % 15000));
          break;
        default:
          exchange(host, 1 - host, 1 + static_cast<int>((draw >> 16) % 3));
          break;
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Sends in flight to a predecessor all fail: the first round after a restart may lose
    // all of its sends to the restarted host, not the second.
    for (int round = 0; round < 2; ++round) {
      exchange(0, 1, 3);
      exchange(1, 0, 3);
    }
    for (uint32_t host : {0u, 1u}) {
      EXPECT_FALSE(restarted_since_heard_[host]) << "host " << host << " is not heard again";
      EXPECT_EQ(cluster_.engine(host).ses().stats().unexpected_messages, 0u)
          << "host " << host << " got a send twice, or one that failed";
    }
    restarted_any_ = restarts > 0;
  }
  bool restarted_any() const { return restarted_any_; }

 private:
  // Faulty, with room for the few packets two hosts have in flight here.
  static sim::FabricConfig fabric(uint64_t seed) {
    sim::FabricConfig f = test_support::faulty_fabric(2, seed);
    f.buffers = 2048;
    return f;
  }
  // Each restart makes a new engine: small tables.
  static engine::EngineConfig engine_config() { return test_support::small_engine_config(16); }

  // `from` sends `count` tagged messages to `to`, each into a receive posted for its tag.
  void exchange(uint32_t from, uint32_t to, int count) {
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<uint64_t> ctxs;
    for (int i = 0; i < count; ++i) {
      const uint64_t ctx = next_ctx_++;
      ctxs.push_back(ctx);
      out.emplace_back(kBytes, static_cast<uint8_t>(ctx));
      in.emplace_back(kBytes, 0);
      ASSERT_EQ(cluster_.engine(to).post_recv({.buffer = in.back().data(),
                                               .length = kBytes,
                                               .context = ctx,
                                               .tagged = true,
                                               .tag = ctx,
                                               .source = from}),
                Status::kOk);
    }
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(cluster_.engine(from).send(to, out[i].data(), kBytes, ctxs[i],
                                           {.tagged = true, .tag = ctxs[i]}),
                Status::kOk);
    }
    bool any_ok = false;
    for (int i = 0; i < count; ++i) {
      auto tx = waiter_.wait(from, ctxs[i], Duration::seconds(20));
      ASSERT_TRUE(tx) << "a send of host " << from << " never ended";
      if (tx->status == Status::kOk) {
        any_ok = true;
        auto rx = waiter_.wait(to, ctxs[i]);
        ASSERT_TRUE(rx) << "host " << to << " never received a send that completed OK";
        EXPECT_EQ(rx->status, Status::kOk);
        EXPECT_EQ(in[i], out[i]);
      } else {
        EXPECT_EQ(tx->status, Status::kPeerUnreachable);
        EXPECT_TRUE(restarted_since_heard_[to])
            << "a send from host " << from << " failed, and host " << to << " had not restarted";
        ASSERT_EQ(cluster_.engine(to).cancel_recv(ctxs[i]), Status::kOk)
            << "host " << to << " took a send that failed";
      }
    }
    if (any_ok) restarted_since_heard_[to] = false;
  }

  uint64_t seed_;
  std::mt19937_64 rng_;
  sim::Cluster cluster_;
  CompletionWaiter waiter_;
  uint64_t next_ctx_ = 1;
  // Per host: it restarted after its peer's last send to it that completed OK.
  bool restarted_since_heard_[2] = {false, false};
  bool restarted_any_ = false;
};

// 100 seeds in one case, a tenth of a second (4 s under ASan). Before a restart that
// speaks first was seen (PeerIncarnations::unvouched), 19 of them failed, the first at
// seed 2 (a send completed OK that its receiver never got).
TEST(PeerRestartsAtRandom, lose_nothing_that_completed_and_never_stop_the_talk) {
  uint32_t with_restarts = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RandomRestarts run(seed);
    run.play();
    if (HasFailure()) return;
    with_restarts += run.restarted_any() ? 1 : 0;
  }
  EXPECT_GT(with_restarts, 75u);
}

}  // namespace
}  // namespace spray
