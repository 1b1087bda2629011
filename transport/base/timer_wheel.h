// TimerWheel: a hashed timing wheel of intrusive timers.
//
// Each timer is a TimerNode embedded in its owner (a PDC, say), so arming, re-arming
// and canceling are O(1) pointer moves with no allocation. The wheel has `slots`
// buckets of `granularity` each; a deadline beyond one revolution simply waits in its
// bucket for extra laps (its deadline is compared on every visit), which keeps the
// structure flat. `expire` visits only the buckets between the last call and now.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/base/time.h"

namespace spray {

struct TimerNode {
  TimerNode* prev = nullptr;
  TimerNode* next = nullptr;
  Time deadline{};
  uint32_t owner = 0;  // an index the owner chooses; handed back on expiry
  bool armed() const { return prev != nullptr; }
};

class TimerWheel {
 public:
  TimerWheel(Duration granularity, size_t slots)
      : granularity_ps_(granularity.ps > 0 ? granularity.ps : 1), buckets_(slots) {
    for (auto& b : buckets_) b.prev = b.next = &b;
  }
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  size_t armed_count() const { return armed_; }

  void arm(TimerNode& n, Time deadline) {
    cancel(n);
    n.deadline = deadline;
    // A deadline already behind the wheel's hand goes into the current bucket, which
    // the next expire() visits; otherwise it would wait a whole revolution.
    const Time hand{last_tick_ * granularity_ps_};
    TimerNode& head = buckets_[bucket_of(deadline < hand ? hand : deadline)];
    n.prev = &head;
    n.next = head.next;
    head.next->prev = &n;
    head.next = &n;
    ++armed_;
  }

  void cancel(TimerNode& n) {
    if (!n.armed()) return;
    n.prev->next = n.next;
    n.next->prev = n.prev;
    n.prev = n.next = nullptr;
    --armed_;
  }

  // Calls fn(owner) for every timer whose deadline is <= now; each is disarmed first,
  // so fn may re-arm it.
  template <class Fn>
  void expire(Time now, Fn&& fn) {
    if (armed_ == 0) {
      last_tick_ = now.ps / granularity_ps_;
      return;
    }
    const int64_t now_tick = now.ps / granularity_ps_;
    int64_t first = last_tick_;
    if (now_tick - first >= static_cast<int64_t>(buckets_.size())) {
      first = now_tick - static_cast<int64_t>(buckets_.size()) + 1;
    }
    for (int64_t t = first; t <= now_tick; ++t) {
      TimerNode& head = buckets_[static_cast<size_t>(t) % buckets_.size()];
      TimerNode* n = head.next;
      while (n != &head) {
        TimerNode* following = n->next;
        if (n->deadline <= now) {
          cancel(*n);
          fn(n->owner);
        }
        n = following;
      }
    }
    last_tick_ = now_tick;
  }

 private:
  size_t bucket_of(Time t) const {
    return static_cast<size_t>(t.ps / granularity_ps_) % buckets_.size();
  }

  int64_t granularity_ps_;
  std::vector<TimerNode> buckets_;  // sentinel heads of circular lists
  int64_t last_tick_ = 0;
  size_t armed_ = 0;
};

}  // namespace spray
