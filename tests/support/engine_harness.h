// Helpers for engine tests on a simulated cluster: waiting for completions and
// injecting hand-made packets as if they came off the wire.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "nic_sim/cluster.h"
#include "tests/support/workload.h"

namespace spray::test_support {

// A fabric of `hosts` that loses 5 % of packets, duplicates 5 %, corrupts 1 % and
// reorders 10 %, seeded: every fault an exactly-once test must survive, all at once.
inline sim::FabricConfig faulty_fabric(uint32_t hosts, uint64_t seed) {
  sim::FabricConfig f;
  f.hosts = hosts;
  f.faults.loss = 0.05;
  f.faults.duplicate = 0.05;
  f.faults.corrupt = 0.01;
  f.faults.reorder = 0.1;
  f.seed = seed;
  return f;
}

// Engine tables for a few peers and a few messages each way, for tests that make many
// engines (restarts): the defaults' (65536 peers, 8192 messages each way) cost more to
// make than such a test costs to run.
inline engine::EngineConfig small_engine_config(uint32_t max_pdcs) {
  engine::EngineConfig e;
  e.max_peers = 4;
  e.pds.max_pdcs = max_pdcs;
  e.ses.max_peers = 4;
  e.ses.max_tx_messages = 64;
  e.ses.max_rx_messages = 64;
  return e;
}

// Runs the cluster until `host` reports a completion with `context` (other
// completions seen on the way are kept for later calls). nullopt on timeout.
class CompletionWaiter {
 public:
  explicit CompletionWaiter(sim::Cluster& c) : cluster_(c), seen_(c.hosts()) {}

  std::optional<ses::Completion> wait(uint32_t host, ses::UserContext ctx,
                                      Duration limit = Duration::seconds(2)) {
    std::optional<ses::Completion> found;
    cluster_.run_until([&] { return (found = take(host, ctx)).has_value(); }, limit);
    return found;
  }

  // Completions with this context seen so far on `host` (without waiting).
  std::optional<ses::Completion> take(uint32_t host, ses::UserContext ctx) {
    ses::Completion c;
    while (cluster_.engine(host).poll_completion(c)) seen_[host].push_back(c);
    for (size_t i = 0; i < seen_[host].size(); ++i) {
      if (seen_[host][i].context == ctx) {
        const ses::Completion out = seen_[host][i];
        seen_[host].erase(seen_[host].begin() + static_cast<ptrdiff_t>(i));
        return out;
      }
    }
    return std::nullopt;
  }

  size_t pending(uint32_t host) {
    ses::Completion c;
    while (cluster_.engine(host).poll_completion(c)) seen_[host].push_back(c);
    return seen_[host].size();
  }

 private:
  sim::Cluster& cluster_;
  std::vector<std::vector<ses::Completion>> seen_;
};

// Puts `bytes` into `to`'s receive ring as a packet from sim host `from`.
inline void inject(sim::Cluster& c, uint32_t from, uint32_t to, const std::vector<uint8_t>& bytes,
                   uint8_t flags = 0) {
  dp::PacketBuf* b = c.fabric().pool().alloc();
  ASSERT_NE(b, nullptr);
  std::copy(bytes.begin(), bytes.end(), b->data);
  b->len = static_cast<uint32_t>(bytes.size());
  b->peer = dp::NetAddr::sim_host(from);
  b->flags = flags;
  ASSERT_TRUE(c.fabric().nic(to).deliver(b));
}

}  // namespace spray::test_support
