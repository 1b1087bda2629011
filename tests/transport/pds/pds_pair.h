// Two Pds instances wired by hand for tests that drive PDS directly: the headers one
// queues are handed to the other by the test, and time is whatever the test says.
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <variant>
#include <vector>

#include "transport/pds/pds.h"

namespace spray::pds::test {

inline constexpr PeerIndex kA = 0;  // how B names A
inline constexpr PeerIndex kB = 1;  // how A names B

inline PdsConfig config() {
  PdsConfig c;
  c.max_pdcs = 4;
  c.window_packets = 64;
  c.cc_name = "fixed";
  c.cc.fixed_window_bytes = 1 << 20;
  c.path_name = "oblivious";
  c.initial_rto = Duration::microseconds(100);
  c.max_retries = 3;
  return c;
}

inline Time us(int64_t v) {
  return Time{Duration::microseconds(v).ps};
}

// Control packets of one kind among those a Pds queued.
template <class Header>
std::vector<Header> headers_of(const std::vector<ControlPacket>& out) {
  std::vector<Header> found;
  for (const ControlPacket& c : out) {
    if (const auto* h = std::get_if<Header>(&c.header)) found.push_back(*h);
  }
  return found;
}

template <PdsConfig (*Config)()>
struct PairWith : ::testing::Test {
  Pds a{Config()}, b{Config()};
  std::vector<TxRun> runs = std::vector<TxRun>(8);

  TxRun* run(uint32_t message, uint32_t packets) {
    TxRun* r = &runs[message];
    *r = TxRun{};
    r->message = message;
    r->packet_count = packets;
    r->packet_bytes = 1000;
    return r;
  }
  // A run that answers the peer (a response, read request or read data).
  TxRun* answer(uint32_t message, uint32_t packets) {
    TxRun* r = run(message, packets);
    r->answer = true;
    return r;
  }
  // B opens its own PDC to A with `b_run` (lost, like everything B sends A in the tests
  // that use this), then A opens one to B, which B accepts: A's operation now waits on B.
  void open_both_ways(TxRun* b_run) {
    b.enqueue(kA, Mode::kRud, b_run, us(0));
    drain_tx(b, us(0));
    a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
    ASSERT_EQ(deliver(b, kA, drain_tx(a, us(0)).at(0)), RxVerdict::kDeliver);
  }
  // A and B open PDCs to each other at once (their SYNs cross, message 0 from A and 1
  // from B), so each holds its own and the other's. Returns the SYNs: A's then B's.
  std::pair<TxPacket, TxPacket> open_crossing_pdcs() {
    a.enqueue(kB, Mode::kRud, run(0, 1), us(0));
    const auto a_syn = drain_tx(a, us(0));
    b.enqueue(kA, Mode::kRud, run(1, 1), us(0));
    const auto b_syn = drain_tx(b, us(0));
    EXPECT_EQ(a_syn.size(), 1u);
    EXPECT_EQ(b_syn.size(), 1u);
    EXPECT_EQ(deliver(b, kA, a_syn.at(0)), RxVerdict::kDeliver);
    EXPECT_EQ(deliver(a, kB, b_syn.at(0)), RxVerdict::kDeliver);
    for (const auto& ack : headers_of<wire::PdsAck>(control(b))) a.on_ack(kB, ack, us(1));
    for (const auto& ack : headers_of<wire::PdsAck>(control(a))) b.on_ack(kA, ack, us(1));
    return {a_syn.at(0), b_syn.at(0)};
  }
  // A sends B a one-packet request `message`, which B refuses for want of a message slot;
  // the NACK waits in B's control queue.
  void request_b_refuses(uint32_t message, Time now) {
    a.enqueue(kB, Mode::kRud, run(message, 1), now);
    const auto refused = drain_tx(a, now);
    ASSERT_EQ(refused.size(), 1u);
    ASSERT_EQ(b.classify_request(kA, refused[0].request, false, 0, now).verdict,
              RxVerdict::kDeliver);
    b.refuse_request(kA, refused[0].request, wire::NackCode::kNoSesMessageAvailable);
  }
  // Everything B sends A is lost until B's PDC to A gives up (its retries run out).
  // Returns when, in microseconds.
  int64_t fail_b_to_a() {
    int64_t t = 0;
    for (; t < 100'000 && b.failed_peers().empty(); t += 50) {
      drain_tx(b, us(t));
      b.on_timers(us(t));
    }
    EXPECT_EQ(b.failed_peers(), std::vector<PeerIndex>{kA}) << "B's PDC to A never failed";
    return t;
  }
  // Moves the clock `t` (microseconds) on in `step` us steps, running A's timers, until
  // A sends something or t reaches 100 ms; returns what A sent (a timeout's resend).
  std::vector<TxPacket> next_send_of_a(int64_t& t, int64_t step = 10) {
    std::vector<TxPacket> out;
    while (out.empty() && t < 100'000) {
      t += step;
      a.on_timers(us(t));
      out = drain_tx(a, us(t));
    }
    return out;
  }
  std::vector<TxPacket> drain_tx(Pds& p, Time now) {
    std::vector<TxPacket> out;
    uint32_t pdc = 0;
    TxPacket pkt;
    while (p.pop_ready(pdc)) {
      while (p.next_tx(pdc, now, pkt)) out.push_back(pkt);
    }
    return out;
  }
  // Delivers a request to `to`; returns the verdict after committing new packets.
  RxVerdict deliver(Pds& to, PeerIndex from, const TxPacket& pkt, uint64_t held = 0,
                    Time now = us(0)) {
    RxClass c = to.classify_request(from, pkt.request, false, pkt.entropy, now);
    if (c.verdict == RxVerdict::kDeliver || c.verdict == RxVerdict::kHold) {
      to.commit_request(c, false, c.verdict == RxVerdict::kHold ? held : 0);
    }
    return c.verdict;
  }
  std::vector<ControlPacket> control(Pds& p) {
    p.flush_acks();
    auto out = p.control_out();
    p.control_out().clear();
    return out;
  }
};
using Pair = PairWith<config>;

// The same pair with REPS choosing EVs, for tests of which EV a packet takes.
inline PdsConfig reps_config() {
  PdsConfig c = config();
  c.path_name = "reps";
  return c;
}
using RepsPair = PairWith<reps_config>;

}  // namespace spray::pds::test
