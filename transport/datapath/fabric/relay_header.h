// The header every datagram between a process and spray-fabric (the software switch
// fabric daemon, tools/spray_fabric) starts with; the UET packet follows it.
//
// A process sends each packet to the daemon with the header naming the packet's
// destination (the UDP address the destination process is bound to) and the entropy
// value it chose; the daemon carries it over its simulated fabric (queues, paths chosen
// by the EV, ECN, trimming, seeded faults) and hands it to the destination process with
// the header naming the source instead, the EV as sent, and what the fabric did to it
// (trimmed, CE-marked). Neither side trusts the other's bytes: decode() checks all.
//
// Layout (28 bytes, network byte order):
//   0  'S' 'F'    magic
//   2  version    kRelayVersion
//   3  flags      PacketBuf flags (kTrimmed, kEcnCe); 0 from a process
//   4  entropy    the EV (u16)
//   6  port       the other end's UDP port (u16)
//   8  family     4 or 6
//   9  reserved   3 bytes, zero
//  12  ip         16 bytes; an IPv4 address in the first 4
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/datapath/net_addr.h"

namespace spray::dp {

inline constexpr uint32_t kRelayHeaderBytes = 28;
inline constexpr uint8_t kRelayVersion = 1;

struct RelayHeader {
  NetAddr other;  // process to daemon: the destination; daemon to process: the source
  uint16_t entropy = 0;
  uint8_t flags = 0;
};

// Writes `h` into out[0, kRelayHeaderBytes).
inline void encode_relay_header(const RelayHeader& h, uint8_t* out) {
  out[0] = 'S';
  out[1] = 'F';
  out[2] = kRelayVersion;
  out[3] = h.flags;
  out[4] = static_cast<uint8_t>(h.entropy >> 8);
  out[5] = static_cast<uint8_t>(h.entropy);
  out[6] = static_cast<uint8_t>(h.other.port >> 8);
  out[7] = static_cast<uint8_t>(h.other.port);
  out[8] = static_cast<uint8_t>(h.other.family);
  out[9] = out[10] = out[11] = 0;
  std::memcpy(out + 12, h.other.ip.data(), 16);
}

// Reads the header of a datagram of `len` bytes: false when it is too short, of another
// protocol or version, or names an address that is neither IPv4 nor IPv6.
inline bool decode_relay_header(const uint8_t* in, size_t len, RelayHeader& h) {
  if (len < kRelayHeaderBytes || in[0] != 'S' || in[1] != 'F' || in[2] != kRelayVersion)
    return false;
  const auto family = static_cast<NetAddr::Family>(in[8]);
  if (family != NetAddr::Family::kIpv4 && family != NetAddr::Family::kIpv6) return false;
  h.flags = in[3];
  h.entropy = static_cast<uint16_t>(in[4] << 8 | in[5]);
  h.other = NetAddr{};
  h.other.family = family;
  h.other.port = static_cast<uint16_t>(in[6] << 8 | in[7]);
  std::memcpy(h.other.ip.data(), in + 12, family == NetAddr::Family::kIpv4 ? 4 : 16);
  return true;
}

}  // namespace spray::dp
