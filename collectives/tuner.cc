#include "collectives/tuner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace spray::coll {
namespace {

constexpr std::pair<AllReduceAlgorithm, std::string_view> kAllReduceNames[] = {
    {AllReduceAlgorithm::kAuto, "auto"},
    {AllReduceAlgorithm::kRing, "ring"},
    {AllReduceAlgorithm::kRecursiveDoubling, "recursive_doubling"},
    {AllReduceAlgorithm::kRabenseifner, "rabenseifner"},
    {AllReduceAlgorithm::kDoubleBinaryTree, "double_binary_tree"},
    {AllReduceAlgorithm::kTwoShot, "two_shot"}};
constexpr std::pair<AllToAllAlgorithm, std::string_view> kAllToAllNames[] = {
    {AllToAllAlgorithm::kAuto, "auto"},
    {AllToAllAlgorithm::kPairwise, "pairwise"},
    {AllToAllAlgorithm::kBruck, "bruck"},
    {AllToAllAlgorithm::kSpreadOut, "spread_out"}};

template <typename Enum, size_t N>
std::string_view name_in(const std::pair<Enum, std::string_view> (&table)[N], Enum e) {
  for (const auto& [value, text] : table) {
    if (value == e) return text;
  }
  return "?";
}
template <typename Enum, size_t N>
std::optional<Enum> parse_in(const std::pair<Enum, std::string_view> (&table)[N],
                             std::string_view s) {
  for (const auto& [value, text] : table) {
    if (text == s) return value;
  }
  return std::nullopt;
}

// ceil(log2(p)) and the largest power of two not above p.
double log2_ceil(int p) {
  return std::ceil(std::log2(static_cast<double>(std::max(p, 1))));
}
int pow2_floor(int p) {
  return static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(p, 1))));
}

// An algorithm's measured times if they were measured on as many ranks as the call has
// (`same_ranks`); else none.
template <typename Enum>
const std::vector<TimeSample>& samples_of(const std::map<Enum, std::vector<TimeSample>>& times,
                                          Enum a, bool same_ranks) {
  static const std::vector<TimeSample> kNone;
  const auto it = same_ranks ? times.find(a) : times.end();
  return it == times.end() ? kNone : it->second;
}

// measured / formula at `bytes`: 1 without samples; between two measured sizes the two
// ratios interpolated linearly in log size (and log ratio); outside them the nearest's.
template <typename Formula>
double measured_ratio(const std::vector<TimeSample>& samples, size_t bytes, Formula formula) {
  if (samples.empty()) return 1;
  const auto ratio = [&](const TimeSample& s) {
    return s.us / std::max(formula(s.bytes), 1e-3);  // a formula may give 0 (one rank)
  };
  if (bytes <= samples.front().bytes) return ratio(samples.front());
  if (bytes >= samples.back().bytes) return ratio(samples.back());
  const auto above = std::upper_bound(samples.begin(), samples.end(), bytes,
                                      [](size_t b, const TimeSample& s) { return b < s.bytes; });
  const auto below = above - 1;
  const double t = std::log(static_cast<double>(bytes) / static_cast<double>(below->bytes)) /
                   std::log(static_cast<double>(above->bytes) / static_cast<double>(below->bytes));
  return std::exp((1 - t) * std::log(ratio(*below)) + t * std::log(ratio(*above)));
}

}  // namespace

std::string_view name(AllReduceAlgorithm a) {
  return name_in(kAllReduceNames, a);
}
std::optional<AllReduceAlgorithm> parse_all_reduce_algorithm(std::string_view s) {
  return parse_in(kAllReduceNames, s);
}
std::string_view name(AllToAllAlgorithm a) {
  return name_in(kAllToAllNames, a);
}
std::optional<AllToAllAlgorithm> parse_all_to_all_algorithm(std::string_view s) {
  return parse_in(kAllToAllNames, s);
}

double CostModel::all_reduce_formula_us(AllReduceAlgorithm a, size_t bytes, int ranks) const {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(bytes), p = ranks;
  const double a_ = alpha_us, b = beta_us_per_byte, g = gamma_us_per_byte;
  // Non-powers of two: the extra ranks fold in (one whole-buffer message and reduction)
  // and get the result back (one more message).
  const int q = pow2_floor(ranks);
  const double fold = q == ranks ? 0 : 2 * (a_ + n * b) + n * g;
  const double steps = std::log2(static_cast<double>(q));
  switch (a) {
    case AllReduceAlgorithm::kRing:
      return 2 * (p - 1) * a_ + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g;
    case AllReduceAlgorithm::kRecursiveDoubling:
      return fold + steps * (a_ + n * b + n * g);
    case AllReduceAlgorithm::kRabenseifner:
      return fold + 2 * steps * a_ + 2 * (q - 1) / static_cast<double>(q) * n * b +
             (q - 1) / static_cast<double>(q) * n * g;
    case AllReduceAlgorithm::kDoubleBinaryTree: {
      // A pipeline of `pieces` pieces through 2 * depth hops. Per piece index, a rank
      // (inner in one tree, leaf in the other) sends and receives four pieces and
      // reduces two: 2n bytes each way in all, a little more than the ring's.
      const double depth = log2_ceil(ranks);
      const double half = n / 2, piece = std::max(64.0 * 1024, half / 16);
      const double pieces = std::max(1.0, std::ceil(half / piece));
      const double per_piece = std::min(half, piece);
      return (2 * depth + pieces - 1) * (2 * a_ + per_piece * (4 * b + 2 * g));
    }
    case AllReduceAlgorithm::kTwoShot:
      // Two rounds, but each waits for all P - 1 peers: with ranks sharing cores every
      // one of them must be scheduled, so a round costs about what the ring's P - 1
      // steps do. The tuner chooses it only where it was measured (kAllReduceAlgorithms).
      return 2 * (p - 1) * a_ + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g;
    case AllReduceAlgorithm::kAuto:
      return all_reduce_formula_us(best_all_reduce(bytes, ranks), bytes, ranks);
  }
  return 0;
}

double CostModel::all_to_all_formula_us(AllToAllAlgorithm a, size_t block_bytes, int ranks) const {
  if (ranks <= 1) return 0;
  const double m = static_cast<double>(block_bytes), p = ranks;
  switch (a) {
    case AllToAllAlgorithm::kPairwise:
      return (p - 1) * (alpha_us + m * beta_us_per_byte);
    case AllToAllAlgorithm::kSpreadOut:
      // The window hides all but one latency of every `window` steps.
      return std::ceil((p - 1) / kSpreadOutWindow) * alpha_us + (p - 1) * m * beta_us_per_byte;
    case AllToAllAlgorithm::kBruck:
      // Each step sends about half of all blocks; packing copies them twice more.
      return log2_ceil(ranks) * (alpha_us + std::ceil(p / 2) * m * beta_us_per_byte) +
             2 * log2_ceil(ranks) * std::ceil(p / 2) * m * gamma_us_per_byte;
    case AllToAllAlgorithm::kAuto:
      return all_to_all_formula_us(best_all_to_all(block_bytes, ranks), block_bytes, ranks);
  }
  return 0;
}

double CostModel::all_reduce_us(AllReduceAlgorithm a, size_t bytes, int ranks) const {
  if (a == AllReduceAlgorithm::kAuto) a = best_all_reduce(bytes, ranks);
  const auto formula = [&](size_t b) { return all_reduce_formula_us(a, b, ranks); };
  return formula(bytes) *
         measured_ratio(samples_of(measured.all_reduce, a, ranks == measured.ranks), bytes,
                        formula);
}

double CostModel::all_to_all_us(AllToAllAlgorithm a, size_t block_bytes, int ranks) const {
  if (a == AllToAllAlgorithm::kAuto) a = best_all_to_all(block_bytes, ranks);
  const auto formula = [&](size_t b) { return all_to_all_formula_us(a, b, ranks); };
  return formula(block_bytes) *
         measured_ratio(samples_of(measured.all_to_all, a, ranks == measured.ranks), block_bytes,
                        formula);
}

AllReduceAlgorithm CostModel::best_all_reduce(size_t bytes, int ranks) const {
  AllReduceAlgorithm best = AllReduceAlgorithm::kRing;
  double best_us = all_reduce_us(best, bytes, ranks);
  for (AllReduceAlgorithm a : kAllReduceAlgorithms) {
    if (a == AllReduceAlgorithm::kTwoShot &&
        samples_of(measured.all_reduce, a, ranks == measured.ranks).empty()) {
      continue;  // its formula is only a stand-in (kAllReduceAlgorithms)
    }
    if (const double us = all_reduce_us(a, bytes, ranks); us < best_us) {
      best = a;
      best_us = us;
    }
  }
  return best;
}

AllToAllAlgorithm CostModel::best_all_to_all(size_t block_bytes, int ranks) const {
  AllToAllAlgorithm best = AllToAllAlgorithm::kPairwise;
  double best_us = all_to_all_us(best, block_bytes, ranks);
  for (AllToAllAlgorithm a : kAllToAllAlgorithms) {
    if (const double us = all_to_all_us(a, block_bytes, ranks); us < best_us) {
      best = a;
      best_us = us;
    }
  }
  return best;
}

namespace {

// {"ring": [[bytes, us], ..], ..}
template <typename Enum, size_t N>
nlohmann::json times_to_json(const std::pair<Enum, std::string_view> (&names)[N],
                             const std::map<Enum, std::vector<TimeSample>>& times) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [a, samples] : times) {
    nlohmann::json rows = nlohmann::json::array();
    for (const TimeSample& s : samples) rows.push_back({s.bytes, s.us});
    out[std::string(name_in(names, a))] = std::move(rows);
  }
  return out;
}

// The inverse of times_to_json, into `out`, sorted by size; false and `error` when a name
// is not an algorithm of this collective, a row is not [positive integer, positive
// finite number] or a size has two rows (which time would hold is a guess, and the order
// sorting left them in made rank 0's written model differ from what it read).
template <typename Enum, size_t N>
bool times_from_json(const std::pair<Enum, std::string_view> (&names)[N], const nlohmann::json& j,
                     std::string_view what, std::map<Enum, std::vector<TimeSample>>& out,
                     std::string& error) {
  if (!j.is_object()) {
    error = fmt::format("\"measured\".\"{}\" must be an object", what);
    return false;
  }
  for (const auto& [key, rows] : j.items()) {
    const std::optional<Enum> a = parse_in(names, key);
    if (!a || *a == Enum::kAuto) {
      error = fmt::format("\"measured\".\"{}\": \"{}\" is not an algorithm of it", what, key);
      return false;
    }
    const auto bad_row = [](const nlohmann::json& row) {
      return !row.is_array() || row.size() != 2 || !row[0].is_number_unsigned() || row[0] == 0 ||
             !row[1].is_number() || !(row[1] > 0.0) || !std::isfinite(static_cast<double>(row[1]));
    };
    if (!rows.is_array() || rows.empty() || std::any_of(rows.begin(), rows.end(), bad_row)) {
      error = fmt::format(
          "\"measured\".\"{}\".\"{}\": must be rows of [bytes > 0, microseconds > 0]", what, key);
      return false;
    }
    std::vector<TimeSample> samples;
    for (const nlohmann::json& row : rows) {
      samples.push_back({static_cast<size_t>(row[0]), static_cast<double>(row[1])});
    }
    std::sort(samples.begin(), samples.end(),
              [](const TimeSample& x, const TimeSample& y) { return x.bytes < y.bytes; });
    const auto twice = std::adjacent_find(
        samples.begin(), samples.end(),
        [](const TimeSample& x, const TimeSample& y) { return x.bytes == y.bytes; });
    if (twice != samples.end()) {
      error =
          fmt::format("\"measured\".\"{}\".\"{}\": {} bytes has two rows", what, key, twice->bytes);
      return false;
    }
    out[*a] = std::move(samples);
  }
  return true;
}

}  // namespace

std::string CostModel::to_json() const {
  nlohmann::json j{{"alpha_us", alpha_us},
                   {"beta_us_per_byte", beta_us_per_byte},
                   {"gamma_us_per_byte", gamma_us_per_byte},
                   {"source", source}};
  if (!fabric.empty()) j["fabric"] = fabric;
  if (measured.ranks > 0) {
    j["measured"] = {{"ranks", measured.ranks},
                     {"allreduce", times_to_json(kAllReduceNames, measured.all_reduce)},
                     {"alltoall", times_to_json(kAllToAllNames, measured.all_to_all)}};
  }
  return j.dump(2);
}

std::optional<CostModel> CostModel::from_json(std::string_view text, std::string& error) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  CostModel m;
  for (auto [key, field] :
       {std::pair{"alpha_us", &m.alpha_us}, std::pair{"beta_us_per_byte", &m.beta_us_per_byte},
        std::pair{"gamma_us_per_byte", &m.gamma_us_per_byte}}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
        it->get<double>() <= 0) {
      error = fmt::format("\"{}\" must be a positive number", key);
      return std::nullopt;
    }
    *field = it->get<double>();
  }
  if (const auto it = j.find("source"); it != j.end() && it->is_string()) m.source = *it;
  if (const auto it = j.find("fabric"); it != j.end()) {
    if (!it->is_string()) {
      error = "\"fabric\" must be a string";
      return std::nullopt;
    }
    m.fabric = *it;
  }
  if (const auto it = j.find("measured"); it != j.end()) {
    const auto ranks = it->is_object() ? it->find("ranks") : it->end();
    if (ranks == it->end() || !ranks->is_number_unsigned() || ranks->get<uint64_t>() < 1 ||
        ranks->get<uint64_t>() > 1 << 20) {
      error = "\"measured\" must be an object with \"ranks\", a positive integer";
      return std::nullopt;
    }
    m.measured.ranks = ranks->get<int>();
    const nlohmann::json none = nlohmann::json::object();
    const auto all_reduce = it->find("allreduce"), all_to_all = it->find("alltoall");
    if (!times_from_json(kAllReduceNames, all_reduce == it->end() ? none : *all_reduce, "allreduce",
                         m.measured.all_reduce, error) ||
        !times_from_json(kAllToAllNames, all_to_all == it->end() ? none : *all_to_all, "alltoall",
                         m.measured.all_to_all, error)) {
      return std::nullopt;
    }
  }
  return m;
}

std::optional<CostModel> CostModel::load(const std::string& path, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = fmt::format("cannot read the cost model '{}'", path);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto m = from_json(text.str(), error);
  if (!m) error = fmt::format("cost model '{}': {}", path, error);
  return m;
}

}  // namespace spray::coll
