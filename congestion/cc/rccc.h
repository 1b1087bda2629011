// RCCC: UET's receiver-credit congestion control, for incast. The receiver knows how
// many senders want to send to it (each request carries the sender's backlog), so it
// divides its own bandwidth-delay product among them and grants each that window in
// its ACKs; a sender keeps at most its granted window in flight. The credit comes back
// with the ACKs of the data it allowed, so grants are clocked at the receiver's line
// rate, and the receiver's queue stays near empty however many senders there are.
//
// Rccc: the granted window alone (before the first grant, one BDP, so a lone flow
// starts at line rate). NsccRccc: both algorithms, the smaller window wins — NSCC
// handles congestion inside the fabric, RCCC the receiver's last hop.
#pragma once

#include <algorithm>

#include "congestion/cc/congestion_control.h"
#include "congestion/cc/nscc.h"

namespace spray::cc {

class Rccc final : public CongestionControl {
 public:
  explicit Rccc(const CcConfig& c)
      : share_(c.bdp_bytes()), mtu_(c.mtu_bytes), base_rtt_(c.base_rtt) {}

  void on_ack(const AckSignal& s) override {
    if (s.credit_bytes > 0) share_ = s.credit_bytes;
  }
  void on_nack(NackKind, Time) override {}  // the receiver's grants already account for it
  void on_timeout(Time) override {}
  // The granted share, but at least one packet...
  uint32_t window_bytes() const override { return std::max(share_, mtu_); }
  // ...and when the share is below one packet per base RTT (more senders than the
  // receiver's BDP holds packets), one packet every MTU / share base RTTs: the rate
  // stays share / base RTT, and all senders together still fill, not flood, the link.
  Duration pacing_gap() const override {
    if (share_ >= mtu_) return {};
    return Duration::picoseconds(base_rtt_.ps * mtu_ / std::max<uint32_t>(share_, 1));
  }
  bool wants_credit() const override { return true; }
  std::string_view name() const override { return "rccc"; }

 private:
  uint32_t share_;  // bytes in flight the receiver grants per base RTT
  uint32_t mtu_;
  Duration base_rtt_;
};

class NsccRccc final : public CongestionControl {
 public:
  explicit NsccRccc(const CcConfig& c) : nscc_(c), rccc_(c) {}

  void on_ack(const AckSignal& s) override {
    nscc_.on_ack(s);
    rccc_.on_ack(s);
  }
  void on_nack(NackKind kind, Time now) override { nscc_.on_nack(kind, now); }
  void on_timeout(Time now) override { nscc_.on_timeout(now); }
  uint32_t window_bytes() const override {
    return std::min(nscc_.window_bytes(), rccc_.window_bytes());
  }
  Duration pacing_gap() const override { return rccc_.pacing_gap(); }
  bool wants_credit() const override { return true; }
  std::string_view name() const override { return "nscc_rccc"; }

 private:
  Nscc nscc_;
  Rccc rccc_;
};

}  // namespace spray::cc
