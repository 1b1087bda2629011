#include "congestion/cc/dcqcn.h"

#include <algorithm>

namespace spray::cc {

Dcqcn::Dcqcn(const CcConfig& c)
    : line_(c.line_rate_gbps),
      rate_(c.line_rate_gbps),
      target_(c.line_rate_gbps),
      additive_(c.line_rate_gbps / 200),  // 40 Gbit/s line: 0.2, the paper's 40 Mbit/s x 5
      window_(2 * c.bdp_bytes()),
      mtu_(c.mtu_bytes) {}

void Dcqcn::catch_up(Time now) {
  if (!started_) {
    started_ = true;
    next_alpha_ = now + kAlphaPeriod;
    next_increase_ = now + kIncreasePeriod;
    return;
  }
  while (now >= next_alpha_) {  // no notification in this period: alpha decays
    if (now - last_cnp_ >= kAlphaPeriod) alpha_ *= 1 - kG;
    next_alpha_ += kAlphaPeriod;
  }
  while (now >= next_increase_) {
    ++increase_steps_;
    if (increase_steps_ > kFastRecoverySteps) {
      // Additive, then (after another five steps) hyper increase of the target.
      const int beyond = increase_steps_ - kFastRecoverySteps;
      target_ = std::min(line_, target_ + additive_ * (beyond > kFastRecoverySteps ? beyond : 1));
    }
    rate_ = std::min(line_, (rate_ + target_) / 2);
    next_increase_ += kIncreasePeriod;
  }
}

void Dcqcn::on_congestion(Time now) {
  if (now - last_cnp_ < kCnpInterval) return;  // one notification per interval
  last_cnp_ = now;
  target_ = rate_;
  rate_ = std::max(line_ / 1000, rate_ * (1 - alpha_ / 2));
  alpha_ = (1 - kG) * alpha_ + kG;
  increase_steps_ = 0;
  next_increase_ = now + kIncreasePeriod;
}

void Dcqcn::on_ack(const AckSignal& s) {
  catch_up(s.now);
  if (s.ecn_marked) on_congestion(s.now);
}

void Dcqcn::on_nack(NackKind kind, Time now) {
  catch_up(now);
  if (kind == NackKind::kTrimmed) on_congestion(now);  // a trim is congestion, as a mark
}

void Dcqcn::on_timeout(Time now) {
  catch_up(now);
  on_congestion(now);
}

Duration Dcqcn::pacing_gap() const {
  if (rate_ >= line_) return {};
  return serialization_time(mtu_, rate_);
}

}  // namespace spray::cc
