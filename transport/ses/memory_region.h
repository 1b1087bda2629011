// Registered memory that remote peers may read or write, addressed by a memory key.
//
// A region covers [base_address, base_address + length) in the address space the
// initiator names: base_address is 0 for offset-based addressing, or the buffer's
// virtual address when the user wants virtual addressing (FI_MR_VIRT_ADDR). Every
// remote access is checked against the key, the access rights and the bounds before a
// byte moves.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/base/flat_map.h"
#include "transport/base/slot_pool.h"
#include "transport/base/status.h"

namespace spray::ses {

namespace access {
inline constexpr uint32_t kRemoteRead = 0x1;
inline constexpr uint32_t kRemoteWrite = 0x2;
}  // namespace access

struct MemoryRegion {
  uint8_t* addr = nullptr;
  uint64_t length = 0;
  uint64_t base_address = 0;
  uint64_t key = 0;
  uint32_t access = 0;
};

class MemoryRegionTable {
 public:
  explicit MemoryRegionTable(uint32_t capacity) : regions_(capacity), by_key_(capacity) {}

  // kInvalidArgument for a duplicate key or a null address with a length;
  // kAgain when the table is full.
  Status add(const MemoryRegion& r);
  Status remove(uint64_t key);

  // Checks key, rights and bounds of [address, address + length). On success `out`
  // points at the first byte.
  Status resolve(uint64_t key, uint64_t address, uint64_t length, uint32_t need,
                 uint8_t*& out) const;

  uint32_t size() const { return regions_.used(); }

 private:
  SlotPool<MemoryRegion> regions_;
  FlatMap by_key_;
};

}  // namespace spray::ses
