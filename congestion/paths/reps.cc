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
    if (recent_count_ > 0) return fresh_entropy(freeze_cursor_);
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
  if (freeze_left_ > 0 || recent_count_ == 0) return next_entropy();
  return fresh_entropy(retransmit_cursor_);
}

// Takes the next turn among the kFreshEvs newest good EVs (fewer if fewer are known),
// newest first. Requires recent_count_ > 0.
uint16_t RepsSelector::fresh_entropy(size_t& cursor) {
  const size_t newest_first = cursor++ % std::min(recent_count_, kFreshEvs);
  return recent_[(recent_next_ + kCacheSize - 1 - newest_first) % kCacheSize];
}

size_t RepsSelector::good_entropies(std::span<uint16_t> out) const {
  const size_t n = std::min(out.size(), recent_count_);
  for (size_t i = 0; i < n; ++i) out[i] = recent_[(recent_next_ + kCacheSize - 1 - i) % kCacheSize];
  return n;
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
  // Compacts oldest to newest into positions 0.., so the newest stays just before
  // recent_next_ (retransmit_entropy() and the freeze read it that way).
  std::array<uint16_t, kCacheSize> kept_evs{};
  size_t kept = 0;
  const size_t oldest = (recent_next_ + kCacheSize - recent_count_) % kCacheSize;
  for (size_t i = 0; i < recent_count_; ++i) {
    const uint16_t ev = recent_[(oldest + i) % kCacheSize];
    if (ev != entropy) {
      kept_evs[kept++] = ev;
    } else if (and_older) {
      kept = 0;  // what came back good before it is older evidence still
    }
  }
  if (kept == recent_count_) return;
  recent_ = kept_evs;
  recent_count_ = kept;
  recent_next_ = kept % kCacheSize;
}

void RepsSelector::on_feedback(uint16_t entropy, Feedback f) {
  switch (f) {
    case Feedback::kGood:
      forget_bad(entropy);
      recent_[recent_next_] = entropy;
      recent_next_ = (recent_next_ + 1) % kCacheSize;
      if (recent_count_ < kCacheSize) ++recent_count_;
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
      evict_recent(entropy, false);  // not recycled, and no longer a retransmission's choice
      return;
  }
}

}  // namespace spray::paths
