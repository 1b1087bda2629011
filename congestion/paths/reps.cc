#include "congestion/paths/reps.h"

#include <algorithm>

namespace spray::paths {

RepsSelector::RepsSelector(const PathConfig& c)
    : entropy_count_(c.entropy_count ? c.entropy_count : 1),
      ring_limit_(std::clamp<size_t>(c.reps_cache, 1, kCacheSize)),
      rng_(c.seed) {}

uint16_t RepsSelector::next_entropy() {
  if (freeze_left_ > 0) {
    --freeze_left_;
    if (both_ways_.size() > 0) return fresh_entropy(both_ways_, freeze_cursor_);
    if (delivered_.size() > 0) return fresh_entropy(delivered_, freeze_cursor_);
    return explore();
  }
  if (count_ == 0) return explore();
  const uint16_t ev = ring_[head_];
  head_ = (head_ + 1) % kCacheSize;
  --count_;
  return ev;
}

uint16_t RepsSelector::explore() {
  uint16_t ev = 0;
  for (int draw = 0; draw < kExploreDraws; ++draw) {
    ev = static_cast<uint16_t>(rng_.below(entropy_count_));
    if (!recently_bad(ev)) break;
  }
  return ev;
}

bool RepsSelector::recently_bad(uint16_t entropy) const {
  for (size_t i = 0; i < bad_count_; ++i) {
    if (bad_[i] == entropy) return true;
  }
  return false;
}

// bad_ holds bad_count_ EVs in any order; once full, a new one replaces the entry at
// bad_next_, round robin (roughly the oldest).
void RepsSelector::note_bad(uint16_t entropy) {
  if (recently_bad(entropy)) return;
  if (bad_count_ < kCacheSize) {
    bad_[bad_count_++] = entropy;
    return;
  }
  bad_[bad_next_] = entropy;
  bad_next_ = (bad_next_ + 1) % kCacheSize;
}

void RepsSelector::forget_bad(uint16_t entropy) {
  for (size_t i = 0; i < bad_count_; ++i) {
    if (bad_[i] == entropy) {
      bad_[i] = bad_[--bad_count_];
      return;
    }
  }
}

uint16_t RepsSelector::retransmit_entropy() {
  if (freeze_left_ > 0 || delivered_.size() == 0) return next_entropy();
  return fresh_entropy(delivered_, retransmit_cursor_);
}

uint16_t RepsSelector::fresh_entropy(const RecentEvs& evs, size_t& cursor) {
  return evs.newest(cursor++ % std::min(evs.size(), kFreshEvs));
}

size_t RepsSelector::good_entropies(std::span<uint16_t> out) const {
  const size_t n = std::min(out.size(), delivered_.size());
  for (size_t i = 0; i < n; ++i) out[i] = delivered_.newest(i);
  return n;
}

void RepsSelector::RecentEvs::push(uint16_t entropy) {
  evs_[next_] = entropy;
  next_ = (next_ + 1) % kCacheSize;
  if (count_ < kCacheSize) ++count_;
}

void RepsSelector::evict(uint16_t entropy) {
  size_t kept = 0;
  for (size_t i = 0; i < count_; ++i) {
    const uint16_t ev = ring_[(head_ + i) % kCacheSize];
    if (ev != entropy) ring_[(head_ + kept++) % kCacheSize] = ev;
  }
  count_ = kept;
  evict_recent(entropy, true);
}

void RepsSelector::evict_recent(uint16_t entropy, bool and_older) {
  delivered_.evict(entropy, and_older);
  both_ways_.evict(entropy, and_older);
}

void RepsSelector::RecentEvs::evict(uint16_t entropy, bool and_older) {
  // Compacts oldest to newest into positions 0.., so the newest stays just before next_.
  std::array<uint16_t, kCacheSize> kept_evs{};
  size_t kept = 0;
  const size_t oldest = (next_ + kCacheSize - count_) % kCacheSize;
  for (size_t i = 0; i < count_; ++i) {
    const uint16_t ev = evs_[(oldest + i) % kCacheSize];
    if (ev != entropy) {
      kept_evs[kept++] = ev;
    } else if (and_older) {
      kept = 0;  // what came back good before it is older evidence still
    }
  }
  if (kept == count_) return;
  evs_ = kept_evs;
  count_ = kept;
  next_ = kept % kCacheSize;
}

void RepsSelector::on_feedback(uint16_t entropy, Feedback f) {
  switch (f) {
    case Feedback::kGood:
      both_ways_.push(entropy);
      [[fallthrough]];
    case Feedback::kDelivered:
      delivered_.push(entropy);
      forget_bad(entropy);
      if (freeze_left_ > 0) return;  // while frozen, good EVs are reused, not queued
      if (count_ < ring_limit_) {
        ring_[(head_ + count_) % kCacheSize] = entropy;
        ++count_;
      }
      return;
    case Feedback::kTimeout:
      // The EV itself is suspect: evict it, or a freeze could keep reusing a dead path;
      // and with it the EVs that last came back good before it did (evict).
      note_bad(entropy);
      evict(entropy);
      freeze_left_ = kFreezePackets;
      freeze_cursor_ = 0;
      return;
    case Feedback::kEcn:
    case Feedback::kNack:
    case Feedback::kLost:
      note_bad(entropy);
      evict_recent(entropy, false);  // not recycled, and no longer a resend's or a freeze's choice
      return;
  }
}

}  // namespace spray::paths
