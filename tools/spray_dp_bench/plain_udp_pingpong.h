// The kernel-UDP ceiling for a message ping-pong: two processes on loopback bounce one
// message of `bytes` back and forth over plain UDP sockets, with nothing of a transport
// (no headers, no acknowledgements, no copy out of a receive buffer) and the kernel's
// batching at its best: a message leaves as UDP GSO super-datagrams in one sendmmsg and
// lands by GRO straight in the receiver's message buffer. A transport over kernel UDP
// cannot move a message faster than this; fi-pingpong-compare prints it beside tcp and
// spray so the distance to the ceiling is measured in the same run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace spray::tools {

struct PingpongResult {
  double one_way_us = 0;       // half the mean round trip
  double megabytes_per_s = 0;  // bytes / one_way_us (fi_pingpong's MB/s: 10^6 bytes)
};

// `iterations` round trips after one warm-up. `datagram` is the UDP payload per
// datagram (8972 matches spray's default on loopback: a 9000-byte jumbo frame). Returns
// nullopt and fills `error` when the sockets cannot be set up or a round trip does not
// finish within `timeout_s` (a datagram was dropped: the socket buffers are too small).
std::optional<PingpongResult> plain_udp_pingpong(size_t bytes, uint32_t datagram, int iterations,
                                                 double timeout_s, std::string& error);

}  // namespace spray::tools
