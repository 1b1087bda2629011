// SlotPool<T>: a fixed number of T objects addressed by a dense uint32_t index, with
// a free list. Allocation and release are O(1) and never touch the heap after
// construction; indices stay valid until released, so they can travel in cookies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace spray {

template <class T>
class SlotPool {
 public:
  explicit SlotPool(uint32_t capacity) : items_(capacity), in_use_(capacity, false) {
    free_.reserve(capacity);
    for (uint32_t i = capacity; i-- > 0;) free_.push_back(i);
  }

  // Returns a fresh (value-initialized) slot, or nullopt when all are taken.
  std::optional<uint32_t> acquire() {
    if (free_.empty()) return std::nullopt;
    const uint32_t i = free_.back();
    free_.pop_back();
    // Rebuilt in place rather than assigned from a temporary T{}: the temporary was
    // built on the stack with narrow stores and copied with wide loads, which stalled
    // on every message (see transport/wire/in_place.h). Nothrow, or a throw here would
    // leave a destroyed object in the slot.
    static_assert(std::is_nothrow_default_constructible_v<T>);
    std::destroy_at(&items_[i]);
    std::construct_at(&items_[i]);
    in_use_[i] = true;
    return i;
  }

  void release(uint32_t i) {
    in_use_[i] = false;
    free_.push_back(i);
  }

  T& operator[](uint32_t i) { return items_[i]; }
  const T& operator[](uint32_t i) const { return items_[i]; }
  bool in_use(uint32_t i) const { return i < items_.size() && in_use_[i]; }
  uint32_t capacity() const { return static_cast<uint32_t>(items_.size()); }
  uint32_t used() const { return capacity() - static_cast<uint32_t>(free_.size()); }

 private:
  std::vector<T> items_;
  std::vector<bool> in_use_;
  std::vector<uint32_t> free_;
};

}  // namespace spray
