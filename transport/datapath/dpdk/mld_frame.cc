#include "transport/datapath/dpdk/mld_frame.h"

#include <rte_ether.h>
#include <rte_ip.h>

#include <cstring>

#include "transport/datapath/dpdk/internet_checksum.h"

namespace spray::dp {
namespace {

constexpr uint8_t kIcmpv6MldQuery = 130;
constexpr uint8_t kIcmpv6Mldv1Report = 131;
constexpr uint8_t kIcmpv6Mldv1Done = 132;
constexpr uint8_t kIcmpv6Mldv2Report = 143;
constexpr uint8_t kProtocolHopByHop = 0;
constexpr uint8_t kProtocolIcmpv6 = 58;
constexpr uint8_t kOptionPad1 = 0;
constexpr uint8_t kOptionRouterAlert = 5;
constexpr uint32_t kIpv6At = kEthernetHeaderBytes;
constexpr uint32_t kHopByHopAt = kEthernetHeaderBytes + kIpv6HeaderBytes;
constexpr uint32_t kHopByHopBytes = 8;  // what we send: router alert and two bytes of padding
constexpr uint32_t kMldv1Bytes = 24;
constexpr uint32_t kMldv2QueryMinBytes = 28;
// ff02::16: all MLDv2-capable routers, where MLDv2 reports go; ff02::2: all routers,
// where MLDv1 done messages go.
constexpr IpBytes kAllMldv2Routers{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16};
constexpr IpBytes kAllRouters{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};

// Ethernet, IPv6 and our hop-by-hop options header (router alert for MLD, RFC 2711) of a
// report of `icmp_bytes` to `to`; returns the IPv6 header for the checksum.
rte_ipv6_hdr* write_report_headers(uint8_t* frame, const MacAddress& our_mac, const IpBytes& to,
                                   uint32_t icmp_bytes) {
  const MacAddress to_mac = ipv6_multicast_mac(to);
  std::memcpy(frame, to_mac.data(), to_mac.size());
  std::memcpy(frame + 6, our_mac.data(), our_mac.size());
  reinterpret_cast<rte_ether_hdr*>(frame)->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
  auto* ip = reinterpret_cast<rte_ipv6_hdr*>(frame + kIpv6At);
  ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
  ip->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(kHopByHopBytes + icmp_bytes));
  ip->proto = kProtocolHopByHop;
  ip->hop_limits = 1;  // MLD never leaves the link
  const IpBytes source = link_local_address(our_mac);
  std::memcpy(ip->src_addr, source.data(), source.size());
  std::memcpy(ip->dst_addr, to.data(), to.size());
  // Next header, then the length in 8-byte units beyond the first; a router alert of
  // value 0 (an MLD message); a PadN of no bytes, which pads to 8.
  // clang-format off
  const uint8_t hop_by_hop[kHopByHopBytes] = {kProtocolIcmpv6, 0,
                                              kOptionRouterAlert, 2, 0, 0,
                                              1, 0};
  // clang-format on
  std::memcpy(frame + kHopByHopAt, hop_by_hop, sizeof(hop_by_hop));
  return ip;
}

void put_checksum(uint8_t* icmp, const rte_ipv6_hdr* ip, uint32_t icmp_bytes) {
  const uint16_t sum = l4_checksum(ip, icmp, kProtocolIcmpv6, static_cast<uint16_t>(icmp_bytes));
  std::memcpy(icmp + 2, &sum, 2);  // in network order already, as summed over the bytes
}

bool is_link_local(const uint8_t* ip) {
  return ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80;  // fe80::/10
}

// Whether the hop-by-hop options at `options` (`bytes` of them, after the 2-byte header)
// hold a router alert. Options are type, length, value; Pad1 is a lone byte.
bool has_router_alert(const uint8_t* options, uint32_t bytes) {
  for (uint32_t at = 0; at < bytes;) {
    if (options[at] == kOptionPad1) {
      ++at;
      continue;
    }
    if (bytes - at < 2 || options[at + 1] > bytes - at - 2) return false;
    if (options[at] == kOptionRouterAlert && options[at + 1] == 2) return true;
    at += 2u + options[at + 1];
  }
  return false;
}

// RFC 3810, 5.1.3: a Maximum Response Code of 32768 or more is a floating-point value.
uint32_t max_response_ms(uint16_t code) {
  if (code < 0x8000) return code;
  const uint32_t exponent = (code >> 12) & 0x7;
  const uint32_t mantissa = code & 0xfff;
  return (mantissa | 0x1000) << (exponent + 3);
}

}  // namespace

IpBytes link_local_address(const MacAddress& mac) {
  return {0xfe,   0x80,   0,    0,    0,      0,      0,     0, static_cast<uint8_t>(mac[0] ^ 0x02),
          mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
}

void write_mldv2_report(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group,
                        MldRecord record) {
  constexpr uint32_t kIcmpBytes = 8 + 4 + 16;  // header, one record without sources
  const rte_ipv6_hdr* ip = write_report_headers(frame, our_mac, kAllMldv2Routers, kIcmpBytes);
  uint8_t* icmp = frame + kHopByHopAt + kHopByHopBytes;
  std::memset(icmp, 0, kIcmpBytes);
  icmp[0] = kIcmpv6Mldv2Report;
  icmp[7] = 1;  // records
  icmp[8] = static_cast<uint8_t>(record);
  std::memcpy(icmp + 12, group.data(), group.size());
  put_checksum(icmp, ip, kIcmpBytes);
}

namespace {

// MLDv1's one message form (RFC 2710, 3): type, code, checksum, delay, reserved, group.
void write_mldv1(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group, uint8_t type,
                 const IpBytes& to) {
  const rte_ipv6_hdr* ip = write_report_headers(frame, our_mac, to, kMldv1Bytes);
  uint8_t* icmp = frame + kHopByHopAt + kHopByHopBytes;
  std::memset(icmp, 0, kMldv1Bytes);
  icmp[0] = type;
  std::memcpy(icmp + 8, group.data(), group.size());
  put_checksum(icmp, ip, kMldv1Bytes);
}

}  // namespace

void write_mldv1_report(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group) {
  write_mldv1(frame, our_mac, group, kIcmpv6Mldv1Report, group);
}

void write_mldv1_done(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group) {
  write_mldv1(frame, our_mac, group, kIcmpv6Mldv1Done, kAllRouters);
}

bool parse_mld_query(const uint8_t* frame, uint32_t length, MldQuery& out) {
  if (length < kHopByHopAt + kHopByHopBytes) return false;
  const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(frame + kIpv6At);
  const uint32_t payload = rte_be_to_cpu_16(ip->payload_len);
  const uint16_t ether_type = reinterpret_cast<const rte_ether_hdr*>(frame)->ether_type;
  if (rte_be_to_cpu_16(ether_type) != RTE_ETHER_TYPE_IPV6 ||
      (rte_be_to_cpu_32(ip->vtc_flow) >> 28) != 6 || ip->proto != kProtocolHopByHop ||
      ip->hop_limits != 1 || !is_link_local(ip->src_addr) || kHopByHopAt + payload > length)
    return false;
  const uint8_t* hop_by_hop = frame + kHopByHopAt;
  const uint32_t hop_by_hop_bytes = 8u * (hop_by_hop[1] + 1u);
  if (hop_by_hop[0] != kProtocolIcmpv6 || hop_by_hop_bytes > payload ||
      !has_router_alert(hop_by_hop + 2, hop_by_hop_bytes - 2))
    return false;
  const uint8_t* icmp = hop_by_hop + hop_by_hop_bytes;
  const uint32_t icmp_bytes = payload - hop_by_hop_bytes;
  if ((icmp_bytes != kMldv1Bytes && icmp_bytes < kMldv2QueryMinBytes) ||
      icmp[0] != kIcmpv6MldQuery || icmp[1] != 0 ||
      !l4_checksum_ok(ip, icmp, kProtocolIcmpv6, static_cast<uint16_t>(icmp_bytes)))
    return false;
  MldQuery q;
  q.version = icmp_bytes == kMldv1Bytes ? 1 : 2;
  const auto code = static_cast<uint16_t>(icmp[4] << 8 | icmp[5]);
  q.max_response_ms = q.version == 1 ? code : max_response_ms(code);
  std::memcpy(q.group.data(), icmp + 8, q.group.size());
  if (q.group != IpBytes{} && q.group[0] != 0xff) return false;  // neither general nor a group
  out = q;
  return true;
}

}  // namespace spray::dp
