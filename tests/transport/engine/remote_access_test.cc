// The target's reports of remote access (SesConfig::report_remote_access, libfabric's
// FI_RMA_EVENT): every write, read and atomic a peer did on registered memory is reported
// once, by kind, with its peer and the region's key, however the fabric loses,
// duplicates, corrupts or reorders packets; refused accesses are not reported; and with
// the reports off, only writes that carry immediate data are.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;
using wire::AmoDatatype;
using wire::AmoOpcode;

constexpr uint64_t kKey = 9;
constexpr uint32_t kPerHost = 40;  // of each kind, from each of hosts 1-3

// Host 0 is the target, serving kKey over `memory`; hosts 1-3 access it.
class RemoteAccess : public ::testing::Test {
 protected:
  explicit RemoteAccess(bool report = true,
                        sim::FabricConfig fabric = test_support::faulty_fabric(4, 7))
      : cluster(fabric, engine::EngineConfig{},
                [report](uint32_t host, engine::EngineConfig& c) {
                  c.ses.report_remote_access = host == 0 && report;
                }),
        waiter(cluster) {
    memory.assign(64 * 1024, 0);
    EXPECT_EQ(cluster.engine(0).register_memory(
                  {reinterpret_cast<uint8_t*>(memory.data()), memory.size() * sizeof(uint64_t), 0,
                   kKey, ses::access::kRemoteRead | ses::access::kRemoteWrite}),
              Status::kOk);
  }

  // (kind, peer) -> reports seen at host 0 so far; every report must name kKey.
  std::map<std::pair<ses::OpKind, pds::PeerIndex>, uint32_t> reports() {
    ses::Completion c;
    while (cluster.engine(0).poll_completion(c)) {
      EXPECT_EQ(c.memory_key, kKey);
      EXPECT_EQ(c.status, Status::kOk);
      ++seen[{c.op, c.peer}];
    }
    return seen;
  }

  sim::Cluster cluster;
  CompletionWaiter waiter;
  std::vector<uint64_t> memory;  // host 0's, as 64-bit words
  std::map<std::pair<ses::OpKind, pds::PeerIndex>, uint32_t> seen;
};

TEST_F(RemoteAccess, every_access_is_reported_once_by_kind_under_faults) {
  // Each host: writes of 5 packets (20000 B) and of 8 bytes, reads, plain and fetching
  // sums, and an atomic read, each kind kPerHost times; then one refused access of each
  // kind (an unknown key), which must not be reported.
  const uint64_t one = 1;
  std::vector<uint8_t> out(20000, 0x5a);
  std::vector<std::vector<uint8_t>> in(4, std::vector<uint8_t>(20000));
  std::vector<std::vector<uint64_t>> fetched(4, std::vector<uint64_t>(2 * kPerHost));
  uint64_t ctx = 1;
  std::vector<std::pair<uint32_t, uint64_t>> posted;  // (host, context)
  for (uint32_t host = 1; host <= 3; ++host) {
    const uint64_t area = 8 * 1024 * host;  // bytes of host's own: writes do not overlap
    for (uint32_t i = 0; i < kPerHost; ++i) {
      const size_t len = i % 2 ? out.size() : 8;
      ASSERT_EQ(cluster.engine(host).write(0, out.data(), len, area, kKey, ctx, {}), Status::kOk);
      posted.emplace_back(host, ctx++);
      ASSERT_EQ(cluster.engine(host).read(0, in[host].data(), 4096, area, kKey, ctx), Status::kOk);
      posted.emplace_back(host, ctx++);
      ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, nullptr};
      ASSERT_EQ(cluster.engine(host).atomic(0, add, 0, kKey, ctx), Status::kOk);
      posted.emplace_back(host, ctx++);
      ses::AtomicSpec fetch{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one,
                            nullptr,         &fetched[host][i]};
      ASSERT_EQ(cluster.engine(host).atomic(0, fetch, 8, kKey, ctx), Status::kOk);
      posted.emplace_back(host, ctx++);
      ses::AtomicSpec peek{AmoOpcode::kRead, AmoDatatype::kUint64,        1, nullptr,
                           nullptr,          &fetched[host][kPerHost + i]};
      ASSERT_EQ(cluster.engine(host).atomic(0, peek, 16, kKey, ctx), Status::kOk);
      posted.emplace_back(host, ctx++);
    }
  }
  for (const auto& [host, c] : posted) {
    const auto done = waiter.wait(host, c, Duration::seconds(20));
    ASSERT_TRUE(done.has_value()) << "host " << host << " op " << c;
    ASSERT_EQ(done->status, Status::kOk) << "host " << host << " op " << c;
  }
  const auto refused = [&](uint32_t host, uint64_t c) {
    const auto done = waiter.wait(host, c, Duration::seconds(20));
    return done && done->status == Status::kBadKey;
  };
  for (uint32_t host = 1; host <= 3; ++host) {
    ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, nullptr};
    ASSERT_EQ(cluster.engine(host).write(0, out.data(), 8, 0, kKey + 1, ctx, {}), Status::kOk);
    EXPECT_TRUE(refused(host, ctx++));
    ASSERT_EQ(cluster.engine(host).read(0, in[host].data(), 8, 0, kKey + 1, ctx), Status::kOk);
    EXPECT_TRUE(refused(host, ctx++));
    ASSERT_EQ(cluster.engine(host).atomic(0, add, 0, kKey + 1, ctx), Status::kOk);
    EXPECT_TRUE(refused(host, ctx++));
  }
  // A read is reported when its data is acknowledged, which may follow its initiator's
  // completion: run until every report is in, then on, so that a second one would show.
  const auto all_in = [&] {
    const auto r = reports();
    uint32_t n = 0;
    for (const auto& [what, count] : r) n += count;
    return n >= 3 * 5 * kPerHost;
  };
  EXPECT_TRUE(cluster.run_until(all_in, Duration::seconds(20)));
  (void)cluster.run_until([] { return false; }, Duration::milliseconds(200));
  const auto r = reports();
  for (pds::PeerIndex peer = 1; peer <= 3; ++peer) {
    SCOPED_TRACE(peer);
    const auto count = [&](ses::OpKind k) {
      const auto it = r.find({k, peer});
      return it == r.end() ? 0u : it->second;
    };
    EXPECT_EQ(count(ses::OpKind::kRemoteWrite), kPerHost);
    EXPECT_EQ(count(ses::OpKind::kRemoteRead), kPerHost);
    EXPECT_EQ(count(ses::OpKind::kRemoteAtomic), kPerHost);
    EXPECT_EQ(count(ses::OpKind::kRemoteFetchAtomic), 2 * kPerHost);  // sums and reads
  }
  EXPECT_EQ(r.size(), 12u) << "reports of another kind or peer";
  EXPECT_EQ(memory[0], 3u * kPerHost);
  EXPECT_EQ(memory[1], 3u * kPerHost);
  const auto& stats = cluster.fabric().stats();
  EXPECT_GT(stats.lost, 0u);
  EXPECT_GT(stats.duplicated, 0u);
  EXPECT_GT(stats.reordered, 0u);
}

// The remote atomics' length says what they changed: an atomic read changed nothing.
TEST_F(RemoteAccess, an_atomic_reports_the_bytes_it_changed) {
  const uint64_t two[2] = {1, 2};
  uint64_t old[2] = {};
  ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 2, two, nullptr, old};
  ASSERT_EQ(cluster.engine(1).atomic(0, add, 0, kKey, 1), Status::kOk);
  ASSERT_TRUE(waiter.wait(1, 1, Duration::seconds(20)));
  ses::AtomicSpec peek{AmoOpcode::kRead, AmoDatatype::kUint64, 1, nullptr, nullptr, old};
  ASSERT_EQ(cluster.engine(1).atomic(0, peek, 0, kKey, 2), Status::kOk);
  ASSERT_TRUE(waiter.wait(1, 2, Duration::seconds(20)));
  std::vector<std::tuple<ses::OpKind, uint64_t>> got;
  ses::Completion c;
  ASSERT_TRUE(cluster.run_until(
      [&] {
        while (cluster.engine(0).poll_completion(c)) got.emplace_back(c.op, c.length);
        return got.size() >= 2;
      },
      Duration::seconds(20)));
  const std::vector<std::tuple<ses::OpKind, uint64_t>> want = {
      {ses::OpKind::kRemoteFetchAtomic, 16}, {ses::OpKind::kRemoteFetchAtomic, 0}};
  EXPECT_EQ(got, want);
}

class RemoteAccessNotReported : public RemoteAccess {
 protected:
  RemoteAccessNotReported() : RemoteAccess(false, sim::FabricConfig{}) {}
};

TEST_F(RemoteAccessNotReported, only_writes_with_immediate_data_are) {
  const uint64_t one = 1;
  uint64_t back = 0;
  ASSERT_EQ(cluster.engine(1).write(0, &one, 8, 0, kKey, 1, {}), Status::kOk);
  ASSERT_EQ(cluster.engine(1).read(0, &back, 8, 0, kKey, 2), Status::kOk);
  ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, nullptr};
  ASSERT_EQ(cluster.engine(1).atomic(0, add, 8, kKey, 3), Status::kOk);
  ASSERT_EQ(cluster.engine(1).write(0, &one, 8, 16, kKey, 4, {.has_data = true, .data = 5}),
            Status::kOk);
  for (uint64_t c = 1; c <= 4; ++c) ASSERT_TRUE(waiter.wait(1, c));
  (void)cluster.run_until([] { return false; }, Duration::milliseconds(50));
  const auto r = reports();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->first.first, ses::OpKind::kRemoteWrite);
  EXPECT_EQ(r.begin()->second, 1u);
}

}  // namespace
}  // namespace spray
