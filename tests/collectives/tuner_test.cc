// The tuner's cost model (choices at the sizes where the textbook says they flip, JSON
// round trip and rejection of bad files) and the double binary tree's shape for every
// rank count: each tree spans all ranks, links agree both ways, and (even P) no rank is
// an inner node of both trees.
#include "collectives/tuner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "collectives/algorithms/algorithms.h"

namespace spray::coll {
namespace {

TEST(CostModel, SmallMessagesTakeFewStepsLargeOnesTheBandwidthOptimalOnes) {
  const CostModel m;  // defaults: alpha 30 us, 1 GB/s, 4 GB/s reduction
  for (int p : {2, 3, 4, 5, 8, 16}) {
    const AllReduceAlgorithm small = m.best_all_reduce(8, p);
    EXPECT_TRUE(small == AllReduceAlgorithm::kRecursiveDoubling ||
                small == AllReduceAlgorithm::kDoubleBinaryTree || p <= 3)
        << p << ": " << name(small);
    const AllReduceAlgorithm large = m.best_all_reduce(64 << 20, p);
    EXPECT_TRUE(large == AllReduceAlgorithm::kRing || large == AllReduceAlgorithm::kRabenseifner ||
                large == AllReduceAlgorithm::kDoubleBinaryTree)
        << p << ": " << name(large);
    EXPECT_NE(large, AllReduceAlgorithm::kRecursiveDoubling);
  }
  // The ring's 2(P-1) latencies lose to log2(P) steps at medium sizes for many ranks.
  EXPECT_LT(m.all_reduce_us(AllReduceAlgorithm::kRabenseifner, 256 << 10, 64),
            m.all_reduce_us(AllReduceAlgorithm::kRing, 256 << 10, 64));
  // All-to-all: Bruck for tiny blocks among many ranks, a pairwise order for big ones.
  EXPECT_EQ(m.best_all_to_all(8, 32), AllToAllAlgorithm::kBruck);
  EXPECT_NE(m.best_all_to_all(1 << 20, 32), AllToAllAlgorithm::kBruck);
  // Two-shot is only ever forced by name: at 4 ranks on 2 cores it lost to Rabenseifner
  // from 4 KiB to 1 MiB over spray.
  for (int p : {2, 3, 4, 8, 64}) {
    for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
      EXPECT_NE(m.best_all_reduce(bytes, p), AllReduceAlgorithm::kTwoShot) << p << " " << bytes;
    }
  }
  // A single rank costs nothing whatever the algorithm.
  EXPECT_EQ(m.all_reduce_us(AllReduceAlgorithm::kRing, 1 << 20, 1), 0.0);
}

TEST(CostModel, ChoicesFollowTheMeasuredParameters) {
  CostModel slow_latency, slow_wire;
  slow_latency.alpha_us = 1000;
  slow_wire.alpha_us = 0.01;
  // With huge latencies the fewest steps win even at 1 MiB; with free messages the
  // bandwidth-optimal ones: Rabenseifner on a power of two (same bytes, fewer steps),
  // the ring on 6 ranks (Rabenseifner's fold would move a whole buffer more).
  EXPECT_NE(slow_latency.best_all_reduce(1 << 20, 8), AllReduceAlgorithm::kRing);
  EXPECT_EQ(slow_wire.best_all_reduce(1 << 20, 8), AllReduceAlgorithm::kRabenseifner);
  EXPECT_EQ(slow_wire.best_all_reduce(1 << 20, 6), AllReduceAlgorithm::kRing);
}

TEST(CostModel, JsonRoundTripAndErrors) {
  CostModel m;
  m.alpha_us = 12.5;
  m.beta_us_per_byte = 3e-4;
  m.gamma_us_per_byte = 5e-5;
  m.source = "test";
  std::string error;
  const auto back = CostModel::from_json(m.to_json(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->alpha_us, 12.5);
  EXPECT_EQ(back->beta_us_per_byte, 3e-4);
  EXPECT_EQ(back->gamma_us_per_byte, 5e-5);
  EXPECT_EQ(back->source, "test");
  EXPECT_FALSE(CostModel::from_json("not json", error));
  EXPECT_FALSE(CostModel::from_json(R"({"alpha_us": 1, "beta_us_per_byte": 1})", error));
  EXPECT_NE(error.find("gamma_us_per_byte"), std::string::npos) << error;
  EXPECT_FALSE(CostModel::from_json(
      R"({"alpha_us": -1, "beta_us_per_byte": 1, "gamma_us_per_byte": 1})", error));
  EXPECT_FALSE(CostModel::load("/nonexistent/cost.json", error));
  EXPECT_NE(error.find("/nonexistent/cost.json"), std::string::npos);
}

TEST(AlgorithmNames, ParseWhatTheyPrint) {
  for (AllReduceAlgorithm a : kAllReduceAlgorithms)
    EXPECT_EQ(parse_all_reduce_algorithm(name(a)), a);
  for (AllToAllAlgorithm a : kAllToAllAlgorithms) EXPECT_EQ(parse_all_to_all_algorithm(name(a)), a);
  EXPECT_FALSE(parse_all_reduce_algorithm("butterfly"));
  EXPECT_FALSE(parse_all_to_all_algorithm(""));
}

TEST(DoubleBinaryTree, EveryRankCountGivesTwoSpanningComplementaryTrees) {
  for (int p = 1; p <= 70; ++p) {
    std::set<int> inner[2];
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int r = 0; r < p; ++r) {
        const algo::TreeLinks l = algo::double_binary_tree_links(r, p, t);
        if (l.parent < 0) {
          ++roots;
        } else {  // my parent lists me as a child
          const algo::TreeLinks up = algo::double_binary_tree_links(l.parent, p, t);
          EXPECT_TRUE(up.children[0] == r || up.children[1] == r) << p << " " << t << " " << r;
        }
        for (int child : l.children) {
          if (child < 0) continue;
          ASSERT_LT(child, p);
          inner[t].insert(r);
          EXPECT_EQ(algo::double_binary_tree_links(child, p, t).parent, r);
        }
      }
      EXPECT_EQ(roots, 1) << "p " << p << " tree " << t;
      // Reaching every rank from the root: p - 1 parent links and one root, no cycles
      // (a parent is always found by walking up within p steps).
      for (int r = 0; r < p; ++r) {
        int at = r, hops = 0;
        while (algo::double_binary_tree_links(at, p, t).parent >= 0 && hops <= p) {
          at = algo::double_binary_tree_links(at, p, t).parent;
          ++hops;
        }
        EXPECT_LE(hops, p) << "cycle at p " << p;
      }
    }
    int both = 0;
    for (int r : inner[0]) both += inner[1].count(r) ? 1 : 0;
    EXPECT_LE(both, p % 2 == 0 ? 0 : 1) << "p " << p << ": ranks inner in both trees";
  }
}

}  // namespace
}  // namespace spray::coll
