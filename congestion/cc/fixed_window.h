// A fixed window: no reaction to congestion at all. The fallback when congestion
// control is unwanted (a lossless testbed, a benchmark of the transport alone).
#pragma once

#include "congestion/cc/congestion_control.h"

namespace spray::cc {

class FixedWindow final : public CongestionControl {
 public:
  explicit FixedWindow(const CcConfig& c)
      : window_(c.fixed_window_bytes ? c.fixed_window_bytes : c.bdp_bytes()) {}

  void on_ack(const AckSignal&) override {}
  void on_nack(NackKind, Time) override {}
  void on_timeout(Time) override {}
  uint32_t window_bytes() const override { return window_; }
  std::string_view name() const override { return "fixed"; }

 private:
  uint32_t window_;
};

}  // namespace spray::cc
