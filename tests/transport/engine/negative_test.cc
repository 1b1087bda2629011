// Bad input and misuse: each gets a precise error completion or NACK, and nothing else
// changes — no byte written where it should not be, no completion that should not be,
// and valid traffic still flows afterwards.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;
using test_support::inject;

constexpr uint64_t kKey = 77;

class Negative : public ::testing::Test {
 protected:
  Negative() : Negative(sim::FabricConfig{}, engine::EngineConfig{}) {}
  Negative(sim::FabricConfig f, engine::EngineConfig e) : cluster(f, e), waiter(cluster) {
    region.assign(64 * 1024, 0x11);
    EXPECT_EQ(
        cluster.engine(1).register_memory({region.data(), region.size(), 0, kKey,
                                           ses::access::kRemoteRead | ses::access::kRemoteWrite}),
        Status::kOk);
  }

  // A send from 0 to 1 that must succeed: proves the engines still work.
  void expect_still_working(uint64_t ctx) {
    std::vector<uint8_t> src(5000, 0x5a), dst(5000, 0);
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), ctx}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), ctx), Status::kOk);
    auto rx = waiter.wait(1, ctx);
    ASSERT_TRUE(rx);
    EXPECT_EQ(rx->status, Status::kOk);
    EXPECT_EQ(dst, src);
    auto tx = waiter.wait(0, ctx);
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->status, Status::kOk);
  }

  sim::Cluster cluster;
  CompletionWaiter waiter;
  std::vector<uint8_t> region;
};

TEST_F(Negative, write__wrong_key_fails_and_leaves_memory_untouched) {
  std::vector<uint8_t> src(3000, 0xee);
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0, kKey + 1, 1), Status::kOk);
  auto c = waiter.wait(0, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kBadKey);
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x11; }));
  EXPECT_EQ(cluster.engine(1).ses().stats().rma_errors, 1u);
  EXPECT_EQ(waiter.pending(1), 0u);
  expect_still_working(2);
}

TEST_F(Negative, write__out_of_bounds_fails_whole_and_partial_overlap) {
  std::vector<uint8_t> src(20000, 0xee);
  // Starts inside, ends outside: nothing may land, not even the in-bounds prefix.
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), region.size() - 100, kKey, 1),
            Status::kOk);
  // Starts beyond the end; and an offset that would overflow 64 bits.
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), 8, region.size(), kKey, 2), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), 8, ~uint64_t{0} - 3, kKey, 3), Status::kOk);
  for (uint64_t ctx : {1, 2, 3}) {
    auto c = waiter.wait(0, ctx);
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kOutOfBounds) << ctx;
  }
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t b) { return b == 0x11; }));
  expect_still_working(4);
}

TEST_F(Negative, read__out_of_bounds_and_bad_key_leave_local_buffer_untouched) {
  std::vector<uint8_t> dst(4096, 0x22);
  ASSERT_EQ(cluster.engine(0).read(1, dst.data(), dst.size(), region.size() - 10, kKey, 1),
            Status::kOk);
  ASSERT_EQ(cluster.engine(0).read(1, dst.data(), dst.size(), 0, 12345, 2), Status::kOk);
  auto a = waiter.wait(0, 1);
  auto b = waiter.wait(0, 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->status, Status::kOutOfBounds);
  EXPECT_EQ(b->status, Status::kBadKey);
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t x) { return x == 0x22; }));
}

TEST_F(Negative, write__to_read_only_region_is_denied) {
  std::vector<uint8_t> ro(1000, 0x33), src(100, 0x44);
  ASSERT_EQ(
      cluster.engine(1).register_memory({ro.data(), ro.size(), 0, 5, ses::access::kRemoteRead}),
      Status::kOk);
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0, 5, 1), Status::kOk);
  auto c = waiter.wait(0, 1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kAccessDenied);
  EXPECT_TRUE(std::all_of(ro.begin(), ro.end(), [](uint8_t b) { return b == 0x33; }));
}

TEST_F(Negative, recv__truncates_eager_and_rendezvous_messages) {
  for (uint64_t size : {1000u, 300000u}) {  // eager, then rendezvous
    std::vector<uint8_t> src(size);
    std::iota(src.begin(), src.end(), 0);
    std::vector<uint8_t> dst(size / 2 + 16, 0xcc);
    const uint64_t room = size / 2;
    ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), room, size}), Status::kOk);
    ASSERT_EQ(cluster.engine(0).send(1, src.data(), size, size), Status::kOk);
    auto rx = waiter.wait(1, size);
    ASSERT_TRUE(rx);
    EXPECT_EQ(rx->status, Status::kTruncated);
    EXPECT_EQ(rx->length, room);
    EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + static_cast<ptrdiff_t>(room), src.begin()));
    EXPECT_TRUE(std::all_of(dst.begin() + static_cast<ptrdiff_t>(room), dst.end(),
                            [](uint8_t b) { return b == 0xcc; }));  // nothing past the buffer
    auto tx = waiter.wait(0, size);
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->status, Status::kOk);  // the sender's message was delivered
  }
}

// Malformed headers of every PDS type (and SES behind a valid PDS header) are dropped
// and counted; no PDC opens, no completion appears, valid traffic continues.
TEST_F(Negative, malformed__every_header_type_is_dropped_and_counted) {
  std::vector<std::vector<uint8_t>> bad;
  for (uint8_t type = 0; type < 32; ++type) {
    bad.push_back({static_cast<uint8_t>(type << 3)});              // truncated prologue
    bad.push_back({static_cast<uint8_t>(type << 3), 0x7f, 0, 0});  // reserved flags, short
  }
  bad.push_back({0x11, 0x8c, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0});  // RUD SYN, no SES header
  std::vector<uint8_t> syn_bad_ses = {0x11, 0x84, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0};
  syn_bad_ses.resize(12 + 44, 0);
  syn_bad_ses[12] = 0x3f;  // SES opcode out of range
  bad.push_back(syn_bad_ses);
  std::vector<uint8_t> nack(16, 0);
  nack[0] = 0x50;
  nack[2] = 0x0c;  // reserved NACK code
  bad.push_back(nack);
  std::vector<uint8_t> ctrl(16, 0);
  ctrl[0] = 0x5f;  // CTRL type 15
  ctrl[1] = 0x80;
  bad.push_back(ctrl);
  const uint64_t before = cluster.engine(1).stats().rx_malformed;
  for (const auto& p : bad) inject(cluster, 0, 1, p);
  cluster.run_until([] { return false; }, Duration::microseconds(50));
  EXPECT_GE(
      cluster.engine(1).stats().rx_malformed + cluster.engine(1).ses().stats().malformed_packets,
      before + bad.size() - 4);
  EXPECT_EQ(waiter.pending(1), 0u);
  expect_still_working(1);
}

TEST_F(Negative, unknown_pdc__gets_invalid_dpdcid_nack_and_no_delivery) {
  std::vector<uint8_t> dst(100, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 9}), Status::kOk);
  // A non-SYN RUD request naming PDC 999, with a valid SES send behind it.
  std::vector<uint8_t> pkt(12 + 44 + 10, 0);
  wire::PdsRequest h;
  h.psn = 5;
  h.spdcid = 3;
  h.dpdcid = 999;
  wire::encode(h, pkt);
  wire::SesStandardRequest s;
  s.common.opcode = wire::SesOpcode::kSend;
  s.common.flags = wire::ses_flags::kStartOfMessage | wire::ses_flags::kEndOfMessage;
  s.request_length = 10;
  wire::encode(s, std::span<uint8_t>(pkt).subspan(12));
  const uint64_t nacks = cluster.engine(1).pds().stats().nacks_sent;
  inject(cluster, 0, 1, pkt);
  cluster.run_until([] { return false; }, Duration::microseconds(50));
  EXPECT_EQ(cluster.engine(1).pds().stats().nacks_sent, nacks + 1);
  EXPECT_EQ(cluster.engine(1).pds().open_pdcs(), 0u);
  EXPECT_FALSE(waiter.take(1, 9));  // the receive stays posted
  ASSERT_EQ(cluster.engine(1).cancel_recv(9), Status::kOk);
  expect_still_working(2);
}

TEST_F(Negative, forged_ack__beyond_what_was_sent_is_ignored) {
  std::vector<uint8_t> src(200000, 0x42), dst(200000, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  cluster.step();  // the PDC exists now
  const pds::Pdc* p = cluster.engine(0).pds().pdc(0);
  ASSERT_NE(p, nullptr);
  wire::PdsAck forged;
  forged.cack_psn = p->snd_nxt + 1000;  // acknowledges what was never sent
  forged.dpdcid = p->local_id;
  forged.spdcid = 0;
  std::vector<uint8_t> pkt(wire::kAckBytes);
  wire::encode(forged, pkt);
  const uint64_t bad = cluster.engine(0).pds().stats().bad_packets;
  inject(cluster, 1, 0, pkt);
  auto rx = waiter.wait(1, 1);
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kOk);
  EXPECT_EQ(dst, src);
  EXPECT_GT(cluster.engine(0).pds().stats().bad_packets, bad);
}

TEST_F(Negative, dead_peer__operations_fail_with_peer_unreachable_not_hang) {
  cluster.fabric().set_host_up(1, false);
  std::vector<uint8_t> buf(10000, 1);
  ASSERT_EQ(cluster.engine(0).send(1, buf.data(), buf.size(), 1), Status::kOk);
  ASSERT_EQ(cluster.engine(0).write(1, buf.data(), buf.size(), 0, kKey, 2), Status::kOk);
  ASSERT_EQ(cluster.engine(0).read(1, buf.data(), buf.size(), 0, kKey, 3), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, buf.data(), 200000, 4), Status::kOk);  // rendezvous
  for (uint64_t ctx : {1, 2, 3, 4}) {
    auto c = waiter.wait(0, ctx, Duration::seconds(5));
    ASSERT_TRUE(c) << ctx;
    EXPECT_EQ(c->status, Status::kPeerUnreachable) << ctx;
  }
  // The failed sends' MSG_ERRs go out and fail in turn, a bounded number of times
  // (Ses::kSkipTriesAtOnce at once, kSkipLateTries more within about 8 s); then nothing
  // is left in flight or held, and nothing more is sent to the dead host.
  cluster.run_until([] { return false; }, Duration::seconds(15));
  EXPECT_EQ(cluster.engine(0).pds().open_pdcs(), 0u);
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);  // nothing leaked
  const uint64_t sent = cluster.engine(0).pds().stats().tx_packets;
  cluster.run_until([] { return false; }, Duration::seconds(10));
  EXPECT_EQ(cluster.engine(0).pds().stats().tx_packets, sent);
}

// Sends that failed while the peer was away consumed send ids; MSG_ERR tells the peer
// to skip them, so messages sent after it returns are matched instead of waiting forever.
TEST_F(Negative, dead_peer__that_returns_receives_new_messages_in_order) {
  cluster.fabric().set_host_up(1, false);
  std::vector<uint8_t> lost(9000, 1);
  for (uint64_t ctx = 1; ctx <= 4; ++ctx) {
    ASSERT_EQ(cluster.engine(0).send(1, lost.data(), lost.size(), ctx), Status::kOk);
  }
  for (uint64_t ctx = 1; ctx <= 4; ++ctx) {
    auto c = waiter.wait(0, ctx, Duration::seconds(5));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->status, Status::kPeerUnreachable);
  }
  cluster.fabric().set_host_up(1, true);
  std::vector<uint8_t> a(3000, 0xa), b(70000, 0xb), ra(3000), rb(70000);
  ASSERT_EQ(cluster.engine(1).post_recv({ra.data(), ra.size(), 10}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).post_recv({rb.data(), rb.size(), 11}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, a.data(), a.size(), 10), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, b.data(), b.size(), 11), Status::kOk);
  auto got_a = waiter.wait(1, 10);
  auto got_b = waiter.wait(1, 11);
  ASSERT_TRUE(got_a && got_b);
  EXPECT_EQ(ra, a);  // matched in send order: the skipped ids held nothing back
  EXPECT_EQ(rb, b);
  EXPECT_EQ(cluster.engine(1).ses().rx_in_use(), 0u);
}

// The peer dies after acknowledging every packet but before its response: nothing is
// in flight, yet the operation must still end with an error. A rendezvous send to a
// host with no receive posted is exactly that: its one packet is acknowledged, and the
// response waits for a receive that never comes.
TEST_F(Negative, dead_peer__after_acking_but_before_responding_is_detected) {
  std::vector<uint8_t> src(200000, 1);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(0).pds().stats().acks_received > 0; },
                                Duration::milliseconds(1)));
  cluster.run_until([] { return false; }, Duration::microseconds(100));
  EXPECT_FALSE(waiter.take(0, 1));  // acknowledged, but waiting for the target's response
  cluster.fabric().set_host_up(1, false);
  auto c = waiter.wait(0, 1, Duration::seconds(10));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);
}

// A send fails while a later one, on another PDC, arrives: the later one waits at the
// target behind the failed one's id until our MSG_ERR says to skip it. If the MSG_ERRs
// sent at once fail too (the peer is cut off for a while) and no send follows, they must
// still be sent again once the peer can be reached, or the later message, whose send
// completed OK here, is never delivered. The target here does not probe a sender whose
// send waits (it would take host 0 for dead during the cut and pass over a's id itself:
// abandoned_receive_test.cc), so only the MSG_ERR can release b.
class UnprobedSender : public Negative {
 protected:
  static engine::EngineConfig no_stalled_send_probes() {
    engine::EngineConfig e;
    e.ses.stalled_send_probe_after = Duration::seconds(60);
    return e;
  }
  UnprobedSender() : Negative(sim::FabricConfig{}, no_stalled_send_probes()) {}
};

TEST_F(UnprobedSender,
       failed_send__its_msg_err_goes_again_after_a_partition_so_later_sends_arrive) {
  std::vector<uint8_t> a(3000, 0xa), b(3000, 0xb), ra(3000, 0), rb(3000, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({ra.data(), ra.size(), 1, true, 1, 0, 0}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).post_recv({rb.data(), rb.size(), 2, true, 2, 0, 0}), Status::kOk);
  // The ROD PDC from 0 to 1 is cut: message a (sent first, on it) is lost, b is not.
  cluster.fabric().set_drop_filter([](uint32_t from, uint32_t, const dp::PacketBuf& p) {
    wire::PdsRequest h;
    return from == 0 && wire::decode({p.data, p.len}, h) == wire::DecodeError::kOk && h.ordered;
  });
  ASSERT_EQ(cluster.engine(0).send(1, a.data(), a.size(), 1,
                                   {.tagged = true, .tag = 1, .mode = pds::Mode::kRod}),
            Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, b.data(), b.size(), 2, {.tagged = true, .tag = 2}),
            Status::kOk);
  auto sent_b = waiter.wait(0, 2);
  ASSERT_TRUE(sent_b);
  EXPECT_EQ(sent_b->status, Status::kOk);
  EXPECT_FALSE(waiter.take(1, 2));  // arrived, held behind a's id

  // Now nothing from 0 reaches 1: a fails, and so do the MSG_ERRs sent at once for it.
  cluster.fabric().set_drop_filter(
      [](uint32_t from, uint32_t, const dp::PacketBuf&) { return from == 0; });
  auto sent_a = waiter.wait(0, 1, Duration::seconds(1));
  ASSERT_TRUE(sent_a);
  EXPECT_EQ(sent_a->status, Status::kPeerUnreachable);
  cluster.run_until([] { return false; }, Duration::seconds(1));
  EXPECT_FALSE(waiter.take(1, 2));
  cluster.fabric().set_drop_filter({});

  auto got_b = waiter.wait(1, 2, Duration::seconds(10));
  ASSERT_TRUE(got_b) << "b's send completed, yet it waits behind a's id for good";
  EXPECT_EQ(got_b->status, Status::kOk);
  EXPECT_EQ(rb, b);
  EXPECT_FALSE(waiter.take(1, 1));  // a's receive still waits: nothing came for it
  EXPECT_EQ(ra, std::vector<uint8_t>(3000, 0));
}

// The peer has given up on an answer it owed us while we held no PDC to it (ours had
// closed, as one does to make room in a full table). Our next PDC to it, opened by
// the liveness probe, must not pass for proof that the answer is still coming: the
// peer refuses it, and the operation fails instead of waiting forever.
class LostAnswer : public Negative {
 protected:
  static engine::EngineConfig slow_probes() {
    engine::EngineConfig e;
    // No probe while the peer gives up (about 125 ms of retries): the first comes after.
    e.probe_interval = Duration::milliseconds(500);
    return e;
  }
  LostAnswer() : Negative(sim::FabricConfig{}, slow_probes()) {}
};

TEST_F(LostAnswer, operation_fails_when_the_peer_lost_its_answer_while_no_pdc_was_open) {
  // Host 0 sends a rendezvous message to host 1, which has no receive posted: host 0's
  // one packet is acknowledged and its send waits for host 1 to read the data.
  std::vector<uint8_t> src(200000, 3), dst(200000, 0);
  ASSERT_EQ(cluster.engine(0).send(1, src.data(), src.size(), 1), Status::kOk);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(0).pds().stats().acks_received > 0; },
                                Duration::milliseconds(1)));
  ASSERT_EQ(cluster.engine(0).pds().close(1, pds::Mode::kRud, cluster.now()), Status::kOk);
  ASSERT_TRUE(cluster.run_until(
      [&] {
        return cluster.engine(0).pds().open_pdcs() == 0 && cluster.engine(1).pds().open_pdcs() == 0;
      },
      Duration::milliseconds(10)));

  // Host 1's packets to host 0 vanish: its read requests fail, and so does the error
  // response that tells host 0 its send failed. Host 0 holds no PDC to host 1 meanwhile.
  cluster.fabric().set_drop_filter(
      [](uint32_t from, uint32_t, const dp::PacketBuf&) { return from == 1; });
  ASSERT_EQ(cluster.engine(1).post_recv({dst.data(), dst.size(), 2}), Status::kOk);
  auto rx = waiter.wait(1, 2, Duration::milliseconds(200));
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->status, Status::kPeerUnreachable);
  ASSERT_TRUE(cluster.run_until([&] { return cluster.engine(1).pds().stats().pdcs_failed == 2; },
                                Duration::milliseconds(200)));
  EXPECT_EQ(cluster.engine(0).pds().open_pdcs(), 0u);  // no probe yet
  EXPECT_FALSE(waiter.take(0, 1));
  cluster.fabric().set_drop_filter({});

  auto tx = waiter.wait(0, 1, Duration::seconds(3));
  ASSERT_TRUE(tx) << "the send waits for an answer its peer gave up";
  EXPECT_EQ(tx->status, Status::kPeerUnreachable);
  EXPECT_EQ(cluster.engine(0).ses().tx_in_use(), 0u);
  EXPECT_EQ(cluster.engine(1).pds().stats().syns_refused_after_lost_answers, 1u);
  // Host 1 refuses host 0's new PDCs only until host 0's retries would have run out
  // anyway (Pds::lost_answers_notice); after that the two talk again.
  cluster.run_until([] { return false; }, cluster.engine(1).pds().lost_answers_notice());
  expect_still_working(3);
}

TEST_F(Negative, misuse__is_rejected_with_invalid_argument) {
  std::vector<uint8_t> buf(16);
  EXPECT_EQ(cluster.engine(0).send(99, buf.data(), buf.size(), 1), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(0).send(1, nullptr, 10, 1), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(0).write(1, nullptr, 10, 0, kKey, 1), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(0).read(7, buf.data(), 10, 0, kKey, 1), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(0).post_recv({nullptr, 10, 1}), Status::kInvalidArgument);
  ses::RecvSpec unknown_source{buf.data(), buf.size(), 1};
  unknown_source.source = 42;
  EXPECT_EQ(cluster.engine(0).post_recv(unknown_source), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(1).register_memory({region.data(), 10, 0, kKey, 0}),
            Status::kInvalidArgument);  // duplicate key
  EXPECT_EQ(cluster.engine(0).cancel_recv(12345), Status::kInvalidArgument);
  EXPECT_EQ(cluster.engine(0).deregister_memory(4242), Status::kBadKey);
  EXPECT_EQ(cluster.engine(0).send_datagram(1, buf.data(), 1 << 20, 1), Status::kTooLong);
  EXPECT_EQ(waiter.pending(0), 0u);  // a rejected call never completes later
}

TEST_F(Negative, cancel__posted_receive_completes_canceled_once) {
  std::vector<uint8_t> buf(16);
  ASSERT_EQ(cluster.engine(1).post_recv({buf.data(), buf.size(), 5}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).cancel_recv(5), Status::kOk);
  auto c = waiter.take(1, 5);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kCanceled);
  EXPECT_EQ(cluster.engine(1).cancel_recv(5), Status::kInvalidArgument);
}

class FullPdcTable : public Negative {
 protected:
  static sim::FabricConfig four_hosts() {
    sim::FabricConfig f;
    f.hosts = 4;
    return f;
  }
  static engine::EngineConfig two_pdcs() {
    engine::EngineConfig e;
    e.pds.max_pdcs = 2;
    return e;
  }
  FullPdcTable() : Negative(four_hosts(), two_pdcs()) {}
};

TEST_F(FullPdcTable, syn__to_a_full_table_of_idle_pdcs_gets_in_once_one_is_closed) {
  std::vector<uint8_t> src(100, 7), dst(3 * 100, 0);
  for (uint32_t from = 1; from <= 3; ++from) {
    ses::RecvSpec r{dst.data() + (from - 1) * 100, 100, from, false, 0, 0, from};
    ASSERT_EQ(cluster.engine(0).post_recv(r), Status::kOk);
  }
  // Hosts 1 and 2 open PDCs first and finish; host 3 finds host 0's table full. Host 0
  // refuses its SYN and asks the initiator of its least recently used PDC to close it;
  // host 3's next try gets in.
  ASSERT_EQ(cluster.engine(1).send(0, src.data(), 100, 1), Status::kOk);
  ASSERT_EQ(cluster.engine(2).send(0, src.data(), 100, 2), Status::kOk);
  ASSERT_TRUE(waiter.wait(1, 1) && waiter.wait(2, 2));
  ASSERT_EQ(cluster.engine(3).send(0, src.data(), 100, 3), Status::kOk);
  auto c = waiter.wait(3, 3);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, Status::kOk);
  auto r = waiter.wait(0, 3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, Status::kOk);
  EXPECT_EQ(std::count(dst.begin() + 200, dst.end(), 7), 100);
  const pds::PdsStats& target = cluster.engine(0).pds().stats();
  EXPECT_GE(target.pdcs_refused, 1u);
  EXPECT_GE(target.close_requests, 1u);
  EXPECT_LE(cluster.engine(0).pds().open_pdcs(), 2u);
}

TEST_F(FullPdcTable, sender__with_a_full_table_reaches_every_peer_by_closing_idle_pdcs) {
  // Host 0 holds two PDCs and sends to three peers, twice round: each send to a peer
  // without a PDC waits while an idle one closes. Every byte arrives, none fails.
  std::vector<uint8_t> src(300, 9);
  std::vector<std::vector<uint8_t>> dst(3, std::vector<uint8_t>(2 * 300, 0));
  for (uint32_t to = 1; to <= 3; ++to) {
    for (uint32_t round = 0; round < 2; ++round) {
      ses::RecvSpec r{dst[to - 1].data() + round * 300, 300, 10 * to + round, false, 0, 0, 0};
      ASSERT_EQ(cluster.engine(to).post_recv(r), Status::kOk);
    }
  }
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint32_t to = 1; to <= 3; ++to) {
      ASSERT_EQ(cluster.engine(0).send(to, src.data(), 300, 100 * round + to), Status::kOk);
    }
    for (uint32_t to = 1; to <= 3; ++to) {
      auto c = waiter.wait(0, 100 * round + to);
      ASSERT_TRUE(c);
      EXPECT_EQ(c->status, Status::kOk);
    }
  }
  for (uint32_t to = 1; to <= 3; ++to) {
    EXPECT_EQ(std::count(dst[to - 1].begin(), dst[to - 1].end(), 9), 600) << "host " << to;
  }
  EXPECT_GE(cluster.engine(0).pds().stats().pdc_waits, 1u);
  EXPECT_LE(cluster.engine(0).pds().open_pdcs(), 2u);
}

}  // namespace
}  // namespace spray
