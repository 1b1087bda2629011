// A PDC carries traffic both ways, so a target sends its own messages on the PDC its
// peer opened. When the peer (the initiator) failed that PDC and forgot it, the target's
// next packets on it are answered INVALID_DPDCID. Those sends must still arrive, intact
// and once each, over a PDC the target opens in its place (Pds::reopen_orphan), and not
// fail as "peer unreachable" with the peer alive and reachable.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/engine_harness.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

constexpr uint64_t kKey = 5;

uint8_t byte_of(size_t message, size_t i) {
  return static_cast<uint8_t>(message * 31 + i * 7 + 1);
}

// Host 0 writes to host 1, and everything host 0 sends after its first 5 packets is lost
// until the write fails: host 0 has failed and forgotten its PDC to host 1, which host 1
// still holds. Returns with host 0's packets getting through again.
void fail_host0s_pdc(sim::Cluster& cluster, CompletionWaiter& waiter, bool& cut) {
  static std::vector<uint8_t> region(70000), src(70000, 4);
  ASSERT_EQ(cluster.engine(1).register_memory(
                {region.data(), region.size(), 0, kKey, ses::access::kRemoteWrite}),
            Status::kOk);
  int let_through = 5;
  cluster.fabric().set_drop_filter(
      [&cut, let_through](uint32_t from, uint32_t, const dp::PacketBuf&) mutable {
        return from == 0 && cut && let_through-- <= 0;
      });
  ASSERT_EQ(cluster.engine(0).write(1, src.data(), src.size(), 0, kKey, 1), Status::kOk);
  const auto failed = waiter.wait(0, 1, Duration::seconds(5));
  ASSERT_TRUE(failed);
  ASSERT_EQ(failed->status, Status::kPeerUnreachable);
  ASSERT_EQ(cluster.engine(1).pds().open_pdcs(), 1u);  // host 0's PDC, orphaned
  cut = false;
}

TEST(OrphanPdc, a_targets_sends_on_a_pdc_its_initiator_forgot__arrive_once_each_intact) {
  sim::FabricConfig f;
  f.hosts = 2;
  engine::EngineConfig e;
  e.pds.max_retries = 3;
  sim::Cluster cluster(f, e);
  CompletionWaiter waiter(cluster);
  bool cut = true;
  fail_host0s_pdc(cluster, waiter, cut);

  // One packet, several packets sent in one burst, and a rendezvous send (above 64 KiB),
  // all queued at once on the orphaned PDC.
  const std::vector<size_t> sizes = {100, 16391, 70000};
  std::vector<std::vector<uint8_t>> sent(sizes.size()), got(sizes.size());
  for (size_t m = 0; m < sizes.size(); ++m) {
    sent[m].resize(sizes[m]);
    for (size_t i = 0; i < sizes[m]; ++i) sent[m][i] = byte_of(m, i);
    got[m].assign(sizes[m] + 16, 0);
    ASSERT_EQ(cluster.engine(0).post_recv({got[m].data(), got[m].size(), 100 + m}), Status::kOk);
  }
  for (size_t m = 0; m < sizes.size(); ++m) {
    ASSERT_EQ(cluster.engine(1).send(0, sent[m].data(), sent[m].size(), 10 + m), Status::kOk);
  }
  for (size_t m = 0; m < sizes.size(); ++m) {
    const auto done = waiter.wait(1, 10 + m, Duration::seconds(5));
    ASSERT_TRUE(done) << "send " << m;
    EXPECT_EQ(done->status, Status::kOk) << "send " << m;
    const auto received = waiter.wait(0, 100 + m, Duration::seconds(5));
    ASSERT_TRUE(received) << "receive " << m;
    EXPECT_EQ(received->status, Status::kOk) << "receive " << m;
    EXPECT_EQ(received->length, sizes[m]);
    EXPECT_TRUE(std::equal(sent[m].begin(), sent[m].end(), got[m].begin())) << "message " << m;
  }
  const pds::PdsStats& stats = cluster.engine(1).pds().stats();
  EXPECT_EQ(stats.pdcs_failed, 0u);
  EXPECT_EQ(stats.pdcs_reopened, 1u);
  // Nothing arrived twice: no receive beyond the three completed.
  cluster.run_until([] { return false; }, Duration::milliseconds(50));
  EXPECT_EQ(waiter.pending(0), 0u);
  EXPECT_EQ(cluster.engine(0).ses().rx_in_use(), 0u);

  // Both ways still work: host 0 sends host 1 on the PDC host 1 opened in its place.
  std::vector<uint8_t> back(3000, 9), back_got(3000, 0);
  ASSERT_EQ(cluster.engine(1).post_recv({back_got.data(), back_got.size(), 200}), Status::kOk);
  ASSERT_EQ(cluster.engine(0).send(1, back.data(), back.size(), 201), Status::kOk);
  const auto back_done = waiter.wait(0, 201, Duration::seconds(5));
  ASSERT_TRUE(back_done);
  EXPECT_EQ(back_done->status, Status::kOk);
  const auto back_received = waiter.wait(1, 200, Duration::seconds(5));
  ASSERT_TRUE(back_received);
  EXPECT_EQ(back_received->status, Status::kOk);
  EXPECT_EQ(back_got, back);
}

// The same over a fabric that loses, duplicates, corrupts and reorders packets, in both
// modes. Host 0 remembers the PDC it failed and says of each packet whether it was
// delivered, and is asked again about packets lost on the way, so every send completes,
// received intact, once. (Without that record a lost packet's message was in doubt and
// failed: 5 of 48 sends over RUD, 9 of 48 over ROD; before orphans reopened, 48 and 12.)
class OrphanPdcUnderFaults : public testing::TestWithParam<pds::Mode> {};

TEST_P(OrphanPdcUnderFaults, a_send_that_completes_arrived_once_intact) {
  uint64_t reopened = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    engine::EngineConfig e;
    e.pds.max_retries = 3;
    sim::Cluster cluster(test_support::faulty_fabric(2, seed), e);
    CompletionWaiter waiter(cluster);
    bool cut = true;
    fail_host0s_pdc(cluster, waiter, cut);
    if (testing::Test::HasFatalFailure()) return;
    const std::vector<size_t> sizes = {100, 16391, 70000, 9000};
    std::vector<std::vector<uint8_t>> sent(sizes.size()), got(sizes.size());
    for (size_t m = 0; m < sizes.size(); ++m) {
      sent[m].resize(sizes[m]);
      for (size_t i = 0; i < sizes[m]; ++i) sent[m][i] = byte_of(m + seed, i);
      got[m].assign(sizes[m], 0);
      // Tagged: a failed send's receive is not taken by the next message.
      ses::RecvSpec recv{got[m].data(), got[m].size(), 100 + m};
      recv.tagged = true;
      recv.tag = m;
      ASSERT_EQ(cluster.engine(0).post_recv(recv), Status::kOk);
    }
    for (size_t m = 0; m < sizes.size(); ++m) {
      const ses::SendSpec spec{.tagged = true, .tag = m, .mode = GetParam()};
      ASSERT_EQ(cluster.engine(1).send(0, sent[m].data(), sent[m].size(), 10 + m, spec),
                Status::kOk);
    }
    for (size_t m = 0; m < sizes.size(); ++m) {
      const auto done = waiter.wait(1, 10 + m, Duration::seconds(10));
      ASSERT_TRUE(done) << "send " << m << " never ended";
      EXPECT_EQ(done->status, Status::kOk) << "send " << m;
      const auto received = waiter.wait(0, 100 + m, Duration::seconds(5));
      ASSERT_TRUE(received) << "send " << m << " ended, its receive did not";
      EXPECT_EQ(received->status, Status::kOk) << "message " << m;
      EXPECT_EQ(sent[m], got[m]) << "message " << m;
    }
    cluster.run_until([] { return false; }, Duration::milliseconds(50));
    for (size_t m = 0; m < sizes.size(); ++m) {
      EXPECT_FALSE(waiter.take(1, 10 + m)) << "send " << m << " completed twice";
    }
    reopened += cluster.engine(1).pds().stats().pdcs_reopened;
    EXPECT_EQ(cluster.engine(1).pds().stats().orphan_messages_failed, 0u);
  }
  EXPECT_GT(reopened, 0u) << "no run reopened a PDC: the test tests nothing";
}

INSTANTIATE_TEST_SUITE_P(Modes, OrphanPdcUnderFaults,
                         testing::Values(pds::Mode::kRud, pds::Mode::kRod),
                         [](const auto& param_info) {
                           return param_info.param == pds::Mode::kRod ? "rod" : "rud";
                         });

}  // namespace
}  // namespace spray
