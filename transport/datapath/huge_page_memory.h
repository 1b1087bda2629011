// Memory for buffers that a process reuses for its whole life: mapped 2 MiB-aligned and
// advised for transparent huge pages, and warmed (every page accessed once from user mode
// and once by the kernel) before the fast path sees it.
//
// Why huge pages: the kernel pins and walks memory page by page (process_vm_readv pins
// its source 4 KiB at a time; a 256 KiB read from a huge page took half the time), and a
// huge page is one TLB entry.
//
// Why warm: on the PVM guests this project runs on, the first access to each page by a
// process is far slower than later ones even after the page is populated, and an access
// from user mode and one by the kernel on the process's behalf (recvmmsg writing a
// receive buffer) are first accesses apart: 8 MiB of small pages took 5 ms to touch after
// MAP_POPULATE (later touches 20 us), then 4.8 ms for the kernel's first write into them
// (later 0.45 ms). On huge pages the kernel's first write took 0.26-0.40 ms. A receive
// buffer first used in the middle of a transfer costs its sender a round trip's worth of
// time; warmed at setup it costs nothing later. Warm only what will be used, though:
// warming all 74 MB of a UDP packet pool as well made a 1 MiB all-reduce's steady state
// twice as slow (730 against 350 us), presumably the hypervisor's cache of mappings.
//
// The huge-page advice is only advice: with THP off or memory fragmented the mapping
// works the same on small pages (and warming them matters more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace spray::dp {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Anonymous private memory for at least `bytes` (rounded up to whole 2 MiB pages),
// 2 MiB-aligned and advised for transparent huge pages. Throws std::bad_alloc.
std::span<uint8_t> map_for_huge_pages(size_t bytes);
// Frees what map_for_huge_pages(bytes) returned, given its data and the same `bytes`.
void unmap_for_huge_pages(uint8_t* data, size_t bytes);

// Accesses every page of [data, data + bytes) once from user mode (a write: the contents
// are not kept) and once by the kernel (a read from /dev/zero into it: the range ends
// zeroed). Best effort: without /dev/zero only the user-mode half is done.
void warm_pages(uint8_t* data, size_t bytes);

// Owns one map_for_huge_pages mapping, warmed when it is made.
class WarmHugePages {
 public:
  WarmHugePages() = default;
  explicit WarmHugePages(size_t bytes) : memory_(map_for_huge_pages(bytes)), bytes_(bytes) {
    warm_pages(memory_.data(), memory_.size());
  }
  WarmHugePages(const WarmHugePages&) = delete;
  WarmHugePages& operator=(const WarmHugePages&) = delete;
  ~WarmHugePages() { unmap_for_huge_pages(memory_.data(), bytes_); }

  uint8_t* data() const { return memory_.data(); }

 private:
  std::span<uint8_t> memory_;
  size_t bytes_ = 0;  // as asked for; memory_ is rounded up
};

}  // namespace spray::dp
