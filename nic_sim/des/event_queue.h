// EventQueue: the virtual-time core of the simulator — a 4-ary min-heap of compact
// events, ordered by (time, insertion sequence), so equal times pop in the order they
// were pushed and every run with the same seed is identical.
//
// An event is 24 bytes: its time in picoseconds, a sequence number, what kind it is and
// two 32-bit arguments whose meaning the kind defines (a port, a host, a packet). The
// heap is one vector, grown by doubling and never shrunk, so tens of millions of
// pushes and pops allocate only a few times; a 4-ary heap halves the depth of a binary
// one and keeps a node's children in one cache line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/base/time.h"

namespace spray::des {

struct Event {
  int64_t at_ps = 0;
  uint32_t seq = 0;  // wraps after 4e9 pushes; compared as a 64-bit key with at_ps
  uint8_t kind = 0;
  uint8_t pad[3] = {};
  uint32_t a = 0;
  uint32_t b = 0;

  Time at() const { return Time{at_ps}; }
};
static_assert(sizeof(Event) == 24);

class EventQueue {
 public:
  void push(Time at, uint8_t kind, uint32_t a, uint32_t b = 0) {
    Event e;
    e.at_ps = at.ps;
    e.seq = next_seq_++;
    e.kind = kind;
    e.a = a;
    e.b = b;
    heap_.push_back(e);
    sift_up(heap_.size() - 1);
    ++pushed_;
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  uint64_t pushed() const { return pushed_; }

  Event pop() {
    const Event top = heap_.front();
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return top;
  }

  size_t memory_bytes() const { return heap_.capacity() * sizeof(Event); }

 private:
  // Earlier time first; equal times in push order. The sequence is compared as the
  // difference of two wrapping counters, which stays right while fewer than 2^31 events
  // are pending at once.
  static bool before(const Event& x, const Event& y) {
    if (x.at_ps != y.at_ps) return x.at_ps < y.at_ps;
    return static_cast<int32_t>(x.seq - y.seq) < 0;
  }

  void sift_up(size_t i) {
    const Event e = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  void sift_down(size_t i) {
    const Event e = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t last = first + 4 < n ? first + 4 : n;
      for (size_t c = first + 1; c < last; ++c) {
        if (before(heap_[c], heap_[best])) best = c;
      }
      if (!before(heap_[best], e)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = e;
  }

  std::vector<Event> heap_;
  uint32_t next_seq_ = 0;
  uint64_t pushed_ = 0;
};

}  // namespace spray::des
