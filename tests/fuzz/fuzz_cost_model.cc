// libFuzzer target: the tuner's cost model file (SPRAY_COLL_TUNING, written by
// `spray-coll-perf --calibrate`, read by rank 0 and handed to every rank as text), on
// any bytes. Invariants checked on each input:
//   - parsing never reads outside the input (ASan) or hits undefined behaviour (UBSan),
//     and a refusal always says why;
//   - a model it accepts has positive finite parameters and measured rows of positive
//     sizes and times in size order, and writes back to text that parses to a model
//     writing the same text (what rank 0 publishes is what every rank reads);
//   - the tuner then picks a real algorithm (never kAuto) for every size and rank count
//     tried, the measured rank count included.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "collectives/tuner.h"

namespace {

using namespace spray::coll;

template <typename Algorithm>
void check_rows(const std::map<Algorithm, std::vector<TimeSample>>& times) {
  for (const auto& [algorithm, rows] : times) {
    if (algorithm == Algorithm::kAuto || rows.empty()) std::abort();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].bytes == 0 || !(rows[i].us > 0) || !std::isfinite(rows[i].us)) std::abort();
      if (i > 0 && rows[i].bytes < rows[i - 1].bytes) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  const auto model = CostModel::from_json(text, error);
  if (!model) {
    if (error.empty()) std::abort();
    return 0;
  }
  for (double v : {model->alpha_us, model->beta_us_per_byte, model->gamma_us_per_byte}) {
    if (!(v > 0) || !std::isfinite(v)) std::abort();
  }
  check_rows(model->measured.all_reduce);
  check_rows(model->measured.all_to_all);
  const std::string written = model->to_json();
  const auto again = CostModel::from_json(written, error);
  if (!again || again->to_json() != written) std::abort();
  for (int ranks : {1, 2, 3, 4, 5, 8, 64, model->measured.ranks}) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 20, size_t{1} << 30}) {
      if (model->best_all_reduce(bytes, ranks) == AllReduceAlgorithm::kAuto) std::abort();
      if (model->best_all_to_all(bytes, ranks) == AllToAllAlgorithm::kAuto) std::abort();
      (void)model->all_reduce_us(AllReduceAlgorithm::kAuto, bytes, ranks);
      (void)model->all_to_all_us(AllToAllAlgorithm::kAuto, bytes, ranks);
    }
  }
  return 0;
}
