// ScratchBuffer: memory a collective call works in (incoming pieces, partial results),
// kept by the communicator between calls so that repeated calls neither allocate nor
// fault pages in. It only grows; the old contents are not kept when it does.
//
// Large buffers are backed by transparent huge pages where the kernel allows it
// (mapped 2 MiB-aligned, MADV_HUGEPAGE). Why: between processes of one host, the
// providers read a message straight from the sender's memory (process_vm_readv), and
// the kernel pins the source one page at a time for that. Pinning 4 KiB pages took about
// half of such a read; from a huge page the same 256 KiB read took half the time. So an
// algorithm that sends from scratch memory (a partial result, a staged copy) is cheaper
// to read from than the caller's malloc'd buffer. Small buffers stay on the heap: rounding
// them up to 2 MiB would waste more than it saves. The first touch of a huge-page buffer
// may stall while the kernel compacts memory for it (THP defrag "madvise", Debian's
// default); that is paid once per growth, since the buffer is kept.
//
// Where in its page the memory starts: kPageOffset (2 KiB) past a page boundary, heap or
// mapping. Why: on some of this project's machines (an AMD EPYC with FSRM, 2026-11-28) a
// `rep movsb` copy whose destination lies 1 to 31 bytes past its source, modulo 4 KiB,
// ran 3-5x slower than any other (a /tmp microbenchmark, 2026-11-28, 256 KiB copies:
// process_vm_readv 1.2-1.9 against 5.5-6.5 GB/s; glibc's memcpy, which uses rep movsb at that
// size, 2.4-2.8 against 12-19; not so on 2026-12-06's EPYC, another model, where the offset costs
// nothing). The kernel copies with rep movsb, so every process_vm_readv between
// this buffer and a caller's buffer pays it when the two sit so. Large malloc'd buffers
// start 16 bytes into a page (glibc's mmapped chunks) and aligned ones at 0: a buffer
// starting at 0 would put copies from it into such a buffer exactly 16 bytes ahead. Half
// a page keeps both directions, to both kinds, far from that window; and scratch of one
// rank to scratch of another sits at distance 0, which is fast.
#pragma once

#include <cstddef>
#include <cstdint>

// The mapping (map_for_huge_pages) is the datapath's: a memory helper with no transport
// in it, shared so that both lay out huge pages alike.
#include "transport/datapath/huge_page_memory.h"

namespace spray::coll {

class ScratchBuffer {
 public:
  // From this size up, buffers are huge-page backed (and rounded up to 2 MiB).
  static constexpr size_t kHugeFrom = size_t{512} << 10;
  static constexpr size_t kHugePage = dp::kHugePageBytes;
  // Every buffer starts this far past a 4 KiB page boundary (see above).
  static constexpr size_t kPage = 4096;
  static constexpr size_t kPageOffset = kPage / 2;

  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { release(); }

  // At least `bytes` of uninitialised memory; valid until the next larger request.
  // Throws std::bad_alloc when the memory cannot be had.
  uint8_t* get(size_t bytes);
  size_t capacity() const { return capacity_; }
  // Whether the memory was mapped for huge pages (the kernel may still back it with
  // small ones, e.g. when THP is off or memory is fragmented).
  bool huge_page_backed() const { return mapped_; }

 private:
  void release();

  uint8_t* data_ = nullptr;  // kPageOffset into the allocation
  size_t capacity_ = 0;      // bytes from data_ on
  bool mapped_ = false;      // mmap'ed (munmap to free), else operator new'ed (page-aligned)
};

}  // namespace spray::coll
