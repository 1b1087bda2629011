// Oblivious spraying: each packet takes an EV drawn uniformly from [0, N), ignoring
// feedback. Spreads load evenly but keeps hitting a failed path 1/N of the time.
#pragma once

#include "congestion/paths/path_selector.h"
#include "transport/base/rng.h"

namespace spray::paths {

class ObliviousSelector final : public PathSelector {
 public:
  explicit ObliviousSelector(const PathConfig& c)
      : count_(c.entropy_count ? c.entropy_count : 1), rng_(c.seed) {}

  uint16_t next_entropy() override { return static_cast<uint16_t>(rng_.below(count_)); }
  void on_feedback(uint16_t, Feedback) override {}
  std::string_view name() const override { return "oblivious"; }

 private:
  uint16_t count_;
  Rng rng_;
};

}  // namespace spray::paths
