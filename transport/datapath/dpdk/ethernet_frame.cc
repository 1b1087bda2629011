#include "transport/datapath/dpdk/ethernet_frame.h"

#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "transport/datapath/dpdk/internet_checksum.h"
#include "transport/datapath/ecn.h"

namespace spray::dp {
namespace {

constexpr uint8_t kTtl = 64;

// MAC fields are copied byte-wise: DPDK's ARP structs are packed, so no references.
void put_mac(void* to, const MacAddress& from) {
  std::memcpy(to, from.data(), from.size());
}
MacAddress get_mac(const void* from) {
  MacAddress m{};
  std::memcpy(m.data(), from, m.size());
  return m;
}

void write_ethernet(uint8_t* frame, const MacAddress& dst, const MacAddress& src,
                    uint16_t ether_type) {
  auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
  put_mac(&eth->dst_addr, dst);
  put_mac(&eth->src_addr, src);
  eth->ether_type = rte_cpu_to_be_16(ether_type);
}
constexpr uint8_t kNeighbourHopLimit = 255;  // RFC 4861: proves the sender is on our link
constexpr uint8_t kIcmpv6NeighbourSolicitation = 135;
constexpr uint8_t kIcmpv6NeighbourAdvertisement = 136;
constexpr uint8_t kOptionSourceLinkAddress = 1;
constexpr uint8_t kOptionTargetLinkAddress = 2;
constexpr uint8_t kAdvertisementSolicited = 0x40;  // S flag: answers a solicitation
constexpr uint8_t kAdvertisementOverride = 0x20;   // O flag: replaces a cached MAC
constexpr uint32_t kNeighbourMessageBytes = 24;    // type .. target, no options
constexpr uint32_t kIpv6At = kEthernetHeaderBytes;
constexpr uint32_t kL4At6 = kEthernetHeaderBytes + kIpv6HeaderBytes;

// IPv6 version 6, traffic class, flow label: the first 32 bits of its header.
uint32_t ipv6_first_word(uint8_t traffic_class, uint32_t flow_label) {
  return 6u << 28 | uint32_t{traffic_class} << 20 | (flow_label & 0xfffff);
}
uint8_t ipv6_traffic_class(const rte_ipv6_hdr* ip) {
  return static_cast<uint8_t>(rte_be_to_cpu_32(ip->vtc_flow) >> 20);
}

// RFC 6437's stateless flow label: a hash of what names the flow, never zero.
uint32_t flow_label(const Udp6FrameAddresses& a) {
  uint64_t h = uint64_t{a.src_port} << 16 | a.dst_port;
  for (size_t i = 0; i < 16; i += 4) {
    uint32_t word = 0;
    std::memcpy(&word, a.dst_ip.data() + i, 4);
    h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
  }
  const auto label = static_cast<uint32_t>(h >> 44);  // the top 20 bits
  return label ? label : 1;
}

bool is_multicast(const IpBytes& ip) {
  return ip[0] == 0xff;
}
bool is_unspecified(const IpBytes& ip) {
  return ip == IpBytes{};
}
IpBytes get_ip6(const uint8_t* from) {
  IpBytes ip{};
  std::memcpy(ip.data(), from, ip.size());
  return ip;
}

// Ethernet and IPv6 headers of a neighbour discovery message of kNeighbourFrameBytes.
rte_ipv6_hdr* write_neighbour_headers(uint8_t* frame, const MacAddress& from_mac,
                                      const MacAddress& to_mac, const IpBytes& from_ip,
                                      const IpBytes& to_ip) {
  write_ethernet(frame, to_mac, from_mac, RTE_ETHER_TYPE_IPV6);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(frame + kIpv6At);
  ip->vtc_flow = rte_cpu_to_be_32(ipv6_first_word(0, 0));
  ip->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(kNeighbourFrameBytes - kL4At6));
  ip->proto = IPPROTO_ICMPV6;
  ip->hop_limits = kNeighbourHopLimit;
  std::memcpy(ip->src_addr, from_ip.data(), 16);
  std::memcpy(ip->dst_addr, to_ip.data(), 16);
  return ip;
}

// The ICMPv6 body after the headers: type, code 0, checksum, 4 bytes of flags and
// reserved, the target, one link-layer address option; then the checksum.
void write_neighbour_body(uint8_t* frame, const rte_ipv6_hdr* ip, uint8_t type, uint8_t flags,
                          const IpBytes& target, uint8_t option, const MacAddress& mac) {
  uint8_t* icmp = frame + kL4At6;
  std::memset(icmp, 0, kNeighbourFrameBytes - kL4At6);
  icmp[0] = type;
  icmp[4] = flags;
  std::memcpy(icmp + 8, target.data(), 16);
  icmp[24] = option;
  icmp[25] = 1;  // in units of 8 bytes
  put_mac(icmp + 26, mac);
  const uint16_t sum = l4_checksum(ip, icmp);
  std::memcpy(icmp + 2, &sum, 2);  // already in network order, as computed over the bytes
}

ParsedFrame verdict(FrameKind kind) {
  ParsedFrame p;
  p.kind = kind;
  return p;
}

void write_arp(uint8_t* frame, uint16_t opcode, const MacAddress& our_mac, uint32_t our_ip,
               const MacAddress& eth_dst, const MacAddress& target_mac, uint32_t target_ip) {
  write_ethernet(frame, eth_dst, our_mac, RTE_ETHER_TYPE_ARP);
  auto* arp = reinterpret_cast<rte_arp_hdr*>(frame + kEthernetHeaderBytes);
  arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
  arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  arp->arp_hlen = RTE_ETHER_ADDR_LEN;
  arp->arp_plen = sizeof(uint32_t);
  arp->arp_opcode = rte_cpu_to_be_16(opcode);
  put_mac(&arp->arp_data.arp_sha, our_mac);
  arp->arp_data.arp_sip = rte_cpu_to_be_32(our_ip);
  put_mac(&arp->arp_data.arp_tha, target_mac);
  arp->arp_data.arp_tip = rte_cpu_to_be_32(target_ip);
}

}  // namespace

void write_udp_frame(uint8_t* frame, const UdpFrameAddresses& a, uint32_t payload_bytes,
                     Checksums checksums) {
  write_ethernet(frame, a.dst_mac, a.src_mac, RTE_ETHER_TYPE_IPV4);

  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(frame + kEthernetHeaderBytes);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->type_of_service = ecn::kEct0;
  ip->total_length =
      rte_cpu_to_be_16(static_cast<uint16_t>(kIpv4HeaderBytes + kUdpHeaderBytes + payload_bytes));
  ip->packet_id = 0;
  ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = kTtl;
  ip->next_proto_id = IPPROTO_UDP;
  ip->hdr_checksum = 0;
  ip->src_addr = rte_cpu_to_be_32(a.src_ip);
  ip->dst_addr = rte_cpu_to_be_32(a.dst_ip);

  auto* udp = reinterpret_cast<rte_udp_hdr*>(frame + kEthernetHeaderBytes + kIpv4HeaderBytes);
  udp->src_port = rte_cpu_to_be_16(a.src_port);
  udp->dst_port = rte_cpu_to_be_16(a.dst_port);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(kUdpHeaderBytes + payload_bytes));
  udp->dgram_cksum = 0;
  if (checksums == Checksums::kSoftware) {
    ip->hdr_checksum = ipv4_header_checksum(ip);
    udp->dgram_cksum = l4_checksum(ip, udp);
  } else {
    udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, 0);
  }
}

void write_udp6_frame(uint8_t* frame, const Udp6FrameAddresses& a, uint32_t payload_bytes,
                      Checksums checksums) {
  write_ethernet(frame, a.dst_mac, a.src_mac, RTE_ETHER_TYPE_IPV6);

  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(frame + kIpv6At);
  ip->vtc_flow = rte_cpu_to_be_32(ipv6_first_word(ecn::kEct0, flow_label(a)));
  ip->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(kUdpHeaderBytes + payload_bytes));
  ip->proto = IPPROTO_UDP;
  ip->hop_limits = kTtl;
  std::memcpy(ip->src_addr, a.src_ip.data(), 16);
  std::memcpy(ip->dst_addr, a.dst_ip.data(), 16);

  auto* udp = reinterpret_cast<rte_udp_hdr*>(frame + kL4At6);
  udp->src_port = rte_cpu_to_be_16(a.src_port);
  udp->dst_port = rte_cpu_to_be_16(a.dst_port);
  udp->dgram_len = ip->payload_len;
  udp->dgram_cksum = 0;
  udp->dgram_cksum =
      checksums == Checksums::kSoftware ? l4_checksum(ip, udp) : rte_ipv6_phdr_cksum(ip, 0);
}

namespace {

ParsedFrame parse_ipv6_frame(const uint8_t* frame, uint32_t length, const FrameFilter& us) {
  if (length < kL4At6) return verdict(FrameKind::kMalformed);
  const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(frame + kIpv6At);
  const uint32_t payload = rte_be_to_cpu_16(ip->payload_len);
  if ((rte_be_to_cpu_32(ip->vtc_flow) >> 28) != 6 || kL4At6 + payload > length)
    return verdict(FrameKind::kMalformed);
  const MacAddress dst_mac = get_mac(frame);
  const IpBytes dst_ip = get_ip6(ip->dst_addr);
  if (ip->proto == IPPROTO_ICMPV6 || ip->proto == IPPROTO_HOPOPTS) {
    const IpBytes group = solicited_node_group(us.ip6);
    const bool to_us = dst_mac == us.mac && dst_ip == us.ip6;
    const bool to_our_group = dst_mac == ipv6_multicast_mac(group) && dst_ip == group;
    if (ip->proto == IPPROTO_HOPOPTS) {
      // Behind hop-by-hop options only MLD queries are for us (parse_mld_query checks
      // them), sent to all nodes, to our group or to us.
      constexpr IpBytes kAllNodes{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
      const bool to_all = dst_mac == ipv6_multicast_mac(kAllNodes) && dst_ip == kAllNodes;
      return verdict(to_us || to_our_group || to_all ? FrameKind::kMldQuery : FrameKind::kNotForUs);
    }
    // Neighbour discovery only: we answer no other ICMPv6 (echo, router messages).
    const uint8_t type = payload > 0 ? frame[kL4At6] : 0;
    if (type != kIcmpv6NeighbourSolicitation && type != kIcmpv6NeighbourAdvertisement)
      return verdict(FrameKind::kNotForUs);
    return verdict(to_us || to_our_group ? FrameKind::kNeighbourDiscovery : FrameKind::kNotForUs);
  }
  // Extension headers (fragments among them) come only from others: we send none.
  if (ip->proto != IPPROTO_UDP || dst_mac != us.mac || dst_ip != us.ip6)
    return verdict(FrameKind::kNotForUs);
  if (payload < kUdpHeaderBytes) return verdict(FrameKind::kMalformed);
  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(frame + kL4At6);
  if (rte_be_to_cpu_16(udp->dst_port) != us.udp_port) return verdict(FrameKind::kNotForUs);
  const uint32_t udp_length = rte_be_to_cpu_16(udp->dgram_len);
  if (udp_length != payload) return verdict(FrameKind::kMalformed);
  // Over IPv6 a zero UDP checksum is not "none" but invalid (RFC 8200, 8.1).
  if (udp->dgram_cksum == 0) return verdict(FrameKind::kBadChecksum);
  if (!us.udp_checksum_checked && !l4_checksum_ok(ip, udp)) return verdict(FrameKind::kBadChecksum);

  ParsedFrame p;
  p.kind = FrameKind::kUdpForUs;
  p.payload_offset = kFrame6HeaderBytes;
  p.payload_bytes = udp_length - kUdpHeaderBytes;
  p.src_ip6_at = static_cast<uint16_t>(kIpv6At + offsetof(rte_ipv6_hdr, src_addr));
  p.src_port = rte_be_to_cpu_16(udp->src_port);
  p.ecn_ce = ecn::congestion_experienced(ipv6_traffic_class(ip));
  return p;
}

}  // namespace

ParsedFrame parse_frame(const uint8_t* frame, uint32_t length, const FrameFilter& us) {
  if (length < kEthernetHeaderBytes) return verdict(FrameKind::kMalformed);
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(frame);
  const uint16_t ether_type = rte_be_to_cpu_16(eth->ether_type);
  if (ether_type == RTE_ETHER_TYPE_IPV6)
    return us.ipv6 ? parse_ipv6_frame(frame, length, us) : verdict(FrameKind::kNotForUs);
  if (us.ipv6) return verdict(FrameKind::kNotForUs);
  if (ether_type == RTE_ETHER_TYPE_ARP) return verdict(FrameKind::kArp);
  if (ether_type != RTE_ETHER_TYPE_IPV4 || get_mac(&eth->dst_addr) != us.mac)
    return verdict(FrameKind::kNotForUs);

  if (length < kEthernetHeaderBytes + kIpv4HeaderBytes) return verdict(FrameKind::kMalformed);
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(frame + kEthernetHeaderBytes);
  const uint32_t ihl = rte_ipv4_hdr_len(ip);
  const uint32_t ip_total = rte_be_to_cpu_16(ip->total_length);
  if ((ip->version_ihl >> 4) != 4 || ihl < kIpv4HeaderBytes || ip_total < ihl + kUdpHeaderBytes ||
      kEthernetHeaderBytes + ip_total > length)
    return verdict(FrameKind::kMalformed);
  if (ip->next_proto_id != IPPROTO_UDP || rte_be_to_cpu_32(ip->dst_addr) != us.ip)
    return verdict(FrameKind::kNotForUs);
  // We never fragment (DF) and do not reassemble.
  const uint16_t fragment = rte_be_to_cpu_16(ip->fragment_offset);
  if (fragment & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
    return verdict(FrameKind::kMalformed);
  if (!us.ip_checksum_checked && !ipv4_header_checksum_ok(ip, ihl))
    return verdict(FrameKind::kBadChecksum);

  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(frame + kEthernetHeaderBytes + ihl);
  if (rte_be_to_cpu_16(udp->dst_port) != us.udp_port) return verdict(FrameKind::kNotForUs);
  const uint32_t udp_length = rte_be_to_cpu_16(udp->dgram_len);
  if (udp_length != ip_total - ihl) return verdict(FrameKind::kMalformed);
  // A zero UDP checksum means "none" on IPv4.
  if (!us.udp_checksum_checked && udp->dgram_cksum != 0 && !l4_checksum_ok(ip, udp))
    return verdict(FrameKind::kBadChecksum);

  ParsedFrame p;
  p.kind = FrameKind::kUdpForUs;
  p.payload_offset = kEthernetHeaderBytes + ihl + kUdpHeaderBytes;
  p.payload_bytes = udp_length - kUdpHeaderBytes;
  p.src_ip = rte_be_to_cpu_32(ip->src_addr);
  p.src_port = rte_be_to_cpu_16(udp->src_port);
  p.ecn_ce = ecn::congestion_experienced(ip->type_of_service);
  return p;
}

bool parse_arp(const uint8_t* frame, uint32_t length, ArpMessage& out) {
  if (length < kArpFrameBytes) return false;
  const auto* arp = reinterpret_cast<const rte_arp_hdr*>(frame + kEthernetHeaderBytes);
  const uint16_t op = rte_be_to_cpu_16(arp->arp_opcode);
  if (rte_be_to_cpu_16(arp->arp_hardware) != RTE_ARP_HRD_ETHER ||
      rte_be_to_cpu_16(arp->arp_protocol) != RTE_ETHER_TYPE_IPV4 ||
      arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != sizeof(uint32_t) ||
      (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY))
    return false;
  out.is_request = op == RTE_ARP_OP_REQUEST;
  out.sender_mac = get_mac(&arp->arp_data.arp_sha);
  out.sender_ip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
  out.target_ip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
  return true;
}

void write_arp_request(uint8_t* frame, const MacAddress& our_mac, uint32_t our_ip,
                       uint32_t target_ip) {
  constexpr MacAddress kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  write_arp(frame, RTE_ARP_OP_REQUEST, our_mac, our_ip, kBroadcast, MacAddress{}, target_ip);
}

void write_arp_reply(uint8_t* frame, const MacAddress& our_mac, uint32_t our_ip,
                     const MacAddress& to_mac, uint32_t to_ip) {
  write_arp(frame, RTE_ARP_OP_REPLY, our_mac, our_ip, to_mac, to_mac, to_ip);
}

IpBytes solicited_node_group(const IpBytes& ip) {
  IpBytes group{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
  std::copy(ip.begin() + 13, ip.end(), group.begin() + 13);
  return group;
}

MacAddress ipv6_multicast_mac(const IpBytes& group) {
  return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

bool parse_neighbour_discovery(const uint8_t* frame, uint32_t length, NeighbourMessage& out) {
  if (length < kL4At6 + kNeighbourMessageBytes) return false;
  const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(frame + kIpv6At);
  const uint32_t payload = rte_be_to_cpu_16(ip->payload_len);
  const uint8_t* icmp = frame + kL4At6;
  if (rte_be_to_cpu_16(reinterpret_cast<const rte_ether_hdr*>(frame)->ether_type) !=
          RTE_ETHER_TYPE_IPV6 ||
      (rte_be_to_cpu_32(ip->vtc_flow) >> 28) != 6 || ip->proto != IPPROTO_ICMPV6 ||
      ip->hop_limits != kNeighbourHopLimit || payload < kNeighbourMessageBytes ||
      kL4At6 + payload > length || icmp[1] != 0 ||
      (icmp[0] != kIcmpv6NeighbourSolicitation && icmp[0] != kIcmpv6NeighbourAdvertisement) ||
      !l4_checksum_ok(ip, icmp))
    return false;
  NeighbourMessage m;
  m.is_solicitation = icmp[0] == kIcmpv6NeighbourSolicitation;
  m.override_cached = !m.is_solicitation && (icmp[4] & kAdvertisementOverride) != 0;
  m.source_ip = get_ip6(ip->src_addr);
  m.target_ip = get_ip6(icmp + 8);
  if (is_multicast(m.target_ip)) return false;
  const uint8_t wanted = m.is_solicitation ? kOptionSourceLinkAddress : kOptionTargetLinkAddress;
  for (uint32_t at = kNeighbourMessageBytes; at < payload;) {
    if (payload - at < 2) return false;
    const uint32_t option_bytes = uint32_t{icmp[at + 1]} * 8;
    if (option_bytes == 0 || option_bytes > payload - at) return false;
    if (icmp[at] == wanted && option_bytes >= 8) {
      m.link_mac = get_mac(icmp + at + 2);
      m.has_link_mac = true;
    }
    at += option_bytes;
  }
  if (m.is_solicitation && is_unspecified(m.source_ip) && m.has_link_mac) return false;
  out = m;
  return true;
}

void write_neighbour_solicitation(uint8_t* frame, const MacAddress& our_mac, const IpBytes& our_ip,
                                  const IpBytes& target_ip) {
  const IpBytes group = solicited_node_group(target_ip);
  const rte_ipv6_hdr* ip =
      write_neighbour_headers(frame, our_mac, ipv6_multicast_mac(group), our_ip, group);
  write_neighbour_body(frame, ip, kIcmpv6NeighbourSolicitation, 0, target_ip,
                       kOptionSourceLinkAddress, our_mac);
}

void write_neighbour_advertisement(uint8_t* frame, const MacAddress& our_mac, const IpBytes& our_ip,
                                   const MacAddress& to_mac, const IpBytes& to_ip,
                                   bool override_cached) {
  const rte_ipv6_hdr* ip = write_neighbour_headers(frame, our_mac, to_mac, our_ip, to_ip);
  const uint8_t flags =
      kAdvertisementSolicited | (override_cached ? kAdvertisementOverride : uint8_t{0});
  write_neighbour_body(frame, ip, kIcmpv6NeighbourAdvertisement, flags, our_ip,
                       kOptionTargetLinkAddress, our_mac);
}

}  // namespace spray::dp
