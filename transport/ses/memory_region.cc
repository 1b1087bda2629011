#include "transport/ses/memory_region.h"

namespace spray::ses {

Status MemoryRegionTable::add(const MemoryRegion& r) {
  if (r.addr == nullptr && r.length != 0) return Status::kInvalidArgument;
  if (by_key_.find(r.key)) return Status::kInvalidArgument;
  const auto slot = regions_.acquire();
  if (!slot) return Status::kAgain;
  regions_[*slot] = r;
  by_key_.insert(r.key, *slot);
  return Status::kOk;
}

Status MemoryRegionTable::remove(uint64_t key) {
  const auto slot = by_key_.find(key);
  if (!slot) return Status::kBadKey;
  by_key_.erase(key);
  regions_.release(*slot);
  return Status::kOk;
}

Status MemoryRegionTable::resolve(uint64_t key, uint64_t address, uint64_t length, uint32_t need,
                                  uint8_t*& out) const {
  const auto slot = by_key_.find(key);
  if (!slot) return Status::kBadKey;
  const MemoryRegion& r = regions_[*slot];
  if ((r.access & need) != need) return Status::kAccessDenied;
  // Overflow-safe form of: base <= address && address + length <= base + r.length.
  if (address < r.base_address) return Status::kOutOfBounds;
  const uint64_t offset = address - r.base_address;
  if (offset > r.length || length > r.length - offset) return Status::kOutOfBounds;
  out = r.addr + offset;
  return Status::kOk;
}

}  // namespace spray::ses
