// Penalty-bitmap spraying: packets take the EVs in turn (a seeded start, then round
// robin, so load spreads evenly), skipping every EV whose bit is set in a penalty
// bitmap. ECN marks, NACKs and timeouts set the EV's bit; a clean ACK clears it. A
// penalty lasts one pass: the cursor clears a bit as it skips it, so a path that
// recovered is tried again on the next round, and a path that is still bad is
// penalised again by its feedback. With every EV penalised the selector sends anyway
// (to the next EV in turn) rather than stall.
//
// Unlike REPS it remembers bad paths rather than good ones: it suits fabrics where most
// paths are fine and a few are degraded or dead.
#pragma once

#include <vector>

#include "congestion/paths/path_selector.h"

namespace spray::paths {

class PenaltyBitmapSelector final : public PathSelector {
 public:
  explicit PenaltyBitmapSelector(const PathConfig& c)
      : count_(c.entropy_count ? c.entropy_count : 1),
        cursor_(static_cast<uint16_t>(c.seed % count_)),
        penalised_((count_ + 63) / 64, 0) {}

  uint16_t next_entropy() override {
    for (uint32_t tries = 0; tries < count_; ++tries) {
      const uint16_t ev = advance();
      if (!is_penalised(ev)) return ev;
      set(ev, false);  // skipped once: the penalty is served
    }
    return advance();  // everything penalised: keep sending
  }

  void on_feedback(uint16_t entropy, Feedback f) override {
    if (entropy >= count_) return;
    set(entropy, !delivered(f));
  }

  std::string_view name() const override { return "bitmap"; }
  bool is_penalised(uint16_t ev) const { return (penalised_[ev / 64] >> (ev % 64)) & 1; }

 private:
  uint16_t advance() {
    const uint16_t ev = cursor_;
    cursor_ = static_cast<uint16_t>((cursor_ + 1) % count_);
    return ev;
  }
  void set(uint16_t ev, bool on) {
    const uint64_t bit = uint64_t{1} << (ev % 64);
    penalised_[ev / 64] = on ? penalised_[ev / 64] | bit : penalised_[ev / 64] & ~bit;
  }

  uint16_t count_;
  uint16_t cursor_;
  std::vector<uint64_t> penalised_;  // bit e: EV e is penalised
};

}  // namespace spray::paths
