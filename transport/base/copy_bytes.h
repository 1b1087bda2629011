// copy_bytes: memcpy for payloads, without the one slow case of long copies on the CPUs
// this project runs on. Header-only and free of transport types: the provider and the
// collectives copy the application's data with it too.
//
// glibc's memcpy copies long blocks (past about 2 KiB) with one `rep movsb`, as the kernel
// does for every copy to or from user memory on CPUs with ERMS/FSRM. On AMD EPYC (Zen) that
// instruction runs several times slower when the destination lies a few bytes past the
// source modulo 4 KiB, the loads waiting on stores they only seem to depend on:
// tests/bench/copy_distance_bench measured 256 KiB at 2.6 against 40 GB/s at distance 16
// (2026-11-28), while copies in pieces of 2 KiB, which glibc does with vector loads and
// stores, ran 32 GB/s at the same distance. On 2026-12-06's second EPYC (family 25, model 1)
// every memcpy from 4 KiB to just under 512 KiB ran 2.6 GB/s at distance 16 against 30-90
// at 0 (glibc 2.36 leaves rep movsb from the L2 size up). Where a payload lands relative
// to where it sits is not ours to choose (the application's buffer, a packet's place in a
// receive buffer), so copies at such a distance go in pieces and all others as one memcpy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace spray {

inline constexpr size_t kCopyPage = 4096;
// Distances (destination - source, modulo kCopyPage) from 1 to this - 1 are the slow
// ones: 1-31 measured slow, 32 and up fast; 64 leaves a margin.
inline constexpr size_t kShortCopyDistance = 64;
// Piece length for those: below glibc's rep movsb threshold (2112 bytes with FSRM, more
// without), so each piece is copied by vector instructions.
inline constexpr size_t kCopyPiece = 2048;

// Whether a long copy from `src` to `dst` is one of the slow ones.
inline bool short_copy_distance(const void* dst, const void* src) {
  const uintptr_t distance =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) % kCopyPage;
  return distance != 0 && distance < kShortCopyDistance;
}

// Whether one memcpy (or one copy by the kernel) of `n` bytes from `src` to `dst` would be
// one of the slow ones: longer than a piece, at a short distance.
inline bool copy_is_slow(const void* dst, const void* src, size_t n) {
  return n > kCopyPiece && short_copy_distance(dst, src);
}

// memcpy(dst, src, n); the ranges must not overlap.
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (!copy_is_slow(dst, src, n)) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  for (size_t done = 0; done < n; done += kCopyPiece) {
    size_t piece = std::min(kCopyPiece, n - done);
    // Hides the piece's bound from the compiler: knowing it is at most kCopyPiece, GCC
    // copied it inline with `rep movsq`, slow at these distances as `rep movsb` is,
    // rather than calling glibc (copy_distance_bench, distance 16: 16.8 GB/s, and 44
    // through glibc; 2026-12-06).
    asm("" : "+r"(piece));
    std::memcpy(to + done, from + done, piece);
  }
}

// memmove(dst, src, n): ranges that overlap go to memmove, all others to copy_bytes. For
// copies between two of the application's buffers, which are distinct by contract but
// which we do not trust to be.
inline void move_bytes(void* dst, const void* src, size_t n) {
  const auto to = reinterpret_cast<uintptr_t>(dst), from = reinterpret_cast<uintptr_t>(src);
  if (to < from + n && from < to + n) {
    std::memmove(dst, src, n);
    return;
  }
  copy_bytes(dst, src, n);
}

}  // namespace spray
