// ECMP behaviour: every packet of the flow carries the same EV, so the whole flow
// follows one hashed path, as TCP or RoCE flows do. The baseline spraying beats.
#pragma once

#include "congestion/paths/path_selector.h"
#include "transport/base/rng.h"

namespace spray::paths {

class EcmpSelector final : public PathSelector {
 public:
  explicit EcmpSelector(const PathConfig& c)
      : entropy_(static_cast<uint16_t>(Rng(c.seed).below(c.entropy_count ? c.entropy_count : 1))) {}

  uint16_t next_entropy() override { return entropy_; }
  void on_feedback(uint16_t, Feedback) override {}
  std::string_view name() const override { return "ecmp"; }

 private:
  uint16_t entropy_;
};

}  // namespace spray::paths
