#include "transport/datapath/dpdk/ethernet_frame.h"

#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

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

ParsedFrame verdict(FrameKind kind) {
  ParsedFrame p;
  p.kind = kind;
  return p;
}

void write_arp(uint8_t* frame, uint16_t opcode, const MacAddress& our_mac, uint32_t our_ip,
               const MacAddress& eth_dst, const MacAddress& target_mac, uint32_t target_ip) {
  auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
  put_mac(&eth->dst_addr, eth_dst);
  put_mac(&eth->src_addr, our_mac);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
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
  auto* eth = reinterpret_cast<rte_ether_hdr*>(frame);
  put_mac(&eth->dst_addr, a.dst_mac);
  put_mac(&eth->src_addr, a.src_mac);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);

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
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  } else {
    udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, 0);
  }
}

ParsedFrame parse_frame(const uint8_t* frame, uint32_t length, const FrameFilter& us) {
  if (length < kEthernetHeaderBytes) return verdict(FrameKind::kMalformed);
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(frame);
  const uint16_t ether_type = rte_be_to_cpu_16(eth->ether_type);
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
  if (!us.ip_checksum_checked && rte_raw_cksum(ip, ihl) != 0xffff)
    return verdict(FrameKind::kBadChecksum);

  const auto* udp = reinterpret_cast<const rte_udp_hdr*>(frame + kEthernetHeaderBytes + ihl);
  if (rte_be_to_cpu_16(udp->dst_port) != us.udp_port) return verdict(FrameKind::kNotForUs);
  const uint32_t udp_length = rte_be_to_cpu_16(udp->dgram_len);
  if (udp_length != ip_total - ihl) return verdict(FrameKind::kMalformed);
  // A zero UDP checksum means "none" on IPv4.
  if (!us.udp_checksum_checked && udp->dgram_cksum != 0 &&
      rte_ipv4_udptcp_cksum_verify(ip, udp) != 0)
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

}  // namespace spray::dp
