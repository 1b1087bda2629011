// The congestion-control interface that PDS consults (DESIGN.md decision 5).
//
// One instance per PDC, owned by that PDC. PDS calls it once per ACK, NACK or timeout
// (never per transmitted packet) and asks window_bytes() before sending. Algorithms
// are pure: time arrives in the signals. Each algorithm lives in its own file and is
// chosen by name through make_congestion_control().
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>

#include "transport/base/time.h"

namespace spray::cc {

struct CcConfig {
  uint32_t mtu_bytes = 4096;
  Duration base_rtt = Duration::microseconds(10);  // unloaded round-trip time
  double line_rate_gbps = 100.0;
  // Target queuing delay above base_rtt; NSCC grows while below it.
  Duration target_delay = Duration::microseconds(5);
  uint32_t fixed_window_bytes = 0;  // fixed-window algorithm; 0: one BDP

  // Bandwidth-delay product: Gbit/s x ps / 8000 = bytes, rounded to the nearest byte.
  uint32_t bdp_bytes() const {
    const double b = std::round(line_rate_gbps * static_cast<double>(base_rtt.ps) / 8000.0);
    return b < mtu_bytes ? mtu_bytes : static_cast<uint32_t>(b);
  }
};

// What an ACK tells the sender, for the newly acknowledged bytes it covers.
struct AckSignal {
  Time now{};
  uint32_t acked_bytes = 0;  // bytes newly acknowledged by this ACK
  Duration rtt{};            // sample from the packet that triggered the ACK; 0 if none
  bool ecn_marked = false;   // that packet crossed a congested queue
  // RCCC: the window the receiver grants this sender (its share of the receiver's
  // bandwidth-delay product); 0 when the ACK carries no credit.
  uint32_t credit_bytes = 0;
};

enum class NackKind : uint8_t {
  kTrimmed,  // a switch cut the payload: the queue overflowed
  kOther,    // the receiver refused the packet for want of resources
};

class CongestionControl {
 public:
  virtual ~CongestionControl() = default;

  virtual void on_ack(const AckSignal& s) = 0;
  virtual void on_nack(NackKind kind, Time now) = 0;
  virtual void on_timeout(Time now) = 0;

  // Bytes the PDC may have in flight.
  virtual uint32_t window_bytes() const = 0;
  // Minimum gap between two packet transmissions; zero when the window alone governs.
  virtual Duration pacing_gap() const { return {}; }
  // True for receiver-credit algorithms: PDS then tells the receiver its backlog in
  // every request, and the receiver answers with credit in its ACKs.
  virtual bool wants_credit() const { return false; }
  virtual std::string_view name() const = 0;
};

// Names: "nscc" (default), "rccc" (receiver credit alone), "nscc_rccc" (both: the
// smaller window wins), "dcqcn" (RoCE's rate-based baseline), "fixed". Returns nullptr
// for an unknown name.
std::unique_ptr<CongestionControl> make_congestion_control(std::string_view name,
                                                           const CcConfig& config);

}  // namespace spray::cc
