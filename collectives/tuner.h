// The algorithm choice of the collectives: which algorithms exist, and the alpha-beta-
// gamma cost model (Hockney's, with Thakur, Rabenseifner & Gropp's per-algorithm terms)
// that picks one per call from the message size and the number of ranks.
//
// alpha: the cost of one message (latency and per-message overheads), in microseconds.
// beta:  the cost of one byte on the wire (1 / bandwidth), in microseconds per byte.
// gamma: the cost of reducing one byte locally, in microseconds per byte.
// `spray-coll-perf --calibrate FILE` measures them on the running fabric and writes
// them as JSON; SPRAY_COLL_TUNING=FILE makes every communicator use them. Without a file
// the defaults below (measured on a 2-core test machine over loopback) apply.
//
// The formulas count messages and bytes; they cannot see what a fabric does to each
// algorithm's pattern: ranks sharing cores (a step waits until its partner is scheduled),
// how a provider copies between processes, page sizes. So calibration also times every
// algorithm at a few sizes (MeasuredTimes), and where such times exist for the rank count
// of the call, each formula is scaled by its measured-to-predicted ratio, interpolated in
// log size between the measured sizes and held at the ends. Why: with 4 ranks on this
// 2-core machine the formulas chose Rabenseifner at 1 MiB while two-shot, measured beside
// it, took two thirds of its time (two_shot.cc has the figures), and which one wins has
// changed from day to day as the provider and the machine changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spray::coll {

enum class AllReduceAlgorithm : uint8_t {
  kAuto,
  kRing,
  kRecursiveDoubling,
  kRabenseifner,
  kDoubleBinaryTree,
  kTwoShot
};
enum class AllToAllAlgorithm : uint8_t { kAuto, kPairwise, kBruck, kSpreadOut };

// What the tuner chooses from. Two-shot only where it was measured (MeasuredTimes): its
// formula is the ring's, since where ranks share cores each of its two rounds waits for
// every peer to be scheduled, and only a measurement tells whether that costs more than
// the ring's 2(P - 1) steps (see two_shot.cc).
inline constexpr AllReduceAlgorithm kAllReduceAlgorithms[] = {
    AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRecursiveDoubling,
    AllReduceAlgorithm::kRabenseifner, AllReduceAlgorithm::kDoubleBinaryTree,
    AllReduceAlgorithm::kTwoShot};
inline constexpr AllToAllAlgorithm kAllToAllAlgorithms[] = {
    AllToAllAlgorithm::kPairwise, AllToAllAlgorithm::kBruck, AllToAllAlgorithm::kSpreadOut};

// Steps of the spread-out all-to-all in flight at once.
inline constexpr int kSpreadOutWindow = 4;

// "auto", "ring", "recursive_doubling", "rabenseifner", "double_binary_tree",
// "two_shot".
std::string_view name(AllReduceAlgorithm a);
std::optional<AllReduceAlgorithm> parse_all_reduce_algorithm(std::string_view s);
// "auto", "pairwise", "bruck", "spread_out".
std::string_view name(AllToAllAlgorithm a);
std::optional<AllToAllAlgorithm> parse_all_to_all_algorithm(std::string_view s);

// One measured call: its size in bytes (all-reduce: the buffer; all-to-all: one block)
// and its time in microseconds (the slowest rank's).
struct TimeSample {
  size_t bytes = 0;
  double us = 0;
};

// Times of every algorithm measured by calibrate() on `ranks` ranks, each algorithm's in
// increasing size. Only calls on that many ranks use them.
struct MeasuredTimes {
  int ranks = 0;  // 0: nothing measured
  std::map<AllReduceAlgorithm, std::vector<TimeSample>> all_reduce;
  std::map<AllToAllAlgorithm, std::vector<TimeSample>> all_to_all;
};

struct CostModel {
  double alpha_us = 30.0;
  double beta_us_per_byte = 1.0 / 1000.0;   // 1 GB/s
  double gamma_us_per_byte = 1.0 / 4000.0;  // 4 GB/s
  std::string source = "built-in defaults";
  // What it was measured on (FabricLink::fabric_name); empty for the built-in defaults
  // and files written before it was recorded. A run on another fabric warns.
  std::string fabric;
  MeasuredTimes measured;

  // Predicted time in microseconds of one call on `ranks` ranks: the formula, scaled by
  // the measured times where there are some for `ranks`. All-reduce: `bytes` is the
  // buffer; all-to-all: `block_bytes` is what each rank sends each other rank.
  double all_reduce_us(AllReduceAlgorithm a, size_t bytes, int ranks) const;
  double all_to_all_us(AllToAllAlgorithm a, size_t block_bytes, int ranks) const;
  // The formulas alone, without the measured times.
  double all_reduce_formula_us(AllReduceAlgorithm a, size_t bytes, int ranks) const;
  double all_to_all_formula_us(AllToAllAlgorithm a, size_t block_bytes, int ranks) const;
  // The cheapest algorithm by the model (never kAuto; two-shot only where measured).
  AllReduceAlgorithm best_all_reduce(size_t bytes, int ranks) const;
  AllToAllAlgorithm best_all_to_all(size_t block_bytes, int ranks) const;

  // JSON: {"alpha_us": .., "beta_us_per_byte": .., "gamma_us_per_byte": .., "source": ..,
  // "fabric": .. when known, and when measured "measured": {"ranks": 4, "allreduce": {"ring":
  // [[bytes, us], ..],
  // ..}, "alltoall": {..}}}.
  std::string to_json() const;
  // nullopt and an error naming the field when a value is missing, not a number or not
  // positive and finite, or a measured time names no algorithm or is malformed.
  static std::optional<CostModel> from_json(std::string_view text, std::string& error);
  static std::optional<CostModel> load(const std::string& path, std::string& error);
};

}  // namespace spray::coll
