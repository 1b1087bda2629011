// The Ethernet frames a kernel-bypass endpoint builds and checks itself: Ethernet /
// IPv4 / UDP or Ethernet / IPv6 / UDP around each UET packet, and the ARP (IPv4) or
// neighbour discovery (IPv6, RFC 4861) that lets kernel peers find us.
//
// Pure functions on bytes (no EAL, no mbufs), so they are unit-tested and fuzzed on their
// own. All multi-byte fields on the wire are big-endian; every address and port in these
// structs is in host byte order.
#pragma once

#include <cstdint>
#include <cstring>

#include "transport/datapath/dpdk/neighbour_table.h"

namespace spray::dp {

inline constexpr uint32_t kEthernetHeaderBytes = 14;
inline constexpr uint32_t kIpv4HeaderBytes = 20;  // we send no IP options
inline constexpr uint32_t kUdpHeaderBytes = 8;
inline constexpr uint32_t kFrameHeaderBytes =
    kEthernetHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;
inline constexpr uint32_t kIpv6HeaderBytes = 40;  // we send no extension headers
inline constexpr uint32_t kFrame6HeaderBytes =
    kEthernetHeaderBytes + kIpv6HeaderBytes + kUdpHeaderBytes;
inline constexpr uint32_t kArpFrameBytes = kEthernetHeaderBytes + 28;
inline constexpr uint32_t kMaxIpMtu = 9000;  // jumbo frames

// The headers in front of each UET packet in a frame of the given IP version.
constexpr uint32_t frame_header_bytes(bool ipv6) {
  return ipv6 ? kFrame6HeaderBytes : kFrameHeaderBytes;
}

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

struct Udp6FrameAddresses {
  MacAddress src_mac{};
  MacAddress dst_mac{};
  IpBytes src_ip{};
  IpBytes dst_ip{};
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
};

// The IPv6 form: writes kFrame6HeaderBytes of headers at `frame`, the payload already in
// place behind them. Sets ECT(0) in the traffic class, and a flow label drawn from the
// addresses and ports (RFC 6437), so that switches that hash the flow label rather than
// the ports still spread a sender's entropy values over paths. The UDP checksum is
// always set (IPv6 has no "no checksum"); kOffloadToDevice seeds it with the
// pseudo-header sum.
void write_udp6_frame(uint8_t* frame, const Udp6FrameAddresses& a, uint32_t payload_bytes,
                      Checksums checksums);

enum class FrameKind : uint8_t {
  kUdpForUs,            // a UDP datagram to our address and port: payload_* valid
  kArp,                 // an ARP packet (for handle_arp)
  kNotForUs,            // another protocol, MAC, address or port
  kMalformed,           // truncated or inconsistent lengths, IP fragments, bad ARP
  kBadChecksum,         // IPv4 header or UDP checksum wrong, or an IPv6 UDP checksum of zero
  kNeighbourDiscovery,  // an ICMPv6 neighbour solicitation or advertisement to our address
                        // or its solicited-node group (for parse_neighbour_discovery)
  kMldQuery,            // IPv6 with hop-by-hop options to all nodes, our group or us: an MLD
                        // query if parse_mld_query (mld_frame.h) takes it
};

// Small on purpose: parsed once per received frame. An IPv6 source is left in the frame
// (src_ip6_at) rather than copied here: with 16 more bytes GCC zeroed and copied the
// struct with `rep stos` and `rep movs`, 10 % of a 64-byte frame's receive.
struct ParsedFrame {
  FrameKind kind = FrameKind::kMalformed;
  uint32_t payload_offset = 0;  // from the frame start
  uint32_t payload_bytes = 0;
  uint32_t src_ip = 0;      // IPv4 frames
  uint16_t src_ip6_at = 0;  // IPv6 frames: where the 16-byte source address starts
  uint16_t src_port = 0;
  bool ecn_ce = false;  // congestion experienced
};

// The source address of an IPv6 frame that parse_frame accepted.
inline IpBytes source_ip6(const uint8_t* frame, const ParsedFrame& p) {
  IpBytes ip;
  std::memcpy(ip.data(), frame + p.src_ip6_at, ip.size());
  return ip;
}

struct FrameFilter {
  MacAddress mac{};
  uint32_t ip = 0;
  uint16_t udp_port = 0;
  bool ip_checksum_checked = false;   // the NIC verified the IPv4 header checksum
  bool udp_checksum_checked = false;  // the NIC verified the UDP checksum
  // An IPv6 endpoint takes IPv6 frames to `ip6` (and neighbour discovery) and nothing of
  // IPv4 or ARP; an IPv4 one the reverse.
  bool ipv6 = false;
  IpBytes ip6{};
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

// IPv6 neighbour discovery: a solicitation asks who holds `target_ip`; the holder
// advertises it with its link-layer (MAC) address. We send both with exactly one
// link-layer address option, in kNeighbourFrameBytes.
inline constexpr uint32_t kNeighbourFrameBytes = kEthernetHeaderBytes + kIpv6HeaderBytes + 32;
struct NeighbourMessage {
  bool is_solicitation = false;  // otherwise an advertisement
  IpBytes source_ip{};           // the IPv6 source; all zero in duplicate address detection
  IpBytes target_ip{};           // the address asked about, or advertised
  MacAddress link_mac{};         // a solicitation's source or an advertisement's target
  bool has_link_mac = false;     // link-layer address option, when the message had one
  bool override_cached = false;  // an advertisement's O flag: its MAC replaces a cached one
};
// False unless the frame is a neighbour solicitation or advertisement that RFC 4861's
// validity checks accept: hop limit 255, ICMPv6 code 0 and checksum right, length enough,
// no option of length zero or past the end, no multicast target, and a solicitation
// from the unspecified address carries no link-layer option.
bool parse_neighbour_discovery(const uint8_t* frame, uint32_t length, NeighbourMessage& out);
// Multicast to the target's solicited-node group (ff02::1:ffXX:XXXX).
void write_neighbour_solicitation(uint8_t* frame, const MacAddress& our_mac, const IpBytes& our_ip,
                                  const IpBytes& target_ip);
// Solicited flag set; our MAC in the target link-layer option. The override flag is set
// unless `override_cached` is false (what a proxy or an anycast address sends; we own our
// address and always override, and tests clear it).
void write_neighbour_advertisement(uint8_t* frame, const MacAddress& our_mac, const IpBytes& our_ip,
                                   const MacAddress& to_mac, const IpBytes& to_ip,
                                   bool override_cached = true);
// ff02::1:ff00:0/104 with the low 24 bits of `ip`: where solicitations for `ip` go.
IpBytes solicited_node_group(const IpBytes& ip);
// 33:33 and the low 32 bits of an IPv6 multicast group (RFC 2464).
MacAddress ipv6_multicast_mac(const IpBytes& group);

}  // namespace spray::dp
