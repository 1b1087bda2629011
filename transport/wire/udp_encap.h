// UET over UDP: the destination port and where the entropy value travels.
//
// Switches and kernels hash the UDP 5-tuple for ECMP, so the entropy value (EV) a
// packet should take rides in the UDP source port. The destination port is UET's
// registered 4793 unless configured otherwise.
#pragma once

#include <cstdint>

namespace spray::wire {

inline constexpr uint16_t kUetUdpPort = 4793;

// Maps an entropy value onto a UDP source port inside [base, base + count).
constexpr uint16_t entropy_to_source_port(uint16_t entropy, uint16_t base, uint16_t count) {
  return static_cast<uint16_t>(base + (count ? entropy % count : 0));
}

}  // namespace spray::wire
