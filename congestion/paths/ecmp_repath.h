// ECMP with entropy change on ECN: one EV at a time, as ECMP, but NSCC's congestion
// signals on that EV move the flow to a fresh random one (UET NSCC's entropy change on
// ECN; Google's PLB does the same for TCP). For flows that must not be sprayed — ROD, or
// a fabric whose receivers cannot take reordering — it escapes a collision that plain
// ECMP sits in for the flow's life.
//
// Only marks on the current EV count: packets still in flight on the previous one are
// marked for congestion the flow has already left. A mark, a trim, a RACK loss or a
// timeout each move it; a move reorders at most the packets in flight at that moment.
#pragma once

#include "congestion/paths/path_selector.h"
#include "transport/base/rng.h"

namespace spray::paths {

class EcmpRepathSelector final : public PathSelector {
 public:
  explicit EcmpRepathSelector(const PathConfig& c)
      : count_(c.entropy_count ? c.entropy_count : 1), rng_(c.seed), entropy_(draw()) {}

  uint16_t next_entropy() override { return entropy_; }
  void on_feedback(uint16_t entropy, Feedback f) override {
    if (delivered(f) || entropy != entropy_ || count_ == 1) return;
    uint16_t fresh = draw();
    while (fresh == entropy_) fresh = draw();
    entropy_ = fresh;
    ++repaths_;
  }
  std::string_view name() const override { return "ecmp_repath"; }

  uint64_t repaths() const { return repaths_; }

 private:
  uint16_t draw() { return static_cast<uint16_t>(rng_.below(count_)); }

  uint16_t count_;
  Rng rng_;
  uint16_t entropy_;
  uint64_t repaths_ = 0;
};

}  // namespace spray::paths
