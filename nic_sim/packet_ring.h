// PacketRing: a fixed-size FIFO of packet buffer pointers: a NIC's receive ring.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/datapath/datapath.h"

namespace spray::sim {

class PacketRing {
 public:
  explicit PacketRing(size_t slots) : ring_(slots) {}

  // False when full: the caller drops the packet, as a NIC with no descriptor would.
  bool push(dp::PacketBuf* b) {
    if (count_ == ring_.size()) return false;
    ring_[(head_ + count_) % ring_.size()] = b;
    ++count_;
    return true;
  }
  size_t pop(dp::PacketBuf** out, size_t n) {
    size_t i = 0;
    for (; i < n && count_ > 0; ++i) {
      out[i] = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    return i;
  }
  size_t size() const { return count_; }

 private:
  std::vector<dp::PacketBuf*> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace spray::sim
