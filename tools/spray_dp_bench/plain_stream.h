// The kernel's ceilings for a one-way stream of messages between two processes on
// loopback, with nothing of a transport on top:
//   - TCP: one connection, each message written whole and read whole;
//   - UDP: each message leaves as GSO super-datagrams in one sendmmsg and lands by GRO
//     (plain_udp_messages.h); what the receiver's socket cannot hold is dropped, not
//     resent, so the figure is the most the kernel delivers.
// Any transport over kernel UDP streams at most the UDP figure; spray's streaming is
// compared with it, and with the TCP figure, in one run (scripts/mpi-compare.sh).
//
// Why the two are close on loopback: the loopback device hands a packet to the receiving
// socket in the sending CPU's softirq, so the sending core pays its copy from the
// application and the whole receive path of the stack, and it is that core that bounds
// either stream. The receiver's own work is its copy out of the socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace spray::tools {

enum class StreamKind { kTcp, kUdp };

struct StreamResult {
  double megabytes_per_s = 0;  // 10^6 bytes per second, as fi_pingpong and MPI benches
  uint64_t bytes = 0;          // delivered in the measured interval
  double seconds = 0;          // the measured interval, from the first byte received
  // The sending process's CPU time (user + system, its CPU-time clock) in the
  // measured interval, as a share of the interval: 1.0 is one core busy throughout. The
  // sender blocks when the socket is full rather than spin, so this is work, not waiting;
  // on loopback it includes the receive path the sender's softirq runs for the receiver.
  double sender_busy = 0;
  // The sender's CPU time per delivered megabyte (10^6 bytes), in microseconds: what the
  // kernel charges the sending core for each byte that arrives.
  double sender_us_per_mb = 0;
};

// Streams `message_bytes` messages for `seconds` (after the first byte arrives), the
// sender cycling through 16 message buffers and the receiver through 16 more, as a
// benchmark with 16 messages in flight does. `datagram`: UDP payload per datagram. Returns
// nullopt and fills `error` when the sockets cannot be set up or nothing arrives within
// 5 s. The sending process is killed at the end; no load outlives the call. Where the
// sender's CPU-time clock cannot be read, the sender's figures stay 0.
std::optional<StreamResult> plain_stream(StreamKind kind, size_t message_bytes, uint32_t datagram,
                                         double seconds, std::string& error);

}  // namespace spray::tools
