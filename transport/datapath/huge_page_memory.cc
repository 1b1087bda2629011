// Huge-page mappings and page warming (see huge_page_memory.h).
#include "transport/datapath/huge_page_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>

namespace spray::dp {
namespace {

size_t whole_huge_pages(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

std::span<uint8_t> map_for_huge_pages(size_t bytes) {
  // Map one huge page more than needed and trim both ends to a 2 MiB boundary: mmap only
  // promises 4 KiB alignment, and a huge page needs an aligned 2 MiB range.
  const size_t size = whole_huge_pages(bytes);
  void* raw = ::mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(raw, aligned - start);
  if (const uintptr_t end = start + size + kHugePageBytes; end > aligned + size) {
    ::munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  }
  auto* data = reinterpret_cast<uint8_t*>(aligned);
  (void)::madvise(data, size, MADV_HUGEPAGE);  // EINVAL with THP off: small pages then
  return {data, size};
}

void unmap_for_huge_pages(uint8_t* data, size_t bytes) {
  if (data != nullptr) ::munmap(data, whole_huge_pages(bytes));
}

void warm_pages(uint8_t* data, size_t bytes) {
  constexpr size_t kPage = 4096;
  for (size_t i = 0; i < bytes; i += kPage) data[i] = 0;
  const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (zero < 0) return;
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::read(zero, data + done, bytes - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(zero);
}

}  // namespace spray::dp
