// Topology builders: host, switch, link and path counts of fat-trees (2 and 3 tiers,
// oversubscribed), leaf-spine and the dumbbell, and routing that reaches every
// destination on a shortest path.
#include "nic_sim/des/topology.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace spray::des {
namespace {

TopologyConfig fat_tree(uint32_t k, uint32_t tiers = 3, uint32_t oversubscription = 1) {
  TopologyConfig c;
  c.kind = "fat_tree";
  c.k = k;
  c.tiers = tiers;
  c.oversubscription = oversubscription;
  return c;
}

// Follows route() from src to dst with a given hash; returns the hop count.
int hops(const Topology& t, uint32_t src, uint32_t dst, uint64_t hash) {
  int n = 0;
  for (uint32_t node = src; node != dst && n < 16; ++n) node = t.link(t.route(node, dst, hash)).to;
  return n;
}

TEST(Topology, ThreeTierFatTreeCounts) {
  for (uint32_t k : {4u, 8u, 16u}) {
    const Topology t(fat_tree(k));
    EXPECT_EQ(t.hosts(), k * k * k / 4) << k;
    EXPECT_EQ(t.switches(), 5 * k * k / 4) << k;  // k^2/2 edge + k^2/2 agg + k^2/4 core
    // Cables: hosts, edge-agg (k pods x (k/2)^2), agg-core (k^3/4); two ports each.
    EXPECT_EQ(t.links().size(), 2 * (k * k * k / 4 + k * (k / 2) * (k / 2) + k * k * k / 4));
    EXPECT_EQ(t.links_in_tier(2).size(), 2 * k * k * k / 4);
  }
  const Topology t(fat_tree(4));
  EXPECT_EQ(t.path_count(0, 1), 1u);   // same edge switch
  EXPECT_EQ(t.path_count(0, 2), 2u);   // same pod: k/2 aggregation switches
  EXPECT_EQ(t.path_count(0, 15), 4u);  // across pods: (k/2)^2 cores
  EXPECT_EQ(Topology(fat_tree(8)).path_count(0, 127), 16u);
  for (uint32_t dst = 1; dst < t.hosts(); ++dst) {
    const int want = dst < 2 ? 2 : dst < 4 ? 4 : 6;
    for (uint64_t hash = 0; hash < 8; ++hash) EXPECT_EQ(hops(t, 0, dst, hash), want) << dst;
  }
}

TEST(Topology, TwoTierAndOversubscribedFatTrees) {
  const Topology two(fat_tree(8, 2));
  EXPECT_EQ(two.hosts(), 8u * 4);     // k leaves x k/2 hosts
  EXPECT_EQ(two.switches(), 8u + 4);  // k leaves, k/2 spines
  EXPECT_EQ(two.path_count(0, 31), 4u);
  const Topology over(fat_tree(4, 3, 2));
  EXPECT_EQ(over.hosts(), 32u);  // twice the hosts on the same switches
  EXPECT_EQ(over.switches(), 20u);
  EXPECT_EQ(over.path_count(0, 31), 4u);
}

TEST(Topology, LeafSpineAndDumbbell) {
  TopologyConfig ls;
  ls.kind = "leaf_spine";
  ls.hosts = 64;
  ls.hosts_per_leaf = 16;
  ls.spines = 4;
  const Topology t(ls);
  EXPECT_EQ(t.switches(), 4u + 4);
  EXPECT_EQ(t.path_count(0, 63), 4u);
  EXPECT_EQ(t.path_count(0, 15), 1u);
  EXPECT_EQ(hops(t, 0, 63, 3), 4);

  TopologyConfig db;
  db.kind = "dumbbell";
  db.hosts = 8;
  const Topology d(db);
  EXPECT_EQ(d.switches(), 2u);
  EXPECT_EQ(d.path_count(0, 7), 1u);
  EXPECT_EQ(hops(d, 0, 7, 0), 3);            // host, left, right, host
  EXPECT_EQ(d.links_in_tier(1).size(), 2u);  // the bottleneck, both ways
}

TEST(Topology, UnloadedLatencyIsStoreAndForward) {
  TopologyConfig c = fat_tree(4);
  c.link_delay = Duration::nanoseconds(500);
  const Topology t(c);
  // Six hops across pods: each serialises 4096 B at 400 Gbit/s (81.92 ns) and adds 500 ns.
  EXPECT_EQ(t.unloaded_latency(0, 15, 4096).ps, 6 * (81920 + 500000));
}

TEST(Topology, BadParametersAreRefusedWithAReason) {
  EXPECT_THROW(Topology(fat_tree(5)), std::invalid_argument);
  EXPECT_THROW(Topology(fat_tree(4, 4)), std::invalid_argument);
  TopologyConfig c;
  c.kind = "torus";
  EXPECT_THROW({ Topology t(c); }, std::invalid_argument);
  c.kind = "leaf_spine";
  c.hosts = 10;
  c.hosts_per_leaf = 4;
  EXPECT_THROW({ Topology t(c); }, std::invalid_argument);
}

}  // namespace
}  // namespace spray::des
