// UET over UDP: the destination port and where the entropy value travels.
//
// Switches and kernels hash the UDP 5-tuple for ECMP, so the entropy value (EV) a
// packet should take rides in the UDP source port. The destination port is UET's
// registered 4793 unless configured otherwise. How an EV becomes a source port is the
// UDP datapath's business (transport/datapath/udp/udp_datapath.h).
#pragma once

#include <cstdint>

namespace spray::wire {

inline constexpr uint16_t kUetUdpPort = 4793;

}  // namespace spray::wire
