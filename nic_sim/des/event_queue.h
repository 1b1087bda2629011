// EventQueue: the virtual-time core of the simulator — a 4-ary min-heap of events,
// ordered by (time, insertion sequence), so equal times pop in the order they were
// pushed and every run with the same seed is identical.
//
// An event is its time in picoseconds, a sequence number, what kind it is and two 32-bit
// arguments whose meaning the kind defines (a port, a host, a packet). The heap holds
// only what orders events (time, sequence) and the index of the event's body (kind and
// arguments), which lies in a separate slot array: a heap entry is 16 bytes, so a node's
// four children fill exactly one 64-byte cache line, and the heap is laid out so that
// they start on one (the root sits in slot 3 of a cache-line-aligned array). With
// millions of events pending, sifting is bound by cache misses, one per level below the
// levels that stay cached; this layout makes that one line per level, where 24-byte
// entries spanned two or three, and sift_down fetches the next level's lines while it
// compares this one's, so their misses overlap. A body is touched once when pushed and
// once when popped. tests/bench/event_queue_bench measures it.
//
// Storage grows by doubling and never shrinks, and freed body slots are reused (last
// freed first, while still cached), so tens of millions of pushes and pops allocate
// only a few times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "transport/base/time.h"

namespace spray::des {

// What pop() returns: one event, whole.
struct Event {
  int64_t at_ps = 0;
  uint32_t seq = 0;  // wraps after 4e9 pushes; compared as a 64-bit key with at_ps
  uint8_t kind = 0;
  uint32_t a = 0;
  uint32_t b = 0;

  Time at() const { return Time{at_ps}; }
};

class EventQueue {
 public:
  // What the heap orders: 16 bytes, four to a cache line.
  struct Entry {
    int64_t at_ps;
    uint32_t seq;
    uint32_t body;  // index into bodies_
  };
  static_assert(sizeof(Entry) == 16);

  void push(Time at, uint8_t kind, uint32_t a, uint32_t b = 0) {
    uint32_t body;
    if (free_bodies_.empty()) {
      body = static_cast<uint32_t>(bodies_.size());
      bodies_.push_back(Body{kind, a, b});
    } else {
      body = free_bodies_.back();
      free_bodies_.pop_back();
      bodies_[body] = Body{kind, a, b};
    }
    heap_.push_back(Entry{at.ps, next_seq_++, body});
    sift_up(size() - 1);
    ++pushed_;
  }

  bool empty() const { return size() == 0; }
  size_t size() const { return heap_.size() - kRootSlot; }
  // The time of the next event; the queue must not be empty.
  Time top_time() const { return Time{heap_[kRootSlot].at_ps}; }
  uint64_t pushed() const { return pushed_; }

  // Removes and returns the earliest event; the queue must not be empty.
  Event pop() {
    const Entry top = node(0);
    const Body body = bodies_[top.body];
    free_bodies_.push_back(top.body);
    node(0) = heap_.back();
    heap_.pop_back();
    if (!empty()) sift_down(0);
    return Event{top.at_ps, top.seq, body.kind, body.a, body.b};
  }

  size_t memory_bytes() const {
    return heap_.capacity() * sizeof(Entry) + bodies_.capacity() * sizeof(Body) +
           free_bodies_.capacity() * sizeof(uint32_t);
  }

 private:
  struct Body {
    uint8_t kind;
    uint32_t a;
    uint32_t b;
  };

  // Heap node i lives in heap_[i + kRootSlot]: its children 4i+1 .. 4i+4 then occupy
  // slots 4(i+1) .. 4(i+1)+3, one aligned cache line. Slots 0-2 are unused.
  static constexpr size_t kRootSlot = 3;

  // A std::allocator for the heap whose blocks start on a cache line.
  template <class T>
  struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <class U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}
    T* allocate(size_t n) {
      return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
    }
    void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
    template <class U>
    bool operator==(const CacheLineAllocator<U>&) const {
      return true;
    }
  };

  Entry& node(size_t i) { return heap_[i + kRootSlot]; }

  // Earlier time first; equal times in push order. The sequence is compared as the
  // difference of two wrapping counters, which stays right while fewer than 2^31 events
  // are pending at once.
  static bool before(const Entry& x, const Entry& y) {
    if (x.at_ps != y.at_ps) return x.at_ps < y.at_ps;
    return static_cast<int32_t>(x.seq - y.seq) < 0;
  }

  void sift_up(size_t i) {
    const Entry e = node(i);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!before(e, node(parent))) break;
      node(i) = node(parent);
      i = parent;
    }
    node(i) = e;
  }

  void sift_down(size_t i) {
    const Entry e = node(i);
    const size_t n = size();
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      // The grandchildren: 16 consecutive nodes, four cache lines. Fetching them now,
      // while this level is compared, overlaps the next level's miss with this one.
      if (const size_t grand = 4 * first + 1; grand < n) {
        const Entry* g = &node(grand);
        for (int line = 0; line < 4; ++line) __builtin_prefetch(g + 4 * line);
      }
      size_t best = first;
      const size_t last = first + 4 < n ? first + 4 : n;
      for (size_t c = first + 1; c < last; ++c) {
        if (before(node(c), node(best))) best = c;
      }
      if (!before(node(best), e)) break;
      node(i) = node(best);
      i = best;
    }
    node(i) = e;
  }

  std::vector<Entry, CacheLineAllocator<Entry>> heap_ =
      std::vector<Entry, CacheLineAllocator<Entry>>(kRootSlot);
  std::vector<Body> bodies_;
  std::vector<uint32_t> free_bodies_;  // body slots of popped events, reused last-in first
  uint32_t next_seq_ = 0;
  uint64_t pushed_ = 0;
};

}  // namespace spray::des
