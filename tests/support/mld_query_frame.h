// An MLD query frame as a router sends it, for tests of the DPDK datapath's MLD: from
// fe80::1, hop limit 1, hop-by-hop options with a router alert, then `icmp_bytes` of
// ICMPv6 (24: MLDv1; 28: MLDv2 without sources). Tests change its bytes and seal() it
// again to test one check at a time.
#pragma once

#include <rte_ip.h>

#include <array>
#include <cstring>
#include <vector>

#include "transport/datapath/dpdk/ethernet_frame.h"
#include "transport/datapath/dpdk/internet_checksum.h"
#include "transport/datapath/dpdk/mld_frame.h"

namespace spray::test {

struct MldQueryFrame {
  static constexpr size_t kIpAt = dp::kEthernetHeaderBytes;
  static constexpr size_t kHopByHopAt = kIpAt + dp::kIpv6HeaderBytes;
  static constexpr size_t kIcmpAt = kHopByHopAt + 8;

  std::vector<uint8_t> bytes;

  // `code`: the maximum response code (MLDv1: milliseconds); `to`: the IPv6 destination.
  explicit MldQueryFrame(uint32_t icmp_bytes, const dp::IpBytes& group = {}, uint16_t code = 10000,
                         const dp::IpBytes& to = *dp::parse_ip_bytes("ff02::1"))
      : bytes(kIcmpAt + icmp_bytes, 0) {
    const std::array<uint8_t, 14> ethernet{0x33, 0x33, to[12], to[13], to[14], to[15], 0x02,
                                           0,    0,    0,      0,      0x0a,   0x86,   0xdd};
    std::copy(ethernet.begin(), ethernet.end(), bytes.begin());
    bytes[kIpAt] = 0x60;
    bytes[kIpAt + 5] = static_cast<uint8_t>(8 + icmp_bytes);
    bytes[kIpAt + 6] = 0;  // hop-by-hop options
    bytes[kIpAt + 7] = 1;
    const dp::IpBytes source = *dp::parse_ip_bytes("fe80::1");
    std::copy(source.begin(), source.end(), &bytes[kIpAt + 8]);
    std::copy(to.begin(), to.end(), &bytes[kIpAt + 24]);
    const std::array<uint8_t, 8> hop_by_hop{58, 0, 5, 2, 0, 0, 1, 0};  // router alert, PadN
    std::copy(hop_by_hop.begin(), hop_by_hop.end(), &bytes[kHopByHopAt]);
    bytes[kIcmpAt] = 130;
    bytes[kIcmpAt + 4] = static_cast<uint8_t>(code >> 8);
    bytes[kIcmpAt + 5] = static_cast<uint8_t>(code);
    std::copy(group.begin(), group.end(), &bytes[kIcmpAt + 8]);
    if (icmp_bytes >= 28) {
      bytes[kIcmpAt + 24] = 2;    // robustness
      bytes[kIcmpAt + 25] = 125;  // query interval, seconds
    }
    seal();
  }
  // Sets the ICMPv6 checksum for what the bytes now hold.
  void seal() {
    bytes[kIcmpAt + 2] = bytes[kIcmpAt + 3] = 0;
    const auto* ip = reinterpret_cast<const rte_ipv6_hdr*>(&bytes[kIpAt]);
    const uint16_t sum =
        dp::l4_checksum(ip, &bytes[kIcmpAt], 58, static_cast<uint16_t>(bytes.size() - kIcmpAt));
    std::memcpy(&bytes[kIcmpAt + 2], &sum, 2);
  }
  bool parse(dp::MldQuery& q) const {
    return dp::parse_mld_query(bytes.data(), static_cast<uint32_t>(bytes.size()), q);
  }
  uint32_t length() const { return static_cast<uint32_t>(bytes.size()); }
};

}  // namespace spray::test
