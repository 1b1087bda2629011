// The tuner's cost model (choices at the sizes where the textbook says they flip, the
// measured times correcting them, JSON round trip and rejection of bad files) and the double binary
// tree's shape for every rank count: each tree spans all ranks, links agree both ways, and (even P)
// no rank is an inner node of both trees.
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

// Times as calibrate() writes them: two-shot fastest from 64 KiB on (as measured with 4
// ranks on this 2-core machine on 2026-11-28), recursive doubling at 4 KiB.
CostModel measured_on_four_ranks() {
  CostModel m;
  m.measured.ranks = 4;
  using A = AllReduceAlgorithm;
  m.measured.all_reduce[A::kRing] = {{4096, 87}, {65536, 180}, {1 << 20, 979}, {16 << 20, 23027}};
  m.measured.all_reduce[A::kRecursiveDoubling] = {
      {4096, 53}, {65536, 211}, {1 << 20, 1236}, {16 << 20, 35667}};
  m.measured.all_reduce[A::kRabenseifner] = {
      {4096, 74}, {65536, 188}, {1 << 20, 1225}, {16 << 20, 24538}};
  m.measured.all_reduce[A::kDoubleBinaryTree] = {
      {4096, 74}, {65536, 152}, {1 << 20, 1867}, {16 << 20, 25149}};
  m.measured.all_reduce[A::kTwoShot] = {
      {4096, 79}, {65536, 133}, {1 << 20, 853}, {16 << 20, 17679}};
  m.measured.all_to_all[AllToAllAlgorithm::kPairwise] = {{1024, 50}, {262144, 441}};
  m.measured.all_to_all[AllToAllAlgorithm::kBruck] = {{1024, 20}, {262144, 1833}};
  return m;
}

TEST(CostModel, MeasuredTimesDecideWhereTheyWereMeasured) {
  const CostModel m = measured_on_four_ranks();
  using A = AllReduceAlgorithm;
  EXPECT_EQ(m.best_all_reduce(4096, 4), A::kRecursiveDoubling);
  for (size_t bytes : {size_t{65536}, size_t{300000}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(m.best_all_reduce(bytes, 4), A::kTwoShot) << bytes;
  }
  // At a measured size the prediction is the measurement.
  EXPECT_NEAR(m.all_reduce_us(A::kRing, 1 << 20, 4), 979, 1e-6);
  EXPECT_NEAR(m.all_reduce_us(A::kTwoShot, 16 << 20, 4), 17679, 1e-6);
  EXPECT_NEAR(m.all_to_all_us(AllToAllAlgorithm::kBruck, 1024, 4), 20, 1e-6);
  // Between two, the measured-to-formula ratio is interpolated in log size, so the
  // prediction lies between what the ratios at either end would give.
  const double at_256k = m.all_reduce_us(A::kRing, 256 << 10, 4);
  const double formula = m.all_reduce_formula_us(A::kRing, 256 << 10, 4);
  const double low = 180 / m.all_reduce_formula_us(A::kRing, 65536, 4);
  const double high = 979 / m.all_reduce_formula_us(A::kRing, 1 << 20, 4);
  EXPECT_GE(at_256k, formula * std::min(low, high) - 1e-9);
  EXPECT_LE(at_256k, formula * std::max(low, high) + 1e-9);
  // Beyond the largest measured size, its ratio holds: 64 MiB costs what the formula
  // says, scaled as at 16 MiB.
  EXPECT_NEAR(m.all_reduce_us(A::kTwoShot, 64 << 20, 4),
              m.all_reduce_formula_us(A::kTwoShot, 64 << 20, 4) * 17679 /
                  m.all_reduce_formula_us(A::kTwoShot, 16 << 20, 4),
              1e-6);
  // All-to-all: Bruck measured fastest for tiny blocks, pairwise for large ones; spread-out
  // was not measured, so its formula alone competes.
  EXPECT_EQ(m.best_all_to_all(1024, 4), AllToAllAlgorithm::kBruck);
  EXPECT_NE(m.best_all_to_all(262144, 4), AllToAllAlgorithm::kBruck);
  // On another rank count the measurements do not apply: the formulas decide, and
  // two-shot (whose formula is only a stand-in) is never chosen.
  const CostModel formulas_only;
  for (int p : {2, 3, 8}) {
    for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
      EXPECT_EQ(m.best_all_reduce(bytes, p), formulas_only.best_all_reduce(bytes, p));
      EXPECT_EQ(m.all_reduce_us(A::kRing, bytes, p),
                formulas_only.all_reduce_us(A::kRing, bytes, p));
    }
  }
}

TEST(CostModel, TwoShotIsChosenOnlyWhereItWasMeasured) {
  CostModel m = measured_on_four_ranks();
  m.measured.all_reduce.erase(AllReduceAlgorithm::kTwoShot);
  for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_NE(m.best_all_reduce(bytes, 4), AllReduceAlgorithm::kTwoShot) << bytes;
  }
  EXPECT_EQ(m.best_all_reduce(1 << 20, 4), AllReduceAlgorithm::kRing);  // 979 us: the next best
}

TEST(CostModel, JsonRoundTripAndErrors) {
  CostModel m;
  m.alpha_us = 12.5;
  m.beta_us_per_byte = 3e-4;
  m.gamma_us_per_byte = 5e-5;
  m.source = "test";
  m.fabric = "spray:udp";
  std::string error;
  const auto back = CostModel::from_json(m.to_json(), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->alpha_us, 12.5);
  EXPECT_EQ(back->beta_us_per_byte, 3e-4);
  EXPECT_EQ(back->gamma_us_per_byte, 5e-5);
  EXPECT_EQ(back->source, "test");
  EXPECT_EQ(back->fabric, "spray:udp");
  // The fabric is optional (files from before it was recorded), but a string when given.
  const auto without = CostModel::from_json(
      R"({"alpha_us": 1, "beta_us_per_byte": 1, "gamma_us_per_byte": 1})", error);
  ASSERT_TRUE(without) << error;
  EXPECT_EQ(without->fabric, "");
  EXPECT_FALSE(CostModel::from_json(
      R"({"alpha_us": 1, "beta_us_per_byte": 1, "gamma_us_per_byte": 1, "fabric": 7})", error));
  EXPECT_NE(error.find("fabric"), std::string::npos) << error;
  EXPECT_FALSE(CostModel::from_json("not json", error));
  EXPECT_FALSE(CostModel::from_json(R"({"alpha_us": 1, "beta_us_per_byte": 1})", error));
  EXPECT_NE(error.find("gamma_us_per_byte"), std::string::npos) << error;
  EXPECT_FALSE(CostModel::from_json(
      R"({"alpha_us": -1, "beta_us_per_byte": 1, "gamma_us_per_byte": 1})", error));
  // Measured times survive the round trip, in size order whatever the file's order.
  const CostModel measured = measured_on_four_ranks();
  const auto measured_back = CostModel::from_json(measured.to_json(), error);
  ASSERT_TRUE(measured_back) << error;
  EXPECT_EQ(measured_back->measured.ranks, 4);
  ASSERT_EQ(measured_back->measured.all_reduce.size(), 5u);
  for (const auto& [a, samples] : measured.measured.all_reduce) {
    const auto& got = measured_back->measured.all_reduce.at(a);
    ASSERT_EQ(got.size(), samples.size()) << name(a);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].bytes, samples[i].bytes);
      EXPECT_EQ(got[i].us, samples[i].us);
    }
  }
  EXPECT_EQ(measured_back->best_all_reduce(1 << 20, 4), AllReduceAlgorithm::kTwoShot);
  const std::string base = R"({"alpha_us": 1, "beta_us_per_byte": 1, "gamma_us_per_byte": 1, )";
  const auto unordered = CostModel::from_json(
      base + R"("measured": {"ranks": 2, "allreduce": {"ring": [[65536, 9], [4096, 3]]}}})", error);
  ASSERT_TRUE(unordered) << error;
  EXPECT_EQ(unordered->measured.all_reduce.at(AllReduceAlgorithm::kRing)[0].bytes, 4096u);
  // A file naming no algorithm, a bad row, a size twice or no rank count is refused and
  // says where.
  for (const auto& [measured_text, expected] :
       {std::pair{R"({"ranks": 4, "allreduce": {"butterfly": [[4096, 1]]}})", "butterfly"},
        std::pair{R"({"ranks": 4, "alltoall": {"auto": [[4096, 1]]}})", "auto"},
        std::pair{R"({"ranks": 4, "allreduce": {"ring": [[0, 1]]}})", "ring"},
        std::pair{R"({"ranks": 4, "allreduce": {"ring": [[4096, -1]]}})", "ring"},
        std::pair{R"({"ranks": 4, "allreduce": {"ring": [[4096]]}})", "ring"},
        std::pair{R"({"ranks": 4, "allreduce": {"ring": []}})", "ring"},
        std::pair{R"({"ranks": 4, "allreduce": {"ring": [[4096, 1], [64, 1], [4096, 2]]}})",
                  "4096 bytes has two rows"},
        std::pair{R"({"ranks": 4, "allreduce": [1]})", "allreduce"},
        std::pair{R"({"ranks": 0})", "ranks"}, std::pair{R"({"allreduce": {}})", "ranks"},
        std::pair{R"([4])", "ranks"}}) {
    EXPECT_FALSE(CostModel::from_json(base + R"("measured": )" + measured_text + "}", error))
        << measured_text;
    EXPECT_NE(error.find(expected), std::string::npos) << measured_text << ": " << error;
  }
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
