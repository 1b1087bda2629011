#include "collectives/scratch_buffer.h"

namespace spray::coll {

uint8_t* ScratchBuffer::get(size_t bytes) {
  if (bytes <= capacity_) return data_;
  release();
  if (bytes < kHugeFrom) {
    data_ = new uint8_t[bytes];
    capacity_ = bytes;
    return data_;
  }
  const std::span<uint8_t> m = dp::map_for_huge_pages(bytes);
  data_ = m.data();
  capacity_ = m.size();
  mapped_ = true;
  return data_;
}

void ScratchBuffer::release() {
  if (mapped_) {
    dp::unmap_for_huge_pages(data_, capacity_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = false;
}

}  // namespace spray::coll
