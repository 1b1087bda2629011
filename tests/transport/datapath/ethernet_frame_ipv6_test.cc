// Ethernet/IPv6/UDP framing of the DPDK datapath and IPv6 neighbour discovery (RFC 4861).
// Checksums are checked against values computed independently (Python, RFC 1071 over
// RFC 8200's pseudo-header).
#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <set>

#include "transport/datapath/dpdk/ethernet_frame.h"
#include "transport/datapath/dpdk/mld_frame.h"

namespace spray::dp {
namespace {
// Its own namespace: the binary is a unity build with ethernet_frame_test.cc, whose
// anonymous namespace has IPv4 constants of these names.
namespace ipv6 {

constexpr MacAddress kMacA{0x02, 0, 0, 0, 0, 0x01};
constexpr MacAddress kMacB{0x02, 0, 0, 0, 0, 0x02};
const IpBytes kIpA = *parse_ip_bytes("fd00::1");
const IpBytes kIpB = *parse_ip_bytes("fd00::2");

constexpr size_t kIpAt = kEthernetHeaderBytes;
constexpr size_t kUdpAt = kEthernetHeaderBytes + kIpv6HeaderBytes;
constexpr size_t kIcmpAt = kUdpAt;

FrameFilter filter_of(const MacAddress& mac, const IpBytes& ip, uint16_t port = 4800) {
  FrameFilter f{mac, 0, port};
  f.ipv6 = true;
  f.ip6 = ip;
  return f;
}

// A frame from A (port 4803) to B (port 4800) carrying bytes 0..payload-1, 2-aligned
// like an mbuf's data.
struct Frame6 {
  alignas(8) std::array<uint8_t, 256> bytes{};
  uint32_t length = 0;

  explicit Frame6(uint32_t payload = 10, uint16_t src_port = 4803) {
    std::iota(bytes.begin() + kFrame6HeaderBytes, bytes.begin() + kFrame6HeaderBytes + payload, 0);
    write_udp6_frame(bytes.data(), {kMacA, kMacB, kIpA, kIpB, src_port, 4800}, payload,
                     Checksums::kSoftware);
    length = kFrame6HeaderBytes + payload;
  }
  uint16_t be16(size_t at) const { return static_cast<uint16_t>(bytes[at] << 8 | bytes[at + 1]); }
  uint32_t be32(size_t at) const { return uint32_t{be16(at)} << 16 | be16(at + 2); }
  void put16(size_t at, uint16_t v) {
    bytes[at] = static_cast<uint8_t>(v >> 8);
    bytes[at + 1] = static_cast<uint8_t>(v);
  }
  ParsedFrame parse(const FrameFilter& us = filter_of(kMacB, kIpB)) const {
    return parse_frame(bytes.data(), length, us);
  }
};

TEST(EthernetFrameIpv6, write__matches_independently_computed_headers) {
  Frame6 f;
  EXPECT_EQ(f.be16(12), 0x86dd);
  EXPECT_EQ(f.be32(kIpAt) >> 28, 6u);
  EXPECT_EQ((f.be32(kIpAt) >> 20) & 0xff, 0x02u) << "ECT(0)";
  EXPECT_NE(f.be32(kIpAt) & 0xfffff, 0u) << "a flow label";
  EXPECT_EQ(f.be16(kIpAt + 4), 8 + 10);  // payload length
  EXPECT_EQ(f.bytes[kIpAt + 6], 17);     // UDP
  EXPECT_EQ(f.bytes[kIpAt + 7], 64);     // hop limit
  EXPECT_EQ(f.be16(kUdpAt), 4803);
  EXPECT_EQ(f.be16(kUdpAt + 2), 4800);
  EXPECT_EQ(f.be16(kUdpAt + 4), 18);
  EXPECT_EQ(f.be16(kUdpAt + 6), 0xcc29);  // UDP checksum
}

// The flow label names the flow: the same for every packet of it, and (almost always)
// different for another source port, so switches that hash it see the EVs apart.
TEST(EthernetFrameIpv6, write__gives_each_source_port_its_own_flow_label) {
  std::set<uint32_t> labels;
  for (uint16_t port = 4800; port < 4816; ++port) {
    const uint32_t label = Frame6(10, port).be32(kIpAt) & 0xfffff;
    EXPECT_EQ(label, Frame6(20, port).be32(kIpAt) & 0xfffff) << "one flow, one label";
    labels.insert(label);
  }
  EXPECT_GE(labels.size(), 15u);
}

TEST(EthernetFrameIpv6, parse__round_trips_a_frame_for_us) {
  Frame6 f(100);
  const ParsedFrame p = f.parse();
  ASSERT_EQ(p.kind, FrameKind::kUdpForUs);
  EXPECT_EQ(p.payload_offset, kFrame6HeaderBytes);
  EXPECT_EQ(p.payload_bytes, 100u);
  EXPECT_EQ(source_ip6(f.bytes.data(), p), kIpA);
  EXPECT_EQ(p.src_port, 4803);
  EXPECT_FALSE(p.ecn_ce);
}

TEST(EthernetFrameIpv6, parse__reports_congestion_experienced) {
  Frame6 f;
  f.bytes[kIpAt + 1] |= 0x30;  // traffic class ECN bits 11: CE (not in the checksum)
  const ParsedFrame p = f.parse();
  ASSERT_EQ(p.kind, FrameKind::kUdpForUs);
  EXPECT_TRUE(p.ecn_ce);
}

TEST(EthernetFrameIpv6, parse__rejects_corruption_and_a_missing_checksum) {
  for (size_t at : {kIpAt + 8, kIpAt + 39, kUdpAt, kUdpAt + 6, size_t{kFrame6HeaderBytes + 3}}) {
    Frame6 f;
    f.bytes[at] ^= 0x10;
    EXPECT_EQ(f.parse().kind, at == kIpAt + 39 ? FrameKind::kNotForUs : FrameKind::kBadChecksum)
        << "flipped byte " << at;  // byte 39 is in our own address: not for us
  }
  Frame6 f;
  f.put16(kUdpAt + 6, 0);  // "no checksum" is invalid over IPv6
  EXPECT_EQ(f.parse().kind, FrameKind::kBadChecksum);
  FrameFilter nic_checked = filter_of(kMacB, kIpB);
  nic_checked.udp_checksum_checked = true;
  Frame6 g;
  g.bytes[kFrame6HeaderBytes] ^= 1;
  EXPECT_EQ(g.parse().kind, FrameKind::kBadChecksum);
  EXPECT_EQ(g.parse(nic_checked).kind, FrameKind::kUdpForUs);
}

TEST(EthernetFrameIpv6, parse__rejects_inconsistent_lengths) {
  {
    Frame6 f;
    f.length -= 1;  // IP says more than arrived
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
  for (uint32_t length : {0u, 13u, 53u}) {
    Frame6 f;
    f.length = length;
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed) << length;
  }
  {
    Frame6 f;
    f.bytes[kIpAt] = 0x45;  // version 4 in an IPv6 frame
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
  {
    Frame6 f;
    f.put16(kUdpAt + 4, 17);  // UDP length disagrees with IP
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
}

TEST(EthernetFrameIpv6, parse__ignores_traffic_for_others_and_of_the_other_family) {
  {
    Frame6 f;
    f.bytes[5] = 0x09;  // another MAC
    EXPECT_EQ(f.parse().kind, FrameKind::kNotForUs);
  }
  EXPECT_EQ(Frame6().parse(filter_of(kMacB, kIpA)).kind, FrameKind::kNotForUs);
  EXPECT_EQ(Frame6().parse(filter_of(kMacB, kIpB, 4808)).kind, FrameKind::kNotForUs);
  {
    Frame6 f;
    f.bytes[kIpAt + 6] = 0;  // a hop-by-hop options header first: we send none
    // To us behind hop-by-hop options: only an MLD query could be for us, and this is none
    // (the datapath counts it as not for us).
    EXPECT_EQ(f.parse().kind, FrameKind::kMldQuery);
    MldQuery q;
    EXPECT_FALSE(parse_mld_query(f.bytes.data(), f.length, q));
  }
  // An IPv4 endpoint takes no IPv6 frame, an IPv6 one no IPv4 frame and no ARP.
  EXPECT_EQ(Frame6().parse(FrameFilter{kMacB, 0x0a000002, 4800}).kind, FrameKind::kNotForUs);
  alignas(8) std::array<uint8_t, 64> v4{};
  write_udp_frame(v4.data(), {kMacA, kMacB, 0x0a000001, 0x0a000002, 4803, 4800}, 10,
                  Checksums::kSoftware);
  EXPECT_EQ(parse_frame(v4.data(), kFrameHeaderBytes + 10, filter_of(kMacB, kIpB)).kind,
            FrameKind::kNotForUs);
  write_arp_request(v4.data(), kMacA, 0x0a000001, 0x0a000002);
  EXPECT_EQ(parse_frame(v4.data(), kArpFrameBytes, filter_of(kMacB, kIpB)).kind,
            FrameKind::kNotForUs);
}

TEST(NeighbourDiscovery, groups_and_their_macs) {
  EXPECT_EQ(solicited_node_group(*parse_ip_bytes("fd00::12:3456:789a")),
            *parse_ip_bytes("ff02::1:ff56:789a"));
  EXPECT_EQ(ipv6_multicast_mac(*parse_ip_bytes("ff02::1:ff56:789a")),
            (MacAddress{0x33, 0x33, 0xff, 0x56, 0x78, 0x9a}));
}

struct NdFrame {
  alignas(8) std::array<uint8_t, kNeighbourFrameBytes> bytes{};
  uint16_t be16(size_t at) const { return static_cast<uint16_t>(bytes[at] << 8 | bytes[at + 1]); }
  bool parse(NeighbourMessage& m, uint32_t length = kNeighbourFrameBytes) const {
    return parse_neighbour_discovery(bytes.data(), length, m);
  }
};

TEST(NeighbourDiscovery, solicitation__goes_to_the_target_group_and_round_trips) {
  NdFrame f;
  write_neighbour_solicitation(f.bytes.data(), kMacA, kIpA, kIpB);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(f.bytes[i], (std::array<uint8_t, 6>{0x33, 0x33, 0xff, 0, 0, 2}[i]));
  EXPECT_EQ(f.bytes[kIpAt + 7], 255) << "hop limit";
  EXPECT_EQ(f.bytes[kIcmpAt], 135);
  EXPECT_EQ(f.be16(kIcmpAt + 2), 0x7d97);  // ICMPv6 checksum
  EXPECT_EQ(parse_frame(f.bytes.data(), kNeighbourFrameBytes, filter_of(kMacB, kIpB)).kind,
            FrameKind::kNeighbourDiscovery);
  EXPECT_EQ(parse_frame(f.bytes.data(), kNeighbourFrameBytes,
                        filter_of(kMacB, *parse_ip_bytes("fd00::3")))
                .kind,
            FrameKind::kNotForUs)
      << "another address's group";
  NdFrame echo = f;
  echo.bytes[kIcmpAt] = 128;  // an echo request: other ICMPv6 is not for us, we answer none
  EXPECT_EQ(parse_frame(echo.bytes.data(), kNeighbourFrameBytes, filter_of(kMacB, kIpB)).kind,
            FrameKind::kNotForUs);
  NeighbourMessage m;
  ASSERT_TRUE(f.parse(m));
  EXPECT_TRUE(m.is_solicitation);
  EXPECT_EQ(m.source_ip, kIpA);
  EXPECT_EQ(m.target_ip, kIpB);
  EXPECT_TRUE(m.has_link_mac);
  EXPECT_EQ(m.link_mac, kMacA);
}

TEST(NeighbourDiscovery, advertisement__answers_the_asker_and_round_trips) {
  NdFrame f;
  write_neighbour_advertisement(f.bytes.data(), kMacB, kIpB, kMacA, kIpA);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(f.bytes[i], kMacA[i]) << "unicast to the asker";
  EXPECT_EQ(f.bytes[kIcmpAt], 136);
  EXPECT_EQ(f.bytes[kIcmpAt + 4], 0x60) << "solicited, override";
  EXPECT_EQ(f.be16(kIcmpAt + 2), 0x1c9a);  // ICMPv6 checksum
  EXPECT_EQ(parse_frame(f.bytes.data(), kNeighbourFrameBytes, filter_of(kMacA, kIpA)).kind,
            FrameKind::kNeighbourDiscovery);
  NeighbourMessage m;
  ASSERT_TRUE(f.parse(m));
  EXPECT_FALSE(m.is_solicitation);
  EXPECT_EQ(m.source_ip, kIpB);
  EXPECT_EQ(m.target_ip, kIpB);
  EXPECT_TRUE(m.has_link_mac);
  EXPECT_EQ(m.link_mac, kMacB);
  EXPECT_TRUE(m.override_cached);

  write_neighbour_advertisement(f.bytes.data(), kMacB, kIpB, kMacA, kIpA,
                                /*override_cached=*/false);
  EXPECT_EQ(f.bytes[kIcmpAt + 4], 0x40) << "solicited only";
  ASSERT_TRUE(f.parse(m)) << "the checksum covers the flags";
  EXPECT_FALSE(m.override_cached);
  EXPECT_EQ(m.link_mac, kMacB);
}

TEST(NeighbourDiscovery, parse__applies_the_validity_checks) {
  NeighbourMessage m;
  auto solicitation = [] {
    NdFrame f;
    write_neighbour_solicitation(f.bytes.data(), kMacA, kIpA, kIpB);
    return f;
  };
  {
    NdFrame f = solicitation();
    f.bytes[kIpAt + 7] = 254;  // routed here: not from our link
    EXPECT_FALSE(f.parse(m));
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 20] ^= 1;  // checksum no longer matches
    EXPECT_FALSE(f.parse(m));
  }
  {
    NdFrame f = solicitation();
    EXPECT_FALSE(f.parse(m, kNeighbourFrameBytes - 1)) << "shorter than IPv6 says";
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 1] = 1;  // code must be 0
    EXPECT_FALSE(f.parse(m));
  }
  // The frames below are rebuilt with a right checksum, so only the rule under test fails.
  auto resealed = [](NdFrame f) {
    f.bytes[kIcmpAt + 2] = f.bytes[kIcmpAt + 3] = 0;
    uint32_t sum = 0;
    for (size_t i = kIpAt + 8; i < kIpAt + 40; i += 2) sum += f.be16(i);  // addresses
    sum += kNeighbourFrameBytes - kIcmpAt;                                // length
    sum += 58;                                                            // next header
    for (size_t i = kIcmpAt; i < kNeighbourFrameBytes; i += 2) sum += f.be16(i);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    const auto check = static_cast<uint16_t>(~sum);
    f.bytes[kIcmpAt + 2] = static_cast<uint8_t>(check >> 8);
    f.bytes[kIcmpAt + 3] = static_cast<uint8_t>(check);
    return f;
  };
  ASSERT_TRUE(resealed(solicitation()).parse(m)) << "resealing alone changes nothing";
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 25] = 0;  // an option of length zero
    EXPECT_FALSE(resealed(f).parse(m));
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 25] = 2;  // an option running past the end
    EXPECT_FALSE(resealed(f).parse(m));
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 8] = 0xff;  // a multicast target
    EXPECT_FALSE(resealed(f).parse(m));
  }
  {
    NdFrame f = solicitation();
    std::fill(f.bytes.begin() + kIpAt + 8, f.bytes.begin() + kIpAt + 24, 0);
    EXPECT_FALSE(resealed(f).parse(m)) << "duplicate address detection with a link address";
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt] = 128;  // an echo request
    EXPECT_FALSE(resealed(f).parse(m));
  }
  {
    NdFrame f = solicitation();
    f.bytes[kIcmpAt + 24] = 3;  // an option we do not know is skipped, not refused
    ASSERT_TRUE(resealed(f).parse(m));
    EXPECT_FALSE(m.has_link_mac);
  }
}

}  // namespace ipv6
}  // namespace
}  // namespace spray::dp
