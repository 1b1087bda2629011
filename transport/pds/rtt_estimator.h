// Smoothed round-trip time and the retransmission timeout derived from it (RFC 6298).
//
// One per PDC. Samples come only from packets sent once (Karn's rule: the caller
// filters retransmitted ones). Until the first sample the RTO is the configured initial
// value; afterwards it is SRTT + 4 * RTTVAR, clamped to [min_rto, max_rto]. Why adaptive:
// a fixed RTO tuned for an idle loopback (hundreds of microseconds) fires on every packet
// when the same code runs slowed down (sanitizers, more processes than cores, a queue
// building at a congested port), and each spurious timeout resends a window.
#pragma once

#include <algorithm>

#include "transport/base/time.h"

namespace spray::pds {

class RttEstimator {
 public:
  // `rtt` is one round-trip sample, > 0.
  void on_sample(Duration rtt) {
    if (!have_sample_) {
      srtt_ = rtt;
      rttvar_ = rtt / 2;
      min_rtt_ = rtt;
      have_sample_ = true;
      return;
    }
    min_rtt_ = std::min(min_rtt_, rtt);
    const Duration error{rtt.ps > srtt_.ps ? rtt.ps - srtt_.ps : srtt_.ps - rtt.ps};
    rttvar_ = (rttvar_ * 3 + error) / 4;  // beta = 1/4
    srtt_ = (srtt_ * 7 + rtt) / 8;        // alpha = 1/8
  }

  // The timeout before any backoff.
  Duration rto(Duration initial, Duration min_rto, Duration max_rto) const {
    if (!have_sample_) return std::clamp(initial, min_rto, max_rto);
    return std::clamp(srtt_ + rttvar_ * 4, min_rto, max_rto);
  }

  bool has_sample() const { return have_sample_; }
  Duration srtt() const { return srtt_; }
  // The smallest sample so far (0 before the first): what no answer to a packet can beat.
  Duration min_rtt() const { return min_rtt_; }

 private:
  Duration srtt_{};
  Duration min_rtt_{};
  Duration rttvar_{};
  bool have_sample_ = false;
};

}  // namespace spray::pds
