// PacketPool: packet buffers of one size from one arena, for datapaths that own their
// memory (kernel UDP, the simulated fabric). Fixed count, fixed size, a free list; the
// arena is allocated once and left uninitialized, so untouched buffers cost no memory.
// The simulated fabric shares one pool among its NICs, so a packet moves from sender to
// receiver by pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/datapath/datapath.h"

namespace spray::dp {

class PacketPool {
 public:
  // `headroom` bytes before each buffer's data are reserved for the datapath (verbs
  // receives land a 40-byte GRH there).
  PacketPool(uint32_t count, uint32_t buffer_bytes, uint32_t headroom = 0)
      : buffer_bytes_(buffer_bytes),
        stride_(buffer_bytes + headroom),
        arena_(new uint8_t[size_t{count} * stride_]),
        bufs_(count) {
    free_.reserve(count);
    for (uint32_t i = count; i-- > 0;) {
      bufs_[i].data = arena_.get() + size_t{i} * stride_ + headroom;
      bufs_[i].capacity = buffer_bytes;
      bufs_[i].owner_tag = i;
      free_.push_back(&bufs_[i]);
    }
  }

  dp::PacketBuf* alloc() {
    if (free_.empty()) return nullptr;
    dp::PacketBuf* b = free_.back();
    free_.pop_back();
    b->len = 0;
    b->flags = 0;
    b->entropy = 0;
    b->payload = nullptr;
    b->payload_len = 0;
    return b;
  }
  void release(dp::PacketBuf* b) { free_.push_back(b); }
  uint32_t available() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t capacity() const { return static_cast<uint32_t>(bufs_.size()); }
  uint32_t buffer_bytes() const { return buffer_bytes_; }
  bool owns(const dp::PacketBuf* b) const {
    return b >= bufs_.data() && b < bufs_.data() + bufs_.size();
  }
  // The whole arena, for datapaths that register it with a NIC.
  uint8_t* arena() { return arena_.get(); }
  size_t arena_bytes() const { return size_t{capacity()} * stride_; }

 private:
  uint32_t buffer_bytes_;
  uint32_t stride_;  // headroom + buffer_bytes
  std::unique_ptr<uint8_t[]> arena_;
  std::vector<dp::PacketBuf> bufs_;
  std::vector<dp::PacketBuf*> free_;
};

}  // namespace spray::dp
