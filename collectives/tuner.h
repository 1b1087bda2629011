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
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// What the tuner chooses from. Two-shot is not among them: only asked for by name (see
// two_shot.cc for the measurements behind that).
inline constexpr AllReduceAlgorithm kAllReduceAlgorithms[] = {
    AllReduceAlgorithm::kRing, AllReduceAlgorithm::kRecursiveDoubling,
    AllReduceAlgorithm::kRabenseifner, AllReduceAlgorithm::kDoubleBinaryTree};
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

struct CostModel {
  double alpha_us = 30.0;
  double beta_us_per_byte = 1.0 / 1000.0;   // 1 GB/s
  double gamma_us_per_byte = 1.0 / 4000.0;  // 4 GB/s
  std::string source = "built-in defaults";

  // Predicted time in microseconds of one call on `ranks` ranks. All-reduce: `bytes` is
  // the buffer; all-to-all: `block_bytes` is what each rank sends each other rank.
  double all_reduce_us(AllReduceAlgorithm a, size_t bytes, int ranks) const;
  double all_to_all_us(AllToAllAlgorithm a, size_t block_bytes, int ranks) const;
  // The cheapest algorithm by the model (never kAuto).
  AllReduceAlgorithm best_all_reduce(size_t bytes, int ranks) const;
  AllToAllAlgorithm best_all_to_all(size_t block_bytes, int ranks) const;

  // JSON: {"alpha_us": .., "beta_us_per_byte": .., "gamma_us_per_byte": .., ...}.
  std::string to_json() const;
  // nullopt and an error naming the field when a value is missing, not a number or not
  // positive and finite.
  static std::optional<CostModel> from_json(std::string_view text, std::string& error);
  static std::optional<CostModel> load(const std::string& path, std::string& error);
};

}  // namespace spray::coll
