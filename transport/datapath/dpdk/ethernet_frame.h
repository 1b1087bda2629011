// The Ethernet frames a kernel-bypass endpoint builds and checks itself: Ethernet /
// IPv4 / UDP around each UET packet, and the ARP that lets kernel peers find us.
//
// Pure functions on bytes (no EAL, no mbufs), so they are unit-tested and fuzzed on their
// own. All multi-byte fields on the wire are big-endian; every address and port in these
// structs is in host byte order.
#pragma once

#include <cstdint>

#include "transport/datapath/dpdk/neighbour_table.h"

namespace spray::dp {

inline constexpr uint32_t kEthernetHeaderBytes = 14;
inline constexpr uint32_t kIpv4HeaderBytes = 20;  // we send no IP options
inline constexpr uint32_t kUdpHeaderBytes = 8;
inline constexpr uint32_t kFrameHeaderBytes =
    kEthernetHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;
inline constexpr uint32_t kArpFrameBytes = kEthernetHeaderBytes + 28;
inline constexpr uint32_t kMaxIpMtu = 9000;  // jumbo frames

struct UdpFrameAddresses {
  MacAddress src_mac{};
  MacAddress dst_mac{};
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
};

enum class Checksums {
  kSoftware,         // compute IPv4 and UDP checksums here
  kOffloadToDevice,  // leave the IPv4 checksum 0 and seed UDP with the pseudo-header sum
};

// Writes the kFrameHeaderBytes of headers at `frame`; the payload of `payload_bytes`
// must already be in place right after them (the UDP checksum covers it). Sets ECT(0)
// and Don't Fragment.
void write_udp_frame(uint8_t* frame, const UdpFrameAddresses& a, uint32_t payload_bytes,
                     Checksums checksums);

enum class FrameKind : uint8_t {
  kUdpForUs,     // a UDP datagram to our address and port: payload_* valid
  kArp,          // an ARP packet (for handle_arp)
  kNotForUs,     // another protocol, MAC, address or port
  kMalformed,    // truncated or inconsistent lengths, IP fragments, bad ARP
  kBadChecksum,  // IPv4 header or UDP checksum wrong
};

struct ParsedFrame {
  FrameKind kind = FrameKind::kMalformed;
  uint32_t payload_offset = 0;  // from the frame start
  uint32_t payload_bytes = 0;
  uint32_t src_ip = 0;
  uint16_t src_port = 0;
  bool ecn_ce = false;  // congestion experienced
};

struct FrameFilter {
  MacAddress mac{};
  uint32_t ip = 0;
  uint16_t udp_port = 0;
  bool ip_checksum_checked = false;   // the NIC verified the IPv4 header checksum
  bool udp_checksum_checked = false;  // the NIC verified the UDP checksum
};

ParsedFrame parse_frame(const uint8_t* frame, uint32_t length, const FrameFilter& us);

// ARP. An ARP frame is always kArpFrameBytes long.
struct ArpMessage {
  bool is_request = false;
  MacAddress sender_mac{};
  uint32_t sender_ip = 0;
  uint32_t target_ip = 0;
};
// False when the frame is not a well-formed Ethernet/IPv4 ARP request or reply.
bool parse_arp(const uint8_t* frame, uint32_t length, ArpMessage& out);
void write_arp_request(uint8_t* frame, const MacAddress& our_mac, uint32_t our_ip,
                       uint32_t target_ip);
void write_arp_reply(uint8_t* frame, const MacAddress& our_mac, uint32_t our_ip,
                     const MacAddress& to_mac, uint32_t to_ip);

}  // namespace spray::dp
