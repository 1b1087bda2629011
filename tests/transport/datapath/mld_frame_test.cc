// MLD (RFC 2710, RFC 3810) frames of the DPDK datapath: our reports, byte by byte, with
// checksums computed independently (Python, RFC 1071 over RFC 8200's pseudo-header), and
// the queries a host may take, with each of RFC 3810's checks.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "tests/support/mld_query_frame.h"
#include "transport/datapath/dpdk/ethernet_frame.h"
#include "transport/datapath/dpdk/internet_checksum.h"
#include "transport/datapath/dpdk/mld_frame.h"

namespace spray::dp {
namespace {
namespace mld {  // the binary is a unity build: its own names

constexpr MacAddress kOurMac{0x02, 0, 0, 0, 0, 0x01};
const IpBytes kOurIp = *parse_ip_bytes("fd00::2");
const IpBytes kOurGroup = *parse_ip_bytes("ff02::1:ff00:2");
const IpBytes kAllNodes = *parse_ip_bytes("ff02::1");
constexpr size_t kIpAt = kEthernetHeaderBytes;
constexpr size_t kHopByHopAt = kEthernetHeaderBytes + kIpv6HeaderBytes;
constexpr size_t kIcmpAt = kHopByHopAt + 8;

uint16_t be16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
// The 16-byte address at `p`, and whether the frame `f` starts with the MAC `mac`.
IpBytes ip_at(const uint8_t* p) {
  IpBytes ip{};
  std::copy_n(p, ip.size(), ip.begin());
  return ip;
}
bool sent_to(const uint8_t* f, const std::array<uint8_t, 6>& mac) {
  return std::equal(mac.begin(), mac.end(), f);
}

TEST(Mld, link_local_address__is_the_modified_eui64_of_the_mac) {
  EXPECT_EQ(link_local_address(kOurMac), *parse_ip_bytes("fe80::ff:fe00:1"));
  EXPECT_EQ(link_local_address({0x52, 0x54, 0x00, 0x12, 0x34, 0x56}),
            *parse_ip_bytes("fe80::5054:ff:fe12:3456"));
}

TEST(Mld, v2_report__matches_independently_computed_bytes) {
  std::array<uint8_t, kMldv2ReportFrameBytes> f{};
  write_mldv2_report(f.data(), kOurMac, kOurGroup, MldRecord::kChangeToExclude);
  EXPECT_TRUE(sent_to(f.data(), {0x33, 0x33, 0, 0, 0, 0x16})) << "to ff02::16";
  EXPECT_EQ(be16(&f[12]), 0x86dd);
  EXPECT_EQ(f[kIpAt] >> 4, 6);
  EXPECT_EQ(be16(&f[kIpAt + 4]), 36) << "payload: hop-by-hop options and the report";
  EXPECT_EQ(f[kIpAt + 6], 0) << "next header: hop-by-hop options";
  EXPECT_EQ(f[kIpAt + 7], 1) << "hop limit";
  EXPECT_EQ(ip_at(&f[kIpAt + 8]), *parse_ip_bytes("fe80::ff:fe00:1"));
  EXPECT_EQ(ip_at(&f[kIpAt + 24]), *parse_ip_bytes("ff02::16"));
  const std::array<uint8_t, 8> hop_by_hop{58, 0, 5, 2, 0, 0, 1, 0};  // router alert, PadN
  EXPECT_TRUE(std::equal(hop_by_hop.begin(), hop_by_hop.end(), &f[kHopByHopAt]));
  EXPECT_EQ(f[kIcmpAt], 143);
  EXPECT_EQ(be16(&f[kIcmpAt + 2]), 0x7206) << "ICMPv6 checksum";
  EXPECT_EQ(be16(&f[kIcmpAt + 6]), 1) << "one record";
  EXPECT_EQ(f[kIcmpAt + 8], 4) << "CHANGE_TO_EXCLUDE: a join";
  EXPECT_EQ(be16(&f[kIcmpAt + 10]), 0) << "no sources";
  EXPECT_EQ(ip_at(&f[kIcmpAt + 12]), kOurGroup);
  EXPECT_EQ(kIcmpAt + 28, kMldv2ReportFrameBytes);
}

TEST(Mld, v1_report__goes_to_the_group_itself) {
  std::array<uint8_t, kMldv1FrameBytes> f{};
  write_mldv1_report(f.data(), kOurMac, kOurGroup);
  EXPECT_TRUE(sent_to(f.data(), {0x33, 0x33, 0xff, 0, 0, 0x02}));
  EXPECT_EQ(ip_at(&f[kIpAt + 24]), kOurGroup);
  EXPECT_EQ(be16(&f[kIpAt + 4]), 32);
  EXPECT_EQ(f[kIpAt + 7], 1);
  EXPECT_EQ(f[kHopByHopAt + 2], 5) << "router alert";
  EXPECT_EQ(f[kIcmpAt], 131);
  EXPECT_EQ(be16(&f[kIcmpAt + 2]), 0x831d) << "ICMPv6 checksum";
  EXPECT_EQ(kIcmpAt + 24, kMldv1FrameBytes);
}

TEST(Mld, v1_done__goes_to_all_routers) {
  std::array<uint8_t, kMldv1FrameBytes> f{};
  write_mldv1_done(f.data(), kOurMac, kOurGroup);
  EXPECT_TRUE(sent_to(f.data(), {0x33, 0x33, 0, 0, 0, 0x02}));
  EXPECT_EQ(ip_at(&f[kIpAt + 24]), *parse_ip_bytes("ff02::2"));
  EXPECT_EQ(ip_at(&f[kIcmpAt + 8]), kOurGroup);
  EXPECT_EQ(f[kIpAt + 7], 1);
  EXPECT_EQ(f[kHopByHopAt + 2], 5) << "router alert";
  EXPECT_EQ(f[kIcmpAt], 132);
  EXPECT_EQ(be16(&f[kIcmpAt + 2]), 0x811f) << "ICMPv6 checksum";
}

TEST(Mld, reports__are_not_for_another_ipv6_endpoint) {
  std::array<uint8_t, kMldv2ReportFrameBytes> f{};
  write_mldv2_report(f.data(), {0x02, 0, 0, 0, 0, 0x09}, kOurGroup, MldRecord::kModeIsExclude);
  FrameFilter us{kOurMac, 0, 4800};
  us.ipv6 = true;
  us.ip6 = kOurIp;
  EXPECT_EQ(parse_frame(f.data(), kMldv2ReportFrameBytes, us).kind, FrameKind::kNotForUs);
  MldQuery q;
  EXPECT_FALSE(parse_mld_query(f.data(), kMldv2ReportFrameBytes, q));
}

using Query = test::MldQueryFrame;

TEST(Mld, query__general_and_group_queries_of_both_versions_parse) {
  Query v2(28);
  EXPECT_EQ(be16(&v2.bytes[kIcmpAt + 2]), 0x5696) << "checksum as computed independently";
  MldQuery q;
  ASSERT_TRUE(v2.parse(q));
  EXPECT_EQ(q.version, 2);
  EXPECT_EQ(q.group, IpBytes{});
  EXPECT_EQ(q.max_response_ms, 10000u);

  ASSERT_TRUE(Query(24, kOurGroup, 1000, kOurGroup).parse(q));
  EXPECT_EQ(q.version, 1);
  EXPECT_EQ(q.group, kOurGroup);
  EXPECT_EQ(q.max_response_ms, 1000u);

  // RFC 3810 5.1.3: from 32768 up the code is 1 | exp (3 bits) | mant (12 bits), and
  // the delay (mant | 0x1000) << (exp + 3).
  ASSERT_TRUE(Query(28, {}, 0x9234).parse(q));
  EXPECT_EQ(q.max_response_ms, 0x1234u << 4);
  ASSERT_TRUE(Query(28, {}, 0xffff).parse(q));
  EXPECT_EQ(q.max_response_ms, 0x1fffu << 10);
  ASSERT_TRUE(Query(44, {}).parse(q)) << "an MLDv2 query with one source";

  FrameFilter us{kOurMac, 0, 4800};
  us.ipv6 = true;
  us.ip6 = kOurIp;
  EXPECT_EQ(parse_frame(v2.bytes.data(), static_cast<uint32_t>(v2.bytes.size()), us).kind,
            FrameKind::kMldQuery);
  Query elsewhere(28, {}, 10000, *parse_ip_bytes("ff02::1:ff00:9"));
  EXPECT_EQ(
      parse_frame(elsewhere.bytes.data(), static_cast<uint32_t>(elsewhere.bytes.size()), us).kind,
      FrameKind::kNotForUs)
      << "to another node's group";
}

TEST(Mld, query__fails_each_check_of_rfc_3810) {
  MldQuery q;
  auto refused = [&](auto&& change, bool reseal, const char* why) {
    Query query(28);
    change(query.bytes);
    if (reseal) query.seal();
    EXPECT_FALSE(query.parse(q)) << why;
  };
  refused([](auto& b) { b[kIpAt + 7] = 2; }, true, "hop limit not 1: routed here");
  refused([](auto& b) { b[kIpAt + 8] = 0xfd; }, true, "source not link-local");
  refused([](auto& b) { b[kHopByHopAt + 2] = 1; }, true, "no router alert (PadN instead)");
  refused([](auto& b) { b[kHopByHopAt] = 17; }, true, "hop-by-hop options not before ICMPv6");
  refused([](auto& b) { b[kIpAt + 6] = 58; }, true, "no hop-by-hop options header");
  refused([](auto& b) { b[kIcmpAt + 1] = 1; }, true, "code not 0");
  refused([](auto& b) { b[kIcmpAt + 20] ^= 1; }, false, "checksum wrong");
  refused([](auto& b) { b[kIcmpAt + 8] = 0x20; }, true, "address neither :: nor multicast");
  refused([](auto& b) { b[kIpAt + 5] = 8 + 26; }, true, "26 bytes: neither version");
  refused([](auto& b) { b[kIpAt + 5] = 200; }, false, "longer than the frame");
  refused([](auto& b) { b[kHopByHopAt + 1] = 9; }, true, "options longer than the payload");
  refused([](auto& b) { b[kHopByHopAt + 3] = 200; }, true, "an option longer than its header");
  refused([](auto& b) { b[kIcmpAt] = 131; }, true, "a report, not a query");
  Query query(28);
  for (uint32_t cut = 0; cut < query.bytes.size(); ++cut)
    EXPECT_FALSE(parse_mld_query(query.bytes.data(), cut, q)) << "cut to " << cut;
}

}  // namespace mld
}  // namespace
}  // namespace spray::dp
