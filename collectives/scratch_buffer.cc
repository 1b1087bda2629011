#include "collectives/scratch_buffer.h"

#include <new>

namespace spray::coll {

uint8_t* ScratchBuffer::get(size_t bytes) {
  if (bytes <= capacity_) return data_;
  release();
  if (bytes < kHugeFrom) {
    auto* page =
        static_cast<uint8_t*>(::operator new (kPageOffset + bytes, std::align_val_t{kPage}));
    data_ = page + kPageOffset;
    capacity_ = bytes;
    return data_;
  }
  const std::span<uint8_t> m = dp::map_for_huge_pages(kPageOffset + bytes);
  data_ = m.data() + kPageOffset;
  capacity_ = m.size() - kPageOffset;
  mapped_ = true;
  return data_;
}

void ScratchBuffer::release() {
  if (data_ == nullptr) return;
  uint8_t* start = data_ - kPageOffset;
  if (mapped_) {
    dp::unmap_for_huge_pages(start, kPageOffset + capacity_);
  } else {
    ::operator delete (start, std::align_val_t{kPage});
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = false;
}

}  // namespace spray::coll
