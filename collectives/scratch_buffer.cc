#include "collectives/scratch_buffer.h"

#include <sys/mman.h>

#include <new>

namespace spray::coll {

uint8_t* ScratchBuffer::get(size_t bytes) {
  if (bytes <= capacity_) return data_;
  release();
  if (bytes < kHugeFrom) {
    data_ = new uint8_t[bytes];
    capacity_ = bytes;
    return data_;
  }
  // Map one huge page more than needed and trim both ends to a 2 MiB boundary: mmap only
  // promises 4 KiB alignment, and a huge page needs an aligned 2 MiB range.
  const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* raw =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  if (const uintptr_t end = start + size + kHugePage; end > aligned + size) {
    munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  }
  data_ = reinterpret_cast<uint8_t*>(aligned);
  capacity_ = size;
  mapped_ = true;
  // Advice only: with THP off (EINVAL) the buffer works the same on small pages.
  (void)madvise(data_, size, MADV_HUGEPAGE);
  return data_;
}

void ScratchBuffer::release() {
  if (mapped_) {
    munmap(data_, capacity_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = false;
}

}  // namespace spray::coll
