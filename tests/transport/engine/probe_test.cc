// Probes of unexpected messages (what FI_PEEK, FI_CLAIM and FI_DISCARD and MPI_Probe,
// MPI_Mprobe build on): a peek reports without receiving, a claim sets one message
// aside for one later receive, a discard drops a message while its sender still
// completes. Eager and rendezvous messages alike.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/engine_harness.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

class Probe : public ::testing::Test {
 protected:
  Probe() : cluster(fabric(), {}), waiter(cluster) {}
  static sim::FabricConfig fabric() {
    sim::FabricConfig f;
    f.hosts = 3;
    return f;
  }
  // Sends `bytes` bytes of `fill` from host `from` to host 1 with `tag` and lets them
  // arrive (unexpected: host 1 has no receive posted).
  std::vector<uint8_t>& send_unexpected(uint32_t from, size_t bytes, uint8_t fill, uint64_t tag,
                                        ses::UserContext ctx) {
    sources.emplace_back(bytes, fill);
    EXPECT_EQ(
        cluster.engine(from).send(1, sources.back().data(), bytes, ctx,
                                  {.tagged = true, .tag = tag, .has_data = true, .data = tag}),
        Status::kOk);
    cluster.run_until([] { return false; }, Duration::microseconds(200));
    return sources.back();
  }
  static ses::RecvSpec tagged(void* buf, size_t len, ses::UserContext ctx, uint64_t tag,
                              uint64_t ignore = 0, pds::PeerIndex source = pds::kNoPeer) {
    return {static_cast<uint8_t*>(buf), len, ctx, true, tag, ignore, source};
  }

  sim::Cluster cluster;
  CompletionWaiter waiter;
  std::vector<std::vector<uint8_t>> sources;  // reserved by each test: references stay valid
};

TEST_F(Probe, peek__reports_nothing_then_the_message_and_leaves_it_queued) {
  auto& engine = cluster.engine(1);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 1, 7), ses::ProbeAction::kPeek), Status::kOk);
  auto miss = waiter.take(1, 1);
  ASSERT_TRUE(miss);
  EXPECT_EQ(miss->status, Status::kNoMessage);

  sources.reserve(4);
  const auto& sent = send_unexpected(0, 300, 0x5a, 7, 100);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 2, 7), ses::ProbeAction::kPeek), Status::kOk);
  auto hit = waiter.take(1, 2);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->status, Status::kOk);
  EXPECT_EQ(hit->length, 300u);
  EXPECT_EQ(hit->tag, 7u);
  EXPECT_TRUE(hit->has_data);
  EXPECT_EQ(hit->data, 7u);
  EXPECT_EQ(hit->peer, 0u);

  // Peeking again finds it again; a receive then takes it, whole.
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 3, 7), ses::ProbeAction::kPeek), Status::kOk);
  EXPECT_EQ(waiter.take(1, 3)->status, Status::kOk);
  std::vector<uint8_t> dst(300);
  ASSERT_EQ(engine.post_recv(tagged(dst.data(), dst.size(), 4, 7)), Status::kOk);
  auto got = waiter.wait(1, 4);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, Status::kOk);
  EXPECT_EQ(dst, sent);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 5, 7), ses::ProbeAction::kPeek), Status::kOk);
  EXPECT_EQ(waiter.take(1, 5)->status, Status::kNoMessage);
}

TEST_F(Probe, peek__honours_source_and_ignore_bits_and_reports_the_first_in_order) {
  sources.reserve(4);
  send_unexpected(0, 10, 1, 0x100, 100);
  send_unexpected(2, 20, 2, 0x101, 100);
  send_unexpected(0, 30, 3, 0x102, 101);
  auto& engine = cluster.engine(1);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 1, 0x100, 0xff, 2), ses::ProbeAction::kPeek),
            Status::kOk);
  auto from2 = waiter.take(1, 1);
  ASSERT_TRUE(from2);
  EXPECT_EQ(from2->peer, 2u);
  EXPECT_EQ(from2->length, 20u);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 2, 0x102, 0, 0), ses::ProbeAction::kPeek), Status::kOk);
  EXPECT_EQ(waiter.take(1, 2)->length, 30u);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 3, 0x100, 0xff), ses::ProbeAction::kPeek), Status::kOk);
  EXPECT_EQ(waiter.take(1, 3)->length, 10u);  // any source: the oldest
}

// A claimed message belongs to the claim: a wildcard receive posted afterwards gets the
// next message, and the claimed one lands only through recv_claimed. Eager (1 KiB) and
// rendezvous (256 KiB) sizes.
TEST_F(Probe, claim__sets_the_message_aside_for_its_own_receive) {
  for (const size_t size : {size_t{1024}, size_t{256 * 1024}}) {
    SCOPED_TRACE(size);
    sources.clear();
    sources.reserve(4);
    const auto& first = send_unexpected(0, size, 0x11, 9, 100);
    const auto& second = send_unexpected(0, size, 0x22, 9, 101);
    auto& engine = cluster.engine(1);
    ASSERT_EQ(engine.probe(tagged(nullptr, 0, 1, 9), ses::ProbeAction::kClaim, 0xc1a1),
              Status::kOk);
    auto claim = waiter.take(1, 1);
    ASSERT_TRUE(claim);
    ASSERT_EQ(claim->status, Status::kOk);
    EXPECT_EQ(claim->length, size);
    // The same key cannot hold two claims.
    EXPECT_EQ(engine.probe(tagged(nullptr, 0, 9, 9), ses::ProbeAction::kClaim, 0xc1a1),
              Status::kInvalidArgument);

    std::vector<uint8_t> a(size), b(size);
    ASSERT_EQ(engine.post_recv(tagged(a.data(), a.size(), 2, 0, ~0ull)), Status::kOk);
    auto wildcard = waiter.wait(1, 2);
    ASSERT_TRUE(wildcard);
    EXPECT_EQ(a, second);
    ASSERT_EQ(engine.recv_claimed(tagged(b.data(), b.size(), 3, 0), 0xc1a1), Status::kOk);
    auto claimed = waiter.wait(1, 3);
    ASSERT_TRUE(claimed);
    EXPECT_EQ(claimed->status, Status::kOk);
    EXPECT_EQ(claimed->length, size);
    EXPECT_EQ(b, first);
    // Both senders complete.
    EXPECT_EQ(waiter.wait(0, 100)->status, Status::kOk);
    EXPECT_EQ(waiter.wait(0, 101)->status, Status::kOk);
    EXPECT_EQ(engine.recv_claimed(tagged(b.data(), b.size(), 4, 0), 0xc1a1),
              Status::kInvalidArgument);  // the claim was used up
  }
}

TEST_F(Probe, discard__drops_the_message_and_its_sender_still_completes) {
  for (const size_t size : {size_t{64}, size_t{300 * 1024}}) {
    SCOPED_TRACE(size);
    sources.clear();
    sources.reserve(4);
    send_unexpected(0, size, 0x33, 5, 200);
    const auto& kept = send_unexpected(0, size, 0x44, 5, 201);
    auto& engine = cluster.engine(1);
    ASSERT_EQ(engine.probe(tagged(nullptr, 0, 1, 5), ses::ProbeAction::kDiscard), Status::kOk);
    auto peek = waiter.take(1, 1);
    ASSERT_TRUE(peek);
    EXPECT_EQ(peek->status, Status::kOk);
    EXPECT_EQ(peek->length, size);
    EXPECT_EQ(waiter.wait(0, 200)->status, Status::kOk);

    std::vector<uint8_t> dst(size);
    ASSERT_EQ(engine.post_recv(tagged(dst.data(), dst.size(), 2, 5)), Status::kOk);
    ASSERT_TRUE(waiter.wait(1, 2));
    EXPECT_EQ(dst, kept);
    EXPECT_EQ(waiter.wait(0, 201)->status, Status::kOk);
    EXPECT_EQ(waiter.pending(1), 0u);  // the discarded message reported nothing more
  }
}

TEST_F(Probe, claim_then_discard__completes_the_claim_with_nothing_placed) {
  sources.reserve(2);
  send_unexpected(2, 4000, 0x55, 3, 300);
  auto& engine = cluster.engine(1);
  ASSERT_EQ(engine.probe(tagged(nullptr, 0, 1, 3), ses::ProbeAction::kClaim, 42), Status::kOk);
  ASSERT_EQ(waiter.take(1, 1)->status, Status::kOk);
  ses::RecvSpec drop = tagged(nullptr, 0, 2, 3);
  drop.discard = true;
  ASSERT_EQ(engine.recv_claimed(drop, 42), Status::kOk);
  auto done = waiter.wait(1, 2);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, Status::kOk);
  EXPECT_EQ(done->length, 0u);
  EXPECT_EQ(done->peer, 2u);
  EXPECT_EQ(waiter.wait(2, 300)->status, Status::kOk);
  EXPECT_EQ(waiter.pending(1), 0u);
}

}  // namespace
}  // namespace spray
