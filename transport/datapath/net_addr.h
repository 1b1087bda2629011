// NetAddr: where an engine lives on the network, as every datapath understands it.
//
// IPv4 or IPv6 address plus UDP port, or a simulator host id (family kSim, id in
// `port`-independent `ip` bytes). Fixed size and trivially copyable so it can key hash
// maps and travel in packet descriptors without allocation.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <string>

namespace spray::dp {

struct NetAddr {
  enum class Family : uint8_t { kNone = 0, kIpv4 = 4, kIpv6 = 6, kSim = 0x51, kVerbs = 0x1b };

  Family family = Family::kNone;
  uint16_t port = 0;             // host byte order (UDP)
  uint32_t qpn = 0;              // verbs: the UD queue pair number
  std::array<uint8_t, 16> ip{};  // IPv4 in the first 4 bytes; verbs GID; sim host id

  static NetAddr sim_host(uint32_t host) {
    NetAddr a;
    a.family = Family::kSim;
    a.ip[0] = static_cast<uint8_t>(host >> 24);
    a.ip[1] = static_cast<uint8_t>(host >> 16);
    a.ip[2] = static_cast<uint8_t>(host >> 8);
    a.ip[3] = static_cast<uint8_t>(host);
    return a;
  }
  uint32_t sim_host_id() const {
    return (uint32_t{ip[0]} << 24) | (uint32_t{ip[1]} << 16) | (uint32_t{ip[2]} << 8) | ip[3];
  }

  // Computed once per received packet (peer lookup): two word loads and a multiply-mix.
  uint64_t hash() const {
    uint64_t lo = 0, hi = 0;
    std::memcpy(&lo, ip.data(), 8);
    std::memcpy(&hi, ip.data() + 8, 8);
    uint64_t h = lo * 0x9e3779b97f4a7c15ULL ^
                 (hi + (uint64_t{qpn} << 24 | uint64_t{port} << 8 | static_cast<uint64_t>(family)));
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
  }

  // 127.0.0.0/8 or ::1: an address that never leaves the host (the loopback device
  // reaches it, by one path).
  bool is_loopback() const {
    if (family == Family::kIpv4) return ip[0] == 127;
    if (family != Family::kIpv6) return false;
    for (size_t i = 0; i < 15; ++i) {
      if (ip[i] != 0) return false;
    }
    return ip[15] == 1;
  }

  std::string to_string() const;

  friend bool operator==(const NetAddr&, const NetAddr&) = default;
};

// IP and UDP header bytes in front of each UDP payload (no IP options, no IPv6 extension
// headers): what a datagram's UET bytes leave of an IP MTU.
constexpr uint32_t ip_udp_header_bytes(bool ipv6) {
  return (ipv6 ? 40 : 20) + 8;
}
// The UET bytes a standard 1500-byte IP packet carries (1472, IPv6 1452): the datagram
// size where no interface can be asked (DPDK, a tool's default).
constexpr uint32_t standard_udp_payload_bytes(bool ipv6) {
  return 1500 - ip_udp_header_bytes(ipv6);
}

// UDP-based datapaths (kernel UDP, DPDK) give each endpoint `entropy_ports` consecutive
// ports from a base that is a multiple of entropy_ports (a power of two), and send each
// packet from base + EV mod entropy_ports. A receiver splits a source port back into the
// sender's base (its name) and the EV.
struct SourcePort {
  uint16_t base = 0;
  uint16_t entropy = 0;
};
inline SourcePort split_source_port(uint16_t port, uint16_t entropy_ports) {
  const auto mask = static_cast<uint16_t>(entropy_ports - 1);
  return {static_cast<uint16_t>(port & ~mask), static_cast<uint16_t>(port & mask)};
}

}  // namespace spray::dp
