// ReplayWindow: which transmit security counters (TSCs) one source has already used
// towards us, so that a recorded packet sent again is refused.
//
// A sender's TSC to one destination only grows (one per packet, retransmissions
// included), but packets sprayed over several paths arrive out of order. So the window
// remembers the highest TSC accepted and, of the kSpan TSCs below it, which arrived.
// A TSC above the highest is fresh; one kSpan or more below it is refused as too old
// (a reordering that deep is treated as loss: PDS sends the packet again, under a new
// TSC). Check with fresh() before authenticating, accept() only after, so that a forged
// packet cannot move the window.
#pragma once

#include <array>
#include <cstdint>

namespace spray::tss {

class ReplayWindow {
 public:
  static constexpr uint64_t kSpan = 2048;  // TSCs, a multiple of 64

  bool fresh(uint64_t tsc) const {
    if (!any_ || tsc > highest_) return true;
    if (highest_ - tsc >= kSpan) return false;
    return !test(tsc);
  }

  void accept(uint64_t tsc) {
    if (!any_) {
      any_ = true;
      highest_ = tsc;
    } else if (tsc > highest_) {
      // The TSCs between the old highest and this one have not arrived (yet).
      if (tsc - highest_ >= kSpan) {
        bits_.fill(0);
      } else {
        for (uint64_t t = highest_ + 1; t < tsc; ++t) clear(t);
      }
      highest_ = tsc;
    }
    set(tsc);
  }

 private:
  bool test(uint64_t tsc) const { return (bits_[(tsc % kSpan) / 64] >> (tsc % 64)) & 1; }
  void set(uint64_t tsc) { bits_[(tsc % kSpan) / 64] |= uint64_t{1} << (tsc % 64); }
  void clear(uint64_t tsc) { bits_[(tsc % kSpan) / 64] &= ~(uint64_t{1} << (tsc % 64)); }

  std::array<uint64_t, kSpan / 64> bits_{};  // bit (tsc % kSpan): arrived
  uint64_t highest_ = 0;                     // highest TSC accepted, when any_
  bool any_ = false;
};

}  // namespace spray::tss
