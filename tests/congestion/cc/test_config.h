// The congestion-control configuration the CC unit tests share: 4 KiB packets, a
// 10 us base RTT, 5 us target delay, 100 Gbit/s (BDP = 125000 bytes).
#pragma once

#include "congestion/cc/congestion_control.h"

namespace spray::cc {

inline CcConfig test_config() {
  CcConfig c;
  c.mtu_bytes = 4096;
  c.base_rtt = Duration::microseconds(10);
  c.target_delay = Duration::microseconds(5);
  c.line_rate_gbps = 100;
  return c;
}

}  // namespace spray::cc
