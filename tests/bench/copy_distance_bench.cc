// Copy speed against where the destination sits relative to the source (Google
// Benchmark): 256 KiB copied by glibc's memcpy and by process_vm_readv (the kernel's copy
// for single-copy reads between processes of one host; here from this process to itself,
// which takes the same path), with the destination `distance` bytes past the source
// modulo 4 KiB. Both copy with `rep movsb` at this size on CPUs with ERMS/FSRM, which on
// the AMD EPYC of 2026-11-28 ran 3-5x slower when the destination lay 1
// to 31 bytes ahead (2026-11-28: memcpy 2.4-2.8 against 12-19 GB/s, process_vm_readv
// 1.2-1.9 against 5.5-6.5). That is why the collectives' scratch memory starts half a page
// into a page (collectives/scratch_buffer.h): a caller's large malloc'd buffer starts 16
// bytes in, and scratch at 0 put copies from scratch into it exactly 16 bytes ahead.
// Compare the rows of one run: distance 16 against 0 and 2048. Not every EPYC suffers:
// on 2026-12-06's (family 25, model 17) memcpy ran 37-50 GB/s and process_vm_readv
// 10-12.5 at every distance, while copy_bytes ran 16.8 GB/s at distance 16 until its
// pieces stopped being copied with `rep movsq` (44 after), and a read through the bounce
// buffer 9.6 against 12.2 GB/s direct, which is why the shared-memory datapath measures
// which way to read (transport/datapath/shm/short_distance_reads.h).
#include <benchmark/benchmark.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "transport/base/copy_bytes.h"
#include "transport/datapath/huge_page_memory.h"

namespace {

constexpr size_t kBytes = 256 << 10;
constexpr size_t kPage = 4096;

// Two page-aligned buffers, the source at the start of its page and the destination
// `distance` bytes into its own (so destination - source = distance modulo 4 KiB).
class Buffers {
 public:
  explicit Buffers(size_t distance)
      : src_base_(allocate()), dst_base_(allocate()), dst_(dst_base_ + distance) {
    std::memset(src_base_, 1, kBytes + kPage);
    std::memset(dst_base_, 0, kBytes + kPage);
  }
  ~Buffers() {
    ::operator delete (src_base_, std::align_val_t{kPage});
    ::operator delete (dst_base_, std::align_val_t{kPage});
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  const uint8_t* src() const { return src_base_; }
  uint8_t* dst() const { return dst_; }

 private:
  static uint8_t* allocate() {
    return static_cast<uint8_t*>(::operator new (kBytes + kPage, std::align_val_t{kPage}));
  }
  uint8_t* src_base_;
  uint8_t* dst_base_;
  uint8_t* dst_;
};

// The benchmark loop: `copy(buffers)` over buffers at the case's distance, kBytes a
// time. `copy` returns false when the kernel refused a read, which ends the case.
template <typename Copy>
void time_copies(benchmark::State& state, Copy copy) {
  Buffers b(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    if (!copy(b)) {
      state.SkipWithError("process_vm_readv failed (ptrace rules or seccomp?)");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

// kBytes from `from` to `to` by the kernel's cross-memory copy, this process reading
// itself as a peer would.
bool read_from_self(uint8_t* to, const uint8_t* from) {
  iovec local{to, kBytes};
  iovec remote{const_cast<uint8_t*>(from), kBytes};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(kBytes);
}

void BM_Memcpy(benchmark::State& state) {
  time_copies(state, [](Buffers& b) {
    std::memcpy(b.dst(), b.src(), kBytes);
    return true;
  });
}

void BM_ProcessVmReadv(benchmark::State& state) {
  time_copies(state, [](Buffers& b) { return read_from_self(b.dst(), b.src()); });
}

// spray's copy for payloads (transport/base/copy_bytes.h): memcpy, or 2 KiB pieces at
// the slow distances.
void BM_CopyBytes(benchmark::State& state) {
  time_copies(state, [](Buffers& b) {
    spray::copy_bytes(b.dst(), b.src(), kBytes);
    return true;
  });
}

// A cross-memory read the way the shared-memory datapath makes one through its bounce
// buffer (ShmDatapath::read_peer_memory): the kernel's copy into a page-aligned buffer
// (distance 0), then copy_bytes to the destination. Beside BM_ProcessVmReadv at the same
// distance it shows which way this CPU reads faster (short_distance_reads.h decides so).
void BM_ProcessVmReadvBounced(benchmark::State& state) {
  Buffers bounce(0);
  time_copies(state, [&bounce](Buffers& b) {
    if (!read_from_self(bounce.dst(), b.src())) return false;
    spray::copy_bytes(b.dst(), bounce.dst(), kBytes);
    return true;
  });
}

// The same read as BM_ProcessVmReadv at distance 0, from a source on transparent huge
// pages (transport/datapath/huge_page_memory.h) instead of the heap's 4 KiB pages: the
// kernel pins the source page by page, so this is what a sender's buffer on huge pages
// saves its receivers (fi_spray.7, FI_SPRAY_DATAPATH). Where THP is off it reads as the
// heap case.
void BM_ProcessVmReadvFromHugePages(benchmark::State& state) {
  spray::dp::WarmHugePages source(kBytes);
  std::memset(source.data(), 1, kBytes);
  time_copies(state, [&source](Buffers& b) { return read_from_self(b.dst(), source.data()); });
}

// Distances: aligned, the slow window (16: scratch at 0 into a malloc'd buffer), its
// edge (32), and half a page (what the collectives' scratch keeps).
BENCHMARK(BM_Memcpy)->ArgName("distance")->Arg(0)->Arg(16)->Arg(32)->Arg(2048);
BENCHMARK(BM_CopyBytes)->ArgName("distance")->Arg(0)->Arg(16)->Arg(32)->Arg(2048);
BENCHMARK(BM_ProcessVmReadv)->ArgName("distance")->Arg(0)->Arg(16)->Arg(32)->Arg(2048);
BENCHMARK(BM_ProcessVmReadvBounced)->ArgName("distance")->Arg(0)->Arg(16);
BENCHMARK(BM_ProcessVmReadvFromHugePages)->ArgName("distance")->Arg(0);

}  // namespace

BENCHMARK_MAIN();
