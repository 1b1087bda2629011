// The ECN field: the low two bits of IPv4's type of service and IPv6's traffic class
// (RFC 3168). Spray's datapaths send ECT(0) and report CE, which a congested switch sets
// instead of dropping, to congestion control (PacketBuf::kEcnCe).
#pragma once

#include <cstdint>

namespace spray::dp::ecn {

inline constexpr uint8_t kMask = 0x03;
inline constexpr uint8_t kEct0 = 0x02;  // ECN-capable transport (0): what we send
inline constexpr uint8_t kCe = 0x03;    // congestion experienced

inline bool congestion_experienced(uint32_t tos_or_traffic_class) {
  return (tos_or_traffic_class & kMask) == kCe;
}

}  // namespace spray::dp::ecn
