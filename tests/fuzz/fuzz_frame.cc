// libFuzzer target: the DPDK datapath's frame parsers, on every Ethernet frame a wire
// could deliver. Invariants checked on each input:
//   - no parser reads outside the frame (ASan) or hits undefined behaviour (UBSan);
//   - a frame accepted as a UET packet has its payload inside the frame, and the same
//     payload reframed by us parses back to the same verdict, source and payload;
//   - an accepted ARP message re-encodes to a frame that parses to the same message;
//   - all of this for an IPv6 endpoint too (UDP over IPv6), and an accepted neighbour
//     solicitation or advertisement re-encodes to one that parses to the same message;
//   - an accepted MLD query has a version of 1 or 2, and our reports and done for its
//     group are no query;
//   - our Internet checksum of the input, from every start within a word, is DPDK's.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <rte_ip.h>

#include "transport/datapath/dpdk/ethernet_frame.h"
#include "transport/datapath/dpdk/internet_checksum.h"
#include "transport/datapath/dpdk/mld_frame.h"

namespace {

using namespace spray::dp;

constexpr MacAddress kOurMac{0x02, 0, 0, 0, 0, 0x01};
constexpr uint32_t kOurIp = 0x0a000001;
const IpBytes kOurIp6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

FrameFilter ipv6_filter() {
  FrameFilter us{kOurMac, 0, 4800};
  us.ipv6 = true;
  us.ip6 = kOurIp6;
  return us;
}

// The IPv6 endpoint's view of the same bytes.
void check_ipv6(const std::vector<uint8_t>& frame, uint32_t length, bool nic_checked) {
  FrameFilter us = ipv6_filter();
  us.udp_checksum_checked = nic_checked;
  const ParsedFrame p = parse_frame(frame.data(), length, us);
  if (p.kind == FrameKind::kArp) std::abort();  // an IPv6 endpoint takes no ARP
  if (p.kind == FrameKind::kUdpForUs) {
    if (p.payload_offset + p.payload_bytes > length) std::abort();
    std::vector<uint8_t> again(kFrame6HeaderBytes + p.payload_bytes);
    std::memcpy(again.data() + kFrame6HeaderBytes, frame.data() + p.payload_offset,
                p.payload_bytes);
    if (p.src_ip6_at + sizeof(IpBytes) > length) std::abort();
    const IpBytes source = source_ip6(frame.data(), p);
    Udp6FrameAddresses a{{0x02, 0, 0, 0, 0, 0x09}, kOurMac, source, kOurIp6, p.src_port, 4800};
    write_udp6_frame(again.data(), a, p.payload_bytes, Checksums::kSoftware);
    const ParsedFrame q =
        parse_frame(again.data(), static_cast<uint32_t>(again.size()), ipv6_filter());
    if (q.kind != FrameKind::kUdpForUs || source_ip6(again.data(), q) != source ||
        q.src_port != p.src_port || q.payload_bytes != p.payload_bytes ||
        std::memcmp(again.data() + q.payload_offset, frame.data() + p.payload_offset,
                    p.payload_bytes) != 0)
      std::abort();
  }
  NeighbourMessage m;
  if (parse_neighbour_discovery(frame.data(), length, m)) {
    std::vector<uint8_t> nd(kNeighbourFrameBytes);
    if (m.is_solicitation && m.source_ip != IpBytes{}) {
      write_neighbour_solicitation(nd.data(), m.link_mac, m.source_ip, m.target_ip);
    } else if (!m.is_solicitation) {
      write_neighbour_advertisement(nd.data(), m.link_mac, m.target_ip, MacAddress{}, m.source_ip,
                                    m.override_cached);
    } else {
      return;  // duplicate address detection: we never send it
    }
    NeighbourMessage again;
    if (!parse_neighbour_discovery(nd.data(), kNeighbourFrameBytes, again) ||
        again.is_solicitation != m.is_solicitation || again.target_ip != m.target_ip ||
        !again.has_link_mac || again.link_mac != m.link_mac ||
        again.override_cached != m.override_cached)
      std::abort();
  }
}

void check_mld(const std::vector<uint8_t>& frame, uint32_t length) {
  MldQuery q;
  if (!parse_mld_query(frame.data(), length, q)) return;
  if (q.version != 1 && q.version != 2) std::abort();
  std::vector<uint8_t> report(kMldv2ReportFrameBytes);
  write_mldv2_report(report.data(), kOurMac, q.group, MldRecord::kModeIsExclude);
  if (parse_mld_query(report.data(), kMldv2ReportFrameBytes, q)) std::abort();
  write_mldv1_report(report.data(), kOurMac, q.group);
  if (parse_mld_query(report.data(), kMldv1FrameBytes, q)) std::abort();
  write_mldv1_done(report.data(), kOurMac, q.group);
  if (parse_mld_query(report.data(), kMldv1FrameBytes, q)) std::abort();
}

// Our sum against DPDK's rte_raw_cksum, a second implementation, at each alignment.
void check_checksum(const uint8_t* data, size_t size) {
  for (size_t start = 0; start < 4 && start <= size; ++start) {
    if (ones_complement_fold(ones_complement_add(0, data + start, size - start)) !=
        rte_raw_cksum(data + start, size - start))
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxIpMtu + kEthernetHeaderBytes) return 0;
  // Frames start 2-aligned in an mbuf; copy so the parsers see the same.
  std::vector<uint8_t> frame(data, data + size);
  const auto length = static_cast<uint32_t>(size);
  FrameFilter us{kOurMac, kOurIp, 4800};
  us.ip_checksum_checked = size % 2;  // exercise both "NIC checked" paths too
  us.udp_checksum_checked = size % 3 == 0;
  const ParsedFrame p = parse_frame(frame.data(), length, us);
  if (p.kind == FrameKind::kUdpForUs) {
    if (p.payload_offset + p.payload_bytes > length) std::abort();
    std::vector<uint8_t> again(kFrameHeaderBytes + p.payload_bytes);
    std::memcpy(again.data() + kFrameHeaderBytes, frame.data() + p.payload_offset, p.payload_bytes);
    UdpFrameAddresses a{{0x02, 0, 0, 0, 0, 0x09}, kOurMac, p.src_ip, kOurIp, p.src_port, 4800};
    write_udp_frame(again.data(), a, p.payload_bytes, Checksums::kSoftware);
    const ParsedFrame q = parse_frame(again.data(), static_cast<uint32_t>(again.size()),
                                      FrameFilter{kOurMac, kOurIp, 4800});
    if (q.kind != FrameKind::kUdpForUs || q.src_ip != p.src_ip || q.src_port != p.src_port ||
        q.payload_bytes != p.payload_bytes ||
        std::memcmp(again.data() + q.payload_offset, frame.data() + p.payload_offset,
                    p.payload_bytes) != 0)
      std::abort();
  }
  check_ipv6(frame, length, size % 3 == 0);
  check_mld(frame, length);
  check_checksum(data, size);
  ArpMessage m;
  if (parse_arp(frame.data(), length, m)) {
    std::vector<uint8_t> arp(kArpFrameBytes);
    if (m.is_request) {
      write_arp_request(arp.data(), m.sender_mac, m.sender_ip, m.target_ip);
    } else {
      write_arp_reply(arp.data(), m.sender_mac, m.sender_ip, MacAddress{}, m.target_ip);
    }
    ArpMessage again;
    if (!parse_arp(arp.data(), kArpFrameBytes, again) || again.is_request != m.is_request ||
        again.sender_mac != m.sender_mac || again.sender_ip != m.sender_ip ||
        again.target_ip != m.target_ip)
      std::abort();
  }
  return 0;
}
