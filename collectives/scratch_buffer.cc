#include "collectives/scratch_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace spray::coll {

namespace {

constexpr size_t kHugePage = ScratchBuffer::kHugePage;

size_t whole_huge_pages(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kHugePage - 1) / kHugePage * kHugePage;
}

}  // namespace

std::span<uint8_t> map_for_huge_pages(size_t bytes) {
  // Map one huge page more than needed and trim both ends to a 2 MiB boundary: mmap only
  // promises 4 KiB alignment, and a huge page needs an aligned 2 MiB range.
  const size_t size = whole_huge_pages(bytes);
  void* raw =
      mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  if (const uintptr_t end = start + size + kHugePage; end > aligned + size) {
    munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  }
  auto* data = reinterpret_cast<uint8_t*>(aligned);
  (void)madvise(data, size, MADV_HUGEPAGE);  // EINVAL with THP off: small pages then
  return {data, size};
}

void unmap_for_huge_pages(uint8_t* data, size_t bytes) {
  if (data != nullptr) munmap(data, whole_huge_pages(bytes));
}

uint8_t* ScratchBuffer::get(size_t bytes) {
  if (bytes <= capacity_) return data_;
  release();
  if (bytes < kHugeFrom) {
    data_ = new uint8_t[bytes];
    capacity_ = bytes;
    return data_;
  }
  const std::span<uint8_t> m = map_for_huge_pages(bytes);
  data_ = m.data();
  capacity_ = m.size();
  mapped_ = true;
  return data_;
}

void ScratchBuffer::release() {
  if (mapped_) {
    unmap_for_huge_pages(data_, capacity_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  mapped_ = false;
}

}  // namespace spray::coll
