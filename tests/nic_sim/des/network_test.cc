// The simulator end to end, with the real PDS, congestion control and path selection
// on every host: switch queues (ECN, trimming, drop-tail), ECMP and spraying, link
// failures, dependencies between flows, determinism, and small acceptance experiments
// with bounds (each runs in well under a second).
#include <gtest/gtest.h>

#include <algorithm>

#include "nic_sim/des/scenario.h"

namespace spray::des {
namespace {

Scenario fat_tree_permutation(const char* paths, uint64_t bytes = 1 << 20) {
  Scenario s;
  s.topology.kind = "fat_tree";
  s.topology.k = 4;
  s.traffic.pattern = "permutation";
  s.traffic.flow_bytes = bytes;
  s.network.pds.path_name = paths;
  s.network.seed = 3;
  return s;
}

Scenario dumbbell(const char* pattern, uint32_t hosts = 8) {
  Scenario s;
  s.topology.kind = "dumbbell";
  s.topology.hosts = hosts;
  s.traffic.pattern = pattern;
  s.traffic.flow_bytes = 512 * 1024;
  return s;
}

void expect_all_delivered(const RunResult& r) {
  EXPECT_EQ(r.summary.completed, r.summary.flows);
  EXPECT_EQ(r.summary.stats.failed_flows, 0u);
  // Every flow was a message the receiver's SES matched and completed, from headers its
  // sender's SES wrote.
  EXPECT_EQ(r.summary.stats.messages_received, r.summary.flows);
  EXPECT_EQ(r.summary.stats.malformed_packets, 0u);
  for (const FlowResult& f : r.flows) EXPECT_TRUE(f.completed) << f.src << "->" << f.dst;
}

TEST(Simulation, SprayingStaysNearIdealWhereEcmpCollides) {
  const RunResult reps = run_scenario(fat_tree_permutation("reps"));
  const RunResult oblivious = run_scenario(fat_tree_permutation("oblivious"));
  const RunResult ecmp = run_scenario(fat_tree_permutation("ecmp"));
  for (const RunResult* r : {&reps, &oblivious, &ecmp}) expect_all_delivered(*r);
  EXPECT_LT(reps.summary.mean_slowdown, 1.3);
  EXPECT_LT(oblivious.summary.mean_slowdown, 1.3);
  EXPECT_LT(reps.summary.p99_slowdown, 1.5);
  // ECMP pins each flow to one path; colliding flows share a link at half rate.
  EXPECT_GT(ecmp.summary.mean_slowdown, 1.25 * reps.summary.mean_slowdown);
  EXPECT_GT(ecmp.summary.max_slowdown, 1.8);
  // No flow beats the ideal (it is a lower bound).
  for (const FlowResult& f : reps.flows) EXPECT_GE(f.fct.ps, f.ideal.ps * 99 / 100);
}

// One EV per flow, but moved when NSCC's signals (ECN, trims) land on it: flows leave
// the worst collisions, so the tail shrinks, though one path per flow stays far from
// spraying (k=8: p99 ~3.3x ideal against ECMP's ~4.9x).
TEST(Simulation, EntropyChangeOnEcnShortensEcmpsTail) {
  Scenario s = fat_tree_permutation("ecmp");
  s.topology.k = 8;
  const RunResult pinned = run_scenario(s);
  s.network.pds.path_name = "ecmp_repath";
  const RunResult moving = run_scenario(s);
  expect_all_delivered(pinned);
  expect_all_delivered(moving);
  EXPECT_LT(moving.summary.p99_slowdown, 0.85 * pinned.summary.p99_slowdown);
  EXPECT_LT(moving.summary.mean_slowdown, pinned.summary.mean_slowdown);
}

TEST(Simulation, SprayingUsesEveryCoreLink) {
  Scenario s = fat_tree_permutation("oblivious");
  const Topology topo(s.topology);
  Network net(topo, s.network, make_traffic(s.traffic, topo.hosts(), s.network.seed));
  ASSERT_TRUE(net.run(Duration::milliseconds(50)));
  uint64_t least = UINT64_MAX, most = 0;
  for (uint32_t port : topo.links_in_tier(2)) {
    if (topo.link(port).to < topo.hosts()) continue;
    least = std::min(least, net.port_packets(port));
    most = std::max(most, net.port_packets(port));
  }
  EXPECT_GT(least, 0u);
  EXPECT_LT(most, 4 * least);  // spread, not pinned
}

TEST(Simulation, SameSeedSameResultsOtherSeedOtherResults) {
  const RunResult a = run_scenario(fat_tree_permutation("reps", 256 * 1024));
  const RunResult b = run_scenario(fat_tree_permutation("reps", 256 * 1024));
  Scenario other = fat_tree_permutation("reps", 256 * 1024);
  other.network.seed = 4;
  const RunResult c = run_scenario(other);
  ASSERT_EQ(a.flows.size(), b.flows.size());
  bool all_same = true;
  for (size_t i = 0; i < a.flows.size(); ++i) {
    EXPECT_EQ(a.flows[i].fct.ps, b.flows[i].fct.ps);
    EXPECT_EQ(a.flows[i].dst, b.flows[i].dst);
    all_same =
        all_same && a.flows[i].fct.ps == c.flows[i].fct.ps && a.flows[i].dst == c.flows[i].dst;
  }
  EXPECT_EQ(a.summary.stats.events, b.summary.stats.events);
  EXPECT_FALSE(all_same);
}

TEST(Simulation, FullQueuesTrimAndEveryByteStillArrives) {
  Scenario s = dumbbell("permutation");
  s.traffic.pattern = "incast";
  s.traffic.incast_senders = 6;
  s.traffic.incast_target = 7;
  s.network.switches.buffer_bytes = 32 * 1024;  // smaller than the incast's burst
  s.network.switches.ecn_min_bytes = 16 * 1024;
  s.network.switches.ecn_max_bytes = 32 * 1024;
  s.network.pds.cc_name = "fixed";  // a window that overruns the buffer
  s.network.pds.cc.fixed_window_bytes = 256 * 1024;
  const RunResult trimmed = run_scenario(s);
  expect_all_delivered(trimmed);
  EXPECT_GT(trimmed.summary.stats.trimmed, 0u);
  EXPECT_EQ(trimmed.summary.stats.dropped_full, 0u);
  EXPECT_GT(trimmed.summary.stats.retransmits, 0u);
  EXPECT_LE(trimmed.summary.stats.max_queue_bytes, 32u * 1024);

  s.network.switches.trimming = false;  // drop-tail: losses, recovered by the PDS
  const RunResult dropped = run_scenario(s);
  expect_all_delivered(dropped);
  EXPECT_EQ(dropped.summary.stats.trimmed, 0u);
  EXPECT_GT(dropped.summary.stats.dropped_full, 0u);
}

TEST(Simulation, QueuesAboveTheThresholdMarkEcnAndNsccBacksOff) {
  Scenario s = dumbbell("incast");
  s.traffic.incast_senders = 4;
  s.traffic.incast_target = 7;
  s.network.switches.buffer_bytes = 4 << 20;  // never full: only ECN
  s.network.switches.ecn_min_bytes = 20 * 1024;
  s.network.switches.ecn_max_bytes = 200 * 1024;
  const RunResult r = run_scenario(s);
  expect_all_delivered(r);
  EXPECT_GT(r.summary.stats.ecn_marked, 0u);
  EXPECT_EQ(r.summary.stats.trimmed, 0u);
  // NSCC keeps the queue well below what four line-rate windows would build.
  EXPECT_LT(r.summary.stats.max_queue_bytes, 2u << 20);
}

TEST(Simulation, SprayingRoutesAroundAFailedLinkWhileAPinnedFlowSuffers) {
  for (const char* paths : {"reps", "ecmp"}) {
    Scenario s = fat_tree_permutation(paths, 4 << 20);
    s.failures.push_back({Duration::microseconds(20), 2, 2, 0.0, {}});  // two core cables die
    const RunResult r = run_scenario(s);
    SCOPED_TRACE(paths);
    if (std::string(paths) == "reps") {
      expect_all_delivered(r);
      ASSERT_TRUE(r.summary.dead_path_use.has_value());
      // Senders leave the dead links within a few retransmission timeouts (about 105 us
      // here), so every flow completes, the worst at about 5x its ideal.
      EXPECT_LT(r.summary.dead_path_use->as_microseconds(), 500.0);
      EXPECT_LT(r.summary.max_slowdown, 8.0);
    } else {
      // A flow pinned to a dead link cannot finish (or only after its PDS gives up).
      EXPECT_TRUE(r.summary.completed < r.summary.flows || r.summary.stats.failed_flows > 0 ||
                  r.summary.max_slowdown > 3.0);
    }
  }
}

// Benchmark 3 in small: a k=8 fat-tree with 4 of its 128 core cables at 10 % of their
// rate. REPS learns which EVs cross them (ECN, RACK losses) and stops exploring onto
// them, so its flows finish nearly as if the fabric were whole; oblivious spraying keeps
// sending 3 % of every flow into 100-us queues.
TEST(Simulation, RepsLearnsToAvoidDegradedLinksWhereObliviousSprayingSuffers) {
  RunResult whole[2], degraded[2];
  const char* paths[2] = {"reps", "oblivious"};
  for (int i = 0; i < 2; ++i) {
    Scenario s = fat_tree_permutation(paths[i], 2'000'000);
    s.topology.k = 8;
    whole[i] = run_scenario(s);
    s.failures.push_back({Duration{}, 2, 4, 0.1, {}});
    degraded[i] = run_scenario(s);
    expect_all_delivered(whole[i]);
    expect_all_delivered(degraded[i]);
  }
  EXPECT_LT(degraded[0].summary.mean_slowdown, 1.1 * whole[0].summary.mean_slowdown);
  EXPECT_LT(degraded[0].summary.mean_slowdown, 0.85 * degraded[1].summary.mean_slowdown);
  EXPECT_GT(degraded[1].summary.p99_slowdown, 1.5 * whole[1].summary.p99_slowdown);
}

// The same two cables, back after 300 us: a flow pinned to one waits out the outage
// (its PDS retransmits on timeouts) and completes once the link returns.
TEST(Simulation, AFailedLinkThatRecoversLetsPinnedFlowsFinish) {
  Scenario s = fat_tree_permutation("ecmp", 4 << 20);
  s.failures.push_back({Duration::microseconds(20), 2, 2, 0.0, Duration::microseconds(320)});
  const RunResult r = run_scenario(s);
  expect_all_delivered(r);
  EXPECT_GT(r.summary.stats.dropped_link_down, 0u);   // the outage did hit some flows
  EXPECT_GT(r.summary.max_slowdown, 2.0);             // and they waited for the recovery
  EXPECT_FALSE(r.summary.dead_path_use.has_value());  // a recovered link is not "dead"
}

TEST(Simulation, CollectiveStepsWaitForThePreviousStepsData) {
  Scenario s;
  s.topology.kind = "fat_tree";
  s.topology.k = 4;
  s.traffic.pattern = "ring_allreduce";
  s.traffic.flow_bytes = 1 << 20;
  const Topology topo(s.topology);
  Network net(topo, s.network, make_traffic(s.traffic, topo.hosts(), 1));
  ASSERT_TRUE(net.run(Duration::milliseconds(100)));
  const auto& flows = net.flows();
  const uint32_t p = topo.hosts();
  ASSERT_EQ(flows.size(), size_t{2} * (p - 1) * p);
  for (size_t step = 1; step < 2 * (p - 1); ++step) {
    for (uint32_t i = 0; i < p; ++i) {
      const Flow& f = flows[step * p + i];
      const Flow& before = flows[(step - 1) * p + (i + p - 1) % p];
      EXPECT_EQ(before.dst, f.src);
      EXPECT_GE(f.started, before.finished);
    }
  }
}

// Every host but host 0 sends `bytes` to host 0, on a two-leaf 100 Gbit/s leaf-spine.
Scenario leaf_spine_incast(uint32_t hosts, uint64_t bytes) {
  Scenario s;
  s.topology.kind = "leaf_spine";
  s.topology.hosts = hosts;
  s.topology.hosts_per_leaf = hosts / 2;
  s.topology.spines = 2;
  s.topology.host_gbps = s.topology.fabric_gbps = 100;
  s.traffic.pattern = "incast";
  s.traffic.incast_senders = hosts - 1;
  s.traffic.flow_bytes = bytes;
  return s;
}

TEST(Simulation, IncastCompletesAndShareIsBounded) {
  const RunResult r = run_scenario(leaf_spine_incast(16, 256 * 1024));
  expect_all_delivered(r);
  // 15 flows through one 100 Gbit/s port: at least all their payload at line rate,
  // and not far from 15 times one flow's ideal.
  const double payload_ps = 15.0 * 256 * 1024 * 8 / 100e9 * 1e12;
  const double total_ideal = 15.0 * static_cast<double>(r.flows[0].ideal.ps);
  EXPECT_GE(static_cast<double>(r.summary.makespan.ps), payload_ps);
  EXPECT_LT(static_cast<double>(r.summary.makespan.ps), 1.3 * total_ideal);
}

// An all-to-all among 16 hosts whose PDC tables hold 6 PDCs, against the 15 peers each
// sends to and the 15 it hears from: PDCs are closed when idle and opened again all the
// time (pds_reclaim.cc), and every flow still completes, none failed.
TEST(Simulation, AllToAllCompletesWithPdcTablesSmallerThanThePeers) {
  Scenario s = fat_tree_permutation("reps", 64 * 1024);
  s.traffic.pattern = "all_to_all";
  s.network.pds.max_pdcs = 6;
  const RunResult r = run_scenario(s);
  expect_all_delivered(r);
  EXPECT_EQ(r.summary.flows, 16u * 15u);
}

TEST(Simulation, RcccKeepsAnIncastFairAndUntrimmedWhereNsccAloneTrims) {
  Scenario s = leaf_spine_incast(32, 512 * 1024);
  s.network.switches.buffer_bytes = 128 * 1024;  // 31 windows of one BDP do not fit
  RunResult by_cc[3];
  const char* names[3] = {"nscc", "rccc", "dcqcn"};
  for (int i = 0; i < 3; ++i) {
    s.network.pds.cc_name = names[i];
    by_cc[i] = run_scenario(s);
    SCOPED_TRACE(names[i]);
    expect_all_delivered(by_cc[i]);
  }
  const RunResult& rccc = by_cc[1];
  // The last flow ends near the ideal of the whole incast (every byte through one link).
  double all_bytes_ideal = 0, first = 1e300, last = 0;
  for (const FlowResult& f : rccc.flows) {
    all_bytes_ideal += static_cast<double>(f.ideal.ps);
    first = std::min(first, static_cast<double>(f.fct.ps));
    last = std::max(last, static_cast<double>(f.fct.ps));
  }
  EXPECT_LT(last, 1.1 * all_bytes_ideal);
  EXPECT_LT(last / first, 1.15);  // fair: everyone finishes at about the same time
  // Credit keeps the receiver's queue short: only the first round trip (before any
  // grant arrives) can overflow it.
  EXPECT_LT(rccc.summary.stats.trimmed * 4, by_cc[0].summary.stats.trimmed);
  // DCQCN, RoCE's rate-based baseline, also delivers everything, but reacts to marks
  // at most once per 50 us and finishes the incast later.
  EXPECT_GT(by_cc[2].summary.makespan, rccc.summary.makespan);
}

TEST(Scenario, JsonIsReadAndBadKeysAreNamed) {
  const Scenario s = Scenario::from_json(R"({"topology": {"kind": "leaf_spine", "hosts": 32},
      "paths": "oblivious", "entropies": 16, "traffic": {"pattern": "incast"},
      "failures": [{"at_us": 5, "tier": 1, "links": 1, "rate": 0.5}], "limit_ms": 3})");
  EXPECT_EQ(s.topology.kind, "leaf_spine");
  EXPECT_EQ(s.topology.hosts, 32u);
  EXPECT_EQ(s.network.pds.path_name, "oblivious");
  EXPECT_EQ(s.network.pds.entropy_count, 16);
  EXPECT_EQ(s.traffic.pattern, "incast");
  ASSERT_EQ(s.failures.size(), 1u);
  EXPECT_EQ(s.failures[0].at, Duration::microseconds(5));
  EXPECT_EQ(s.limit, Duration::milliseconds(3));
  EXPECT_THROW(Scenario::from_json(R"({"topology": {"k": "sixteen"}})"), std::invalid_argument);
  EXPECT_THROW(Scenario::from_json("[1, 2]"), std::invalid_argument);
  EXPECT_THROW(Scenario::from_json(R"({"failures": [{"rate": 2}]})"), std::invalid_argument);
  EXPECT_THROW(Scenario::from_json(R"({"failures": [{"at_us": 5, "until_us": 5}]})"),
               std::invalid_argument);
  const Scenario recovering =
      Scenario::from_json(R"({"failures": [{"at_us": 5, "rate": 0, "until_us": 9.5}]})");
  ASSERT_TRUE(recovering.failures[0].until.has_value());
  EXPECT_EQ(*recovering.failures[0].until, Duration::nanoseconds(9500));
}

}  // namespace
}  // namespace spray::des
