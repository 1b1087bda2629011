// Bare loopback UDP sockets that move whole messages with the kernel's batching at its
// best: a message leaves as UDP GSO super-datagrams in one sendmmsg and lands by GRO in
// pieces of up to 64 KiB. No transport (no headers, no acknowledgements): what the
// kernel alone costs, for the ceilings spray-dp-bench measures (plain_udp_pingpong.h,
// plain_stream.h).
#pragma once

#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace spray::tools {

using BenchClock = std::chrono::steady_clock;

inline constexpr size_t kMaxUdpPayload = 65507;  // 65535 - IPv4 header - UDP header
inline constexpr size_t kMaxGsoSegments = 64;    // UDP_MAX_SEGMENTS on older kernels
inline constexpr size_t kMaxPieces = 64;         // super-datagrams per message: 4 MiB at 64 KiB

// One side: a bound, non-blocking socket with GRO and large buffers, and its peer.
struct UdpSide {
  int fd = -1;
  sockaddr_in peer{};
};

// A non-blocking UDP socket bound to 127.0.0.1 (any port), GRO on, 8 MiB buffers asked
// for (the kernel caps them at net.core.{r,w}mem_max). -1 and `error` on failure.
int open_loopback_udp(std::string& error);

sockaddr_in local_address_of(int fd);

// Two such sockets, each with the other as its peer. false and `error` (nothing left
// open) on failure.
bool open_loopback_pair(UdpSide& a, UdpSide& b, std::string& error);

// How a message is cut: `piece` bytes per super-datagram (whole datagrams), the last
// one shorter. Both sides compute the same, so a receiver can place each piece at its
// offset without reading anything first.
struct MessageCut {
  size_t bytes = 0;
  size_t datagram = 0;
  size_t piece = 0;
  size_t pieces() const { return bytes == 0 ? 1 : (bytes + piece - 1) / piece; }
  size_t length(size_t k) const { return std::min(piece, bytes - k * piece); }
};

// The cut of a `bytes` message into `datagram`-byte datagrams (clamped to what UDP
// carries), as many per super-datagram as fit in one UDP payload.
MessageCut cut_message(size_t bytes, uint32_t datagram);

// The whole message in one sendmmsg, retried while the send buffer is full; false on
// another error or past `deadline`.
bool send_message(const UdpSide& s, const MessageCut& cut, const uint8_t* data,
                  BenchClock::time_point deadline);

}  // namespace spray::tools
