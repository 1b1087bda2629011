#include "congestion/cc/nscc.h"

#include <algorithm>

namespace spray::cc {

Nscc::Nscc(const CcConfig& c)
    : cfg_(c),
      cwnd_(static_cast<double>(c.bdp_bytes())),
      min_cwnd_(static_cast<double>(c.mtu_bytes)),
      max_cwnd_(1.5 * static_cast<double>(c.bdp_bytes())) {}

void Nscc::clamp() {
  cwnd_ = std::clamp(cwnd_, min_cwnd_, max_cwnd_);
}

void Nscc::on_ack(const AckSignal& s) {
  // Epochs of one base RTT measure the delivered rate quick_adapt falls back to.
  if (s.now - epoch_start_ >= cfg_.base_rtt) {
    acked_last_epoch_ = acked_in_epoch_;
    acked_in_epoch_ = 0;
    epoch_start_ = s.now;
  }
  acked_in_epoch_ += s.acked_bytes;

  if (s.rtt.ps <= 0) {  // no delay sample: treat as an unloaded network
    if (!s.ecn_marked) cwnd_ += kProportionalGain * s.acked_bytes;
    clamp();
    return;
  }
  const Duration delay = std::max(Duration{}, s.rtt - cfg_.base_rtt);
  const double target = static_cast<double>(cfg_.target_delay.ps);
  const double d = static_cast<double>(delay.ps);
  const double acked = static_cast<double>(s.acked_bytes);

  const bool near_empty =
      !s.ecn_marked && delay.ps < cfg_.target_delay.ps / kFastIncreaseDelayDivisor;
  if (!near_empty || uncongested_bytes_ == 0) run_start_window_ = cwnd_;
  // A whole window (as it was when the run began) of them: a round trip's worth.
  const bool fast = near_empty && uncongested_bytes_ >= run_start_window_;
  uncongested_bytes_ = near_empty ? uncongested_bytes_ + acked : 0;
  if (!s.ecn_marked) {
    if (fast) {
      cwnd_ += kFastIncreaseGain * acked;
    } else if (d < target) {
      cwnd_ += kProportionalGain * acked * (target - d) / target;
    } else {
      cwnd_ += static_cast<double>(cfg_.mtu_bytes) * acked / cwnd_;
    }
  } else if (d >= target && s.now - last_decrease_ >= cfg_.base_rtt) {
    const double excess = (d - target) / std::max(d, 1.0);  // in [0, 1)
    cwnd_ *= 1.0 - kMultiplicativeDecreaseGain * std::max(excess, 0.1);
    last_decrease_ = s.now;
  }
  clamp();
}

void Nscc::quick_adapt(Time now, bool timeout) {
  uncongested_bytes_ = 0;
  if (now - last_decrease_ < cfg_.base_rtt) return;
  const auto delivered = static_cast<double>(std::max(acked_in_epoch_, acked_last_epoch_));
  if (delivered > 0) {
    cwnd_ = std::min(cwnd_, delivered);
  } else if (timeout) {
    cwnd_ = min_cwnd_;
  }
  last_decrease_ = now;
  clamp();
}

void Nscc::on_nack(NackKind, Time now) {
  quick_adapt(now, false);
}
void Nscc::on_timeout(Time now) {
  quick_adapt(now, true);
}

}  // namespace spray::cc
