#include "congestion/paths/reps.h"

namespace spray::paths {

RepsSelector::RepsSelector(const PathConfig& c)
    : entropy_count_(c.entropy_count ? c.entropy_count : 1), rng_(c.seed) {}

uint16_t RepsSelector::next_entropy() {
  if (freeze_left_ > 0) {
    --freeze_left_;
    if (recent_count_ > 0) return recent_[freeze_cursor_++ % recent_count_];
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
  kept = 0;
  for (size_t i = 0; i < recent_count_; ++i) {
    if (recent_[i] != entropy) recent_[kept++] = recent_[i];
  }
  recent_count_ = kept;
  recent_next_ = recent_count_ % kCacheSize;
}

void RepsSelector::on_feedback(uint16_t entropy, Feedback f) {
  switch (f) {
    case Feedback::kGood:
      recent_[recent_next_] = entropy;
      recent_next_ = (recent_next_ + 1) % kCacheSize;
      if (recent_count_ < kCacheSize) ++recent_count_;
      if (freeze_left_ > 0) return;  // while frozen, good EVs are reused, not queued
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
