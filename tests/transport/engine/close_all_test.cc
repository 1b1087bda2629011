// An engine about to go away closes all its PDCs (Engine::close_all, run by fi_close):
// ours with CLOSE, the peers' by asking them with CLOSE_REQ, so that no peer is left
// holding a PDC to an engine that is gone. Traffic under way is finished first, not cut.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/engine_harness.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

class CloseAll : public ::testing::Test {
 protected:
  CloseAll() : cluster(fabric(), {}), waiter(cluster) {}
  static sim::FabricConfig fabric() {
    sim::FabricConfig f;
    f.hosts = 3;
    return f;
  }
  // Sends `bytes` from `from` to `to` (a receive posted first) and waits until both
  // ends have completed it, intact.
  void deliver(uint32_t from, uint32_t to, size_t bytes, ses::UserContext ctx) {
    std::vector<uint8_t> data(bytes), into(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(ctx + i * 13);
    ASSERT_EQ(cluster.engine(to).post_recv({into.data(), into.size(), ctx}), Status::kOk);
    ASSERT_EQ(cluster.engine(from).send(to, data.data(), data.size(), ctx), Status::kOk);
    const auto sent = waiter.wait(from, ctx);
    const auto received = waiter.wait(to, ctx);
    ASSERT_TRUE(sent && received);
    EXPECT_EQ(sent->status, Status::kOk);
    EXPECT_EQ(received->status, Status::kOk);
    EXPECT_EQ(into, data);
  }
  // Runs the cluster with `host` closing all its PDCs until none is left there, or
  // `limit` passes. True when none is: the host is then gone, as its endpoint would be
  // (what it sent last still arrives), and the others run on for a while.
  bool close_all(uint32_t host, Duration limit = Duration::milliseconds(50)) {
    const bool closed = cluster.run_until(
        [&] { return cluster.engine(host).close_all(cluster.now()) == 0; }, limit);
    if (!closed) return false;
    cluster.fabric().set_host_up(host, false);
    cluster.run_until([] { return false; }, Duration::milliseconds(1));
    return true;
  }
  uint32_t open_pdcs(uint32_t host) { return cluster.engine(host).pds().open_pdcs(); }

  sim::Cluster cluster;
  CompletionWaiter waiter;
};

// Host 0 opened a PDC to host 1 and host 2 one to host 0: both close, at both ends.
TEST_F(CloseAll, closes_its_own_pdcs_and_asks_peers_to_close_theirs) {
  deliver(0, 1, 100, 1);
  deliver(2, 0, 100, 2);
  ASSERT_EQ(open_pdcs(0), 2u);
  ASSERT_EQ(open_pdcs(1), 1u);
  ASSERT_EQ(open_pdcs(2), 1u);
  ASSERT_TRUE(close_all(0)) << open_pdcs(0) << " PDCs still open at host 0";
  EXPECT_EQ(open_pdcs(1), 0u);
  EXPECT_EQ(open_pdcs(2), 0u);
  EXPECT_EQ(cluster.engine(0).pds().stats().close_requests, 1u);
  EXPECT_EQ(cluster.engine(2).pds().stats().pdcs_closed, 1u);
}

// A PDC still carrying a message is closed only once the message has been delivered:
// closing finishes what is under way, it does not cut it (either way round).
TEST_F(CloseAll, a_pdc_with_a_message_under_way_closes_once_it_is_delivered) {
  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> out(kBytes), back(kBytes), in0(kBytes), in1(kBytes);
  for (size_t i = 0; i < kBytes; ++i) {
    out[i] = static_cast<uint8_t>(i * 7);
    back[i] = static_cast<uint8_t>(i * 11 + 3);
  }
  ASSERT_EQ(cluster.engine(1).post_recv({in1.data(), kBytes, 10}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).post_recv({in0.data(), kBytes, 11}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, out.data(), kBytes, 12), Status::kOk);
  ASSERT_EQ(cluster.engine(1).send(0, back.data(), kBytes, 13), Status::kOk);
  ASSERT_TRUE(close_all(0));
  EXPECT_EQ(open_pdcs(1), 0u);
  for (const auto& [host, ctx] : {std::pair{0u, 11u}, {0u, 12u}, {1u, 10u}, {1u, 13u}}) {
    const auto c = waiter.take(host, ctx);
    ASSERT_TRUE(c) << "host " << host << " op " << ctx << " not complete";
    EXPECT_EQ(c->status, Status::kOk) << "host " << host << " op " << ctx;
  }
  EXPECT_EQ(in1, out);
  EXPECT_EQ(in0, back);
}

// A peer that answers nothing keeps its PDC open here: close_all says so (the caller
// stops waiting when it chooses) rather than pretend, and asks again as it goes on.
TEST_F(CloseAll, a_silent_peer_leaves_its_pdc_open_and_is_asked_again) {
  deliver(1, 0, 100, 1);
  cluster.fabric().set_host_up(1, false);
  const Duration waited = Duration::milliseconds(20);
  EXPECT_FALSE(close_all(0, waited));
  EXPECT_EQ(open_pdcs(0), 1u);
  // Asked again once an initial RTO, not at every step.
  const uint64_t asked = cluster.engine(0).pds().stats().close_requests;
  EXPECT_GE(asked, 2u);
  EXPECT_LE(asked, uint64_t(waited.ps / pds::PdsConfig{}.initial_rto.ps) + 1);
  // Once the peer is back it answers, and the PDC closes at both ends.
  cluster.fabric().set_host_up(1, true);
  EXPECT_TRUE(close_all(0));
  EXPECT_EQ(open_pdcs(1), 0u);
}

}  // namespace
}  // namespace spray
