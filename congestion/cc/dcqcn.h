// DCQCN (Zhu et al., SIGCOMM 2015): the rate-based congestion control of RoCEv2 NICs,
// here as the baseline UET's algorithms are compared against.
//
// Congestion notification: a switch ECN-marks, the receiver tells the sender (RoCE
// sends a CNP; here the ACK's ECN echo plays that part), at most one notification per
// kCnpInterval per flow. On a notification the sender remembers its rate as the target
// (Rt = Rc), cuts its current rate (Rc *= 1 - alpha/2) and raises alpha. Without
// notifications alpha decays every kAlphaPeriod, and every kIncreasePeriod the rate
// recovers: five fast-recovery steps halfway back to the target, then additive
// increase of the target, then hyper increase.
//
// Rate-based: the window is generous (two BDPs, so it never binds at the rate) and
// pacing_gap() spaces packets at the current rate. Time only arrives with the signals,
// so the periodic updates are applied on each ACK for the periods that have passed.
#pragma once

#include "congestion/cc/congestion_control.h"

namespace spray::cc {

class Dcqcn final : public CongestionControl {
 public:
  explicit Dcqcn(const CcConfig& c);

  void on_ack(const AckSignal& s) override;
  void on_nack(NackKind kind, Time now) override;
  void on_timeout(Time now) override;
  uint32_t window_bytes() const override { return window_; }
  Duration pacing_gap() const override;
  std::string_view name() const override { return "dcqcn"; }

  double rate_gbps() const { return rate_; }
  double target_gbps() const { return target_; }
  double alpha() const { return alpha_; }

  static constexpr Duration kCnpInterval = Duration::microseconds(50);
  static constexpr Duration kAlphaPeriod = Duration::microseconds(55);
  static constexpr Duration kIncreasePeriod = Duration::microseconds(55);
  static constexpr double kG = 1.0 / 256;  // alpha's gain
  static constexpr int kFastRecoverySteps = 5;

 private:
  void on_congestion(Time now);
  void catch_up(Time now);  // the periodic updates due since the last signal

  double line_;    // Gbit/s
  double rate_;    // Rc, Gbit/s
  double target_;  // Rt, Gbit/s
  double alpha_ = 1.0;
  double additive_;  // R_AI, Gbit/s
  uint32_t window_;
  uint32_t mtu_;
  int increase_steps_ = 0;  // since the last cut
  Time last_cnp_{-1'000'000'000'000};
  Time next_alpha_{};
  Time next_increase_{};
  bool started_ = false;
};

}  // namespace spray::cc
