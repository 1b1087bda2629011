// FlatMap: an open-addressing hash map from uint64_t keys to uint32_t values with a
// capacity fixed at construction.
//
// Why: the fast path looks up PDCs, in-flight messages and memory keys per packet and
// must not allocate (std::unordered_map allocates a node per insert). Capacity is a
// power of two at least twice the maximum number of entries, so probes stay short.
// Deletion uses backward shifting, so there are no tombstones and no slow decay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace spray {

class FlatMap {
 public:
  // `max_entries`: the most entries ever held at once; insert fails beyond it.
  explicit FlatMap(size_t max_entries = 16) {
    size_t cap = 16;
    while (cap < max_entries * 2) cap <<= 1;
    slots_.resize(cap);
    max_entries_ = max_entries;
  }

  size_t size() const { return size_; }
  size_t max_entries() const { return max_entries_; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }

  // Inserts or overwrites. Returns false only when the map is full.
  bool insert(uint64_t key, uint32_t value) {
    size_t i = home(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        slots_[i].value = value;
        return true;
      }
      i = next(i);
    }
    if (size_ >= max_entries_) return false;
    slots_[i] = Slot{key, value, true};
    ++size_;
    return true;
  }

  std::optional<uint32_t> find(uint64_t key) const {
    for (size_t i = home(key); slots_[i].used; i = next(i)) {
      if (slots_[i].key == key) return slots_[i].value;
    }
    return std::nullopt;
  }

  bool erase(uint64_t key) {
    size_t i = home(key);
    while (slots_[i].used && slots_[i].key != key) i = next(i);
    if (!slots_[i].used) return false;
    // Backward-shift: move later entries of the same probe run into the hole.
    size_t hole = i;
    for (size_t j = next(hole); slots_[j].used; j = next(j)) {
      const size_t h = home(slots_[j].key);
      const bool movable = (hole <= j) ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  void clear() {
    for (auto& s : slots_) s = Slot{};
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };

  size_t home(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key) & (slots_.size() - 1);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t max_entries_ = 0;
};

}  // namespace spray
