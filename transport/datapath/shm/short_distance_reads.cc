// The measurement behind bounce_short_distance_reads.
#include "transport/datapath/shm/short_distance_reads.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "transport/base/copy_bytes.h"

namespace spray::dp {
namespace {

constexpr size_t kProbeBytes = size_t{128} << 10;
constexpr size_t kProbeDistance = 16;  // a caller's malloc'd buffer against a page-aligned one
// Tries each way, taken in turn so that drift on a shared machine hits both alike; the
// best of each counts (a preempted try is only slower).
constexpr int kTries = 8;
// The bounce must win by this factor. Where the kernel's copy suffers at short distances
// the bounce won by 2-5x (2026-11-28); where it does not, the bounce lost by 1.2x in
// these tries (2026-12-06), and with fewer tries, not in turn, noise once made it look
// faster (one process of six).
constexpr double kBounceMargin = 0.75;

// Reads `bytes` from `from` into `to` through the kernel, as from a peer (this process
// is its own peer). False if the kernel refuses.
bool kernel_read(uint8_t* to, const uint8_t* from, size_t bytes) {
  iovec local{to, bytes};
  iovec remote{const_cast<uint8_t*>(from), bytes};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
}

// How long `read` took (ns), or infinity if it failed.
template <typename Read>
double time_ns(Read read) {
  const auto start = std::chrono::steady_clock::now();
  if (!read()) return std::numeric_limits<double>::infinity();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

bool measure() {
  // Three page-aligned areas: the source, the bounce buffer (at the source's offset: 0)
  // and the destination, kProbeDistance bytes into its page. Written first, so that no
  // try pays for page faults.
  constexpr size_t kArea = kProbeBytes + kCopyPage;
  const auto memory = std::make_unique<uint8_t[]>(3 * kArea + kCopyPage);
  uint8_t* const source =
      memory.get() + (kCopyPage - reinterpret_cast<uintptr_t>(memory.get()) % kCopyPage);
  uint8_t* const bounce = source + kArea;
  uint8_t* const destination = bounce + kArea + kProbeDistance;
  std::memset(source, 1, 3 * kArea);
  const auto direct_read = [&] { return kernel_read(destination, source, kProbeBytes); };
  const auto bounced_read = [&] {
    if (!kernel_read(bounce, source, kProbeBytes)) return false;
    copy_bytes(destination, bounce, kProbeBytes);
    return true;
  };
  if (!direct_read()) return true;  // refused: there will be no reads to speed up
  double direct = std::numeric_limits<double>::infinity(), bounced = direct;
  for (int i = 0; i < kTries; ++i) {
    direct = std::min(direct, time_ns(direct_read));
    bounced = std::min(bounced, time_ns(bounced_read));
  }
  return bounced < kBounceMargin * direct;
}

}  // namespace

bool bounce_short_distance_reads() {
  static const bool bounce = measure();
  return bounce;
}

}  // namespace spray::dp
