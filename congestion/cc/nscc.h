// NSCC: UET's network-signal-based, sender-side congestion control (window-based).
//
// On each ACK the sender knows two signals: whether the acknowledged packet was ECN
// marked, and the queuing delay it saw (RTT minus base RTT). The four combinations:
//
//   no ECN, delay <  target  -> proportional increase: grow by acked * (target-delay)/target
//                               (fast when queues are empty, gentle as they fill);
//                               fast increase once a whole window was acknowledged with
//                               queues near empty (delay < target/8, no mark): grow by
//                               kFastIncreaseGain * acked, to take back bandwidth freed
//                               after a cut (a finished incast, a repaired link) in a
//                               few RTTs rather than many
//   no ECN, delay >= target  -> fair increase: about one MTU per window of ACKs
//   ECN,    delay >= target  -> multiplicative decrease, at most once per base RTT,
//                               by a factor that grows with the excess delay
//   ECN,    delay <  target  -> hold: the mark is stale or transient
//
// Quick adapt: a trim, a NACK or a timeout means the network is already overloaded, so
// the window drops to what was actually delivered in the last base RTT (at most once
// per base RTT). A timeout also drops to one MTU if nothing was delivered.
//
// Entropy change on ECN is the path selector's half of NSCC (CC and paths are separate
// interfaces, DESIGN.md decision 5): PDS reports the marked EV to it, and REPS stops
// recycling that EV while "ecmp_repath" moves its single EV elsewhere.
//
// DESIGN NOTES: the UET spec tunes gains from the link speed and base RTT; these are
// the spec's shapes with gains kept as named constants, not its exact fixed-point math.
#pragma once

#include "congestion/cc/congestion_control.h"

namespace spray::cc {

class Nscc final : public CongestionControl {
 public:
  explicit Nscc(const CcConfig& c);

  void on_ack(const AckSignal& s) override;
  void on_nack(NackKind kind, Time now) override;
  void on_timeout(Time now) override;
  uint32_t window_bytes() const override { return static_cast<uint32_t>(cwnd_); }
  std::string_view name() const override { return "nscc"; }

  // Exposed for tests and tracing.
  uint32_t min_window() const { return static_cast<uint32_t>(min_cwnd_); }
  uint32_t max_window() const { return static_cast<uint32_t>(max_cwnd_); }

 private:
  void quick_adapt(Time now, bool timeout);
  void clamp();

  static constexpr double kMultiplicativeDecreaseGain = 0.5;  // max cut per base RTT
  static constexpr double kProportionalGain = 1.0;            // at zero delay: x2 per RTT
  static constexpr double kFastIncreaseGain = 3.0;            // x4 per RTT
  static constexpr int64_t kFastIncreaseDelayDivisor = 8;     // "near empty": target / 8

  CcConfig cfg_;
  double cwnd_;      // bytes
  double min_cwnd_;  // one MTU
  double max_cwnd_;  // 1.5 BDP: enough to fill the pipe while queues drain
  Time last_decrease_{-1'000'000'000'000};
  Time epoch_start_{};
  uint64_t acked_in_epoch_ = 0;  // bytes acknowledged since epoch_start_
  uint64_t acked_last_epoch_ = 0;
  double uncongested_bytes_ = 0;  // acknowledged in a row with queues near empty
  double run_start_window_ = 0;   // the window when that run began
};

}  // namespace spray::cc
