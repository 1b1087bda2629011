#include "congestion/paths/reps.h"

namespace spray::paths {

RepsSelector::RepsSelector(const PathConfig& c)
    : entropy_count_(c.entropy_count ? c.entropy_count : 1), rng_(c.seed) {}

uint16_t RepsSelector::next_entropy() {
  if (freeze_left_ > 0) {
    --freeze_left_;
    if (count_ > 0) {
      const uint16_t ev = ring_[(head_ + freeze_cursor_ % count_) % kCacheSize];
      ++freeze_cursor_;
      return ev;
    }
    return explore();
  }
  if (count_ == 0) return explore();
  const uint16_t ev = ring_[head_];
  head_ = (head_ + 1) % kCacheSize;
  --count_;
  return ev;
}

void RepsSelector::evict(uint16_t entropy) {
  size_t kept = 0;
  for (size_t i = 0; i < count_; ++i) {
    const uint16_t ev = ring_[(head_ + i) % kCacheSize];
    if (ev != entropy) ring_[(head_ + kept++) % kCacheSize] = ev;
  }
  count_ = kept;
}

void RepsSelector::on_feedback(uint16_t entropy, Feedback f) {
  switch (f) {
    case Feedback::kGood:
      if (freeze_left_ > 0) return;  // the frozen set is reused in place, not refilled
      if (count_ < kCacheSize) {
        ring_[(head_ + count_) % kCacheSize] = entropy;
        ++count_;
      }
      return;
    case Feedback::kTimeout:
      // The EV itself is suspect: evict it, or a freeze could keep reusing a dead path.
      evict(entropy);
      freeze_left_ = kFreezePackets;
      freeze_cursor_ = 0;
      return;
    case Feedback::kEcn:
    case Feedback::kNack:
      return;  // not recycled
  }
}

}  // namespace spray::paths
