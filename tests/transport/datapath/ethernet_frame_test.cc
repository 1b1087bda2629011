// Ethernet/IPv4/UDP and ARP framing of the DPDK datapath, and its neighbour table.
// Checksums are checked against values computed independently (Python, RFC 1071).
#include "transport/datapath/dpdk/ethernet_frame.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include "transport/datapath/dpdk/neighbour_table.h"

namespace spray::dp {
namespace {

constexpr MacAddress kMacA{0x02, 0, 0, 0, 0, 0x01};
constexpr MacAddress kMacB{0x02, 0, 0, 0, 0, 0x02};
constexpr uint32_t kIpA = 0x0a000001;  // 10.0.0.1
constexpr uint32_t kIpB = 0x0a000002;  // 10.0.0.2

// A frame from A (port 4803) to B (port 4800) carrying bytes 0..payload-1, 2-aligned
// like an mbuf's data.
struct Frame {
  alignas(8) std::array<uint8_t, 256> bytes{};
  uint32_t length = 0;

  explicit Frame(uint32_t payload = 10) {
    std::iota(bytes.begin() + kFrameHeaderBytes, bytes.begin() + kFrameHeaderBytes + payload, 0);
    UdpFrameAddresses a{kMacA, kMacB, kIpA, kIpB, 4803, 4800};
    write_udp_frame(bytes.data(), a, payload, Checksums::kSoftware);
    length = kFrameHeaderBytes + payload;
  }
  uint16_t be16(size_t at) const { return static_cast<uint16_t>(bytes[at] << 8 | bytes[at + 1]); }
  void put16(size_t at, uint16_t v) {
    bytes[at] = static_cast<uint8_t>(v >> 8);
    bytes[at + 1] = static_cast<uint8_t>(v);
  }
  ParsedFrame parse() const {
    return parse_frame(bytes.data(), length, FrameFilter{kMacB, kIpB, 4800});
  }
};

constexpr size_t kIpAt = kEthernetHeaderBytes;
constexpr size_t kUdpAt = kEthernetHeaderBytes + kIpv4HeaderBytes;

TEST(EthernetFrame, write__matches_independently_computed_headers) {
  Frame f;
  EXPECT_EQ(f.be16(12), 0x0800);              // IPv4
  EXPECT_EQ(f.bytes[kIpAt], 0x45);            // version 4, 20-byte header
  EXPECT_EQ(f.bytes[kIpAt + 1], 0x02);        // ECT(0)
  EXPECT_EQ(f.be16(kIpAt + 2), 20 + 8 + 10);  // total length
  EXPECT_EQ(f.be16(kIpAt + 6), 0x4000);       // don't fragment
  EXPECT_EQ(f.be16(kIpAt + 10), 0x26c3);      // header checksum
  EXPECT_EQ(f.be16(kUdpAt), 4803);
  EXPECT_EQ(f.be16(kUdpAt + 2), 4800);
  EXPECT_EQ(f.be16(kUdpAt + 4), 18);
  EXPECT_EQ(f.be16(kUdpAt + 6), 0xb22b);  // UDP checksum
}

TEST(EthernetFrame, parse__round_trips_a_frame_for_us) {
  Frame f(100);
  const ParsedFrame p = f.parse();
  ASSERT_EQ(p.kind, FrameKind::kUdpForUs);
  EXPECT_EQ(p.payload_offset, kFrameHeaderBytes);
  EXPECT_EQ(p.payload_bytes, 100u);
  EXPECT_EQ(p.src_ip, kIpA);
  EXPECT_EQ(p.src_port, 4803);
  EXPECT_FALSE(p.ecn_ce);
}

TEST(EthernetFrame, parse__reports_congestion_experienced) {
  Frame f;
  f.bytes[kIpAt + 1] = 0x03;  // CE; keep the header checksum right (one's complement)
  f.put16(kIpAt + 10, static_cast<uint16_t>(f.be16(kIpAt + 10) - 1));
  const ParsedFrame p = f.parse();
  ASSERT_EQ(p.kind, FrameKind::kUdpForUs);
  EXPECT_TRUE(p.ecn_ce);
}

TEST(EthernetFrame, parse__rejects_corruption_anywhere) {
  for (size_t at : {kIpAt + 8, kIpAt + 12, kUdpAt, kUdpAt + 6, size_t{kFrameHeaderBytes + 3}}) {
    Frame f;
    f.bytes[at] ^= 0x10;
    EXPECT_EQ(f.parse().kind, FrameKind::kBadChecksum) << "flipped byte " << at;
  }
}

TEST(EthernetFrame, parse__accepts_a_zero_udp_checksum) {
  Frame f;
  f.put16(kUdpAt + 6, 0);  // "no checksum" on IPv4
  EXPECT_EQ(f.parse().kind, FrameKind::kUdpForUs);
}

TEST(EthernetFrame, parse__trusts_the_nic_only_when_told) {
  Frame f;
  f.bytes[kFrameHeaderBytes] ^= 1;
  FrameFilter us{kMacB, kIpB, 4800};
  EXPECT_EQ(parse_frame(f.bytes.data(), f.length, us).kind, FrameKind::kBadChecksum);
  us.udp_checksum_checked = true;
  EXPECT_EQ(parse_frame(f.bytes.data(), f.length, us).kind, FrameKind::kUdpForUs);
}

TEST(EthernetFrame, parse__rejects_inconsistent_lengths_and_fragments) {
  {
    Frame f;
    f.length -= 1;  // IP says more than arrived
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
  for (uint32_t length : {0u, 13u, 33u}) {
    Frame f;
    f.length = length;
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed) << length;
  }
  {
    Frame f;
    f.bytes[kIpAt] = 0x44;  // header length 16
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
  {
    Frame f;
    f.put16(kUdpAt + 4, 17);  // UDP length disagrees with IP
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
  {
    Frame f;
    f.put16(kIpAt + 6, 0x2000);  // more fragments
    EXPECT_EQ(f.parse().kind, FrameKind::kMalformed);
  }
}

TEST(EthernetFrame, parse__ignores_traffic_for_others) {
  {
    Frame f;
    f.bytes[5] = 0x09;  // another MAC
    EXPECT_EQ(f.parse().kind, FrameKind::kNotForUs);
  }
  EXPECT_EQ(parse_frame(Frame().bytes.data(), Frame().length, FrameFilter{kMacB, kIpA, 4800}).kind,
            FrameKind::kNotForUs);
  EXPECT_EQ(parse_frame(Frame().bytes.data(), Frame().length, FrameFilter{kMacB, kIpB, 4808}).kind,
            FrameKind::kNotForUs);
  {
    Frame f;
    f.bytes[12] = 0x86;  // IPv6 ethertype
    f.bytes[13] = 0xdd;
    EXPECT_EQ(f.parse().kind, FrameKind::kNotForUs);
  }
}

TEST(EthernetFrame, arp__request_and_reply_round_trip) {
  alignas(8) std::array<uint8_t, kArpFrameBytes> frame{};
  write_arp_request(frame.data(), kMacA, kIpA, kIpB);
  EXPECT_EQ(parse_frame(frame.data(), kArpFrameBytes, FrameFilter{kMacB, kIpB, 4800}).kind,
            FrameKind::kArp);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(frame[i], 0xff) << "broadcast";
  ArpMessage m;
  ASSERT_TRUE(parse_arp(frame.data(), kArpFrameBytes, m));
  EXPECT_TRUE(m.is_request);
  EXPECT_EQ(m.sender_mac, kMacA);
  EXPECT_EQ(m.sender_ip, kIpA);
  EXPECT_EQ(m.target_ip, kIpB);

  write_arp_reply(frame.data(), kMacB, kIpB, kMacA, kIpA);
  ASSERT_TRUE(parse_arp(frame.data(), kArpFrameBytes, m));
  EXPECT_FALSE(m.is_request);
  EXPECT_EQ(m.sender_mac, kMacB);
  EXPECT_EQ(m.sender_ip, kIpB);
  EXPECT_EQ(m.target_ip, kIpA);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(frame[i], kMacA[i]) << "unicast to the asker";

  EXPECT_FALSE(parse_arp(frame.data(), kArpFrameBytes - 1, m));
  frame[kEthernetHeaderBytes + 7] = 9;  // unknown opcode
  EXPECT_FALSE(parse_arp(frame.data(), kArpFrameBytes, m));
}

TEST(NeighbourTable, text_entries_and_errors) {
  NeighbourTable t(2);
  std::string error;
  EXPECT_TRUE(t.add_from_text("10.0.0.2=02:00:00:00:00:02", error)) << error;
  ASSERT_NE(t.find(kIpB), nullptr);
  EXPECT_EQ(*t.find(kIpB), kMacB);
  EXPECT_EQ(t.find(kIpA), nullptr);
  for (const char* bad : {"10.0.0.2", "10.0.0=02:00:00:00:00:02", "10.0.0.3=02:00:00:00:00",
                          "10.0.0.3=02:00:00:00:00:02:03", "=", ""}) {
    error.clear();
    EXPECT_FALSE(t.add_from_text(bad, error)) << bad;
    EXPECT_NE(error.find("IP=MAC"), std::string::npos) << error;
  }
  EXPECT_TRUE(t.add_from_text("10.0.0.2=02:00:00:00:00:03", error));  // replaces
  EXPECT_EQ((*t.find(kIpB))[5], 0x03);
  EXPECT_TRUE(t.add_from_text("10.0.0.1=02:00:00:00:00:01", error));
  EXPECT_FALSE(t.add_from_text("10.0.0.9=02:00:00:00:00:09", error));
  EXPECT_NE(error.find("full"), std::string::npos) << error;
}

TEST(NeighbourTable, holds_ipv6_and_ipv4_entries_apart) {
  NeighbourTable t;
  std::string error;
  EXPECT_TRUE(t.add_from_text("fd00::2=02:00:00:00:00:06", error)) << error;
  EXPECT_TRUE(t.add_from_text("10.0.0.2=02:00:00:00:00:04", error)) << error;
  EXPECT_FALSE(t.add_from_text("fd00::zz=02:00:00:00:00:06", error));
  ASSERT_NE(t.find(*parse_ip_bytes("fd00::2")), nullptr);
  EXPECT_EQ((*t.find(*parse_ip_bytes("fd00::2")))[5], 0x06);
  EXPECT_EQ((*t.find(kIpB))[5], 0x04);
  EXPECT_EQ(t.find(*parse_ip_bytes("::10.0.0.2")), nullptr) << "IPv4-compatible is not v4-mapped";
  EXPECT_EQ(t.find(*parse_ip_bytes("::ffff:10.0.0.2")), t.find(kIpB));
  EXPECT_EQ(t.find(*parse_ip_bytes("fd00::3")), nullptr);
}

// Addresses whose 64-bit folds are equal are told apart by the whole address: built
// here on purpose (fold = high half x constant ^ low half), as real ones meet by chance.
TEST(NeighbourTable, addresses_that_fold_alike_keep_their_own_entries) {
  auto address = [](uint64_t high, uint64_t low) {
    IpBytes ip{};
    std::memcpy(ip.data(), &high, 8);
    std::memcpy(ip.data() + 8, &low, 8);
    return ip;
  };
  constexpr uint64_t kMix = 0x9e3779b97f4a7c15ULL;
  const IpBytes a = address(0, 0x1234);
  const IpBytes b = address(1, 0x1234 ^ kMix);
  const IpBytes c = address(2, 0x1234 ^ (2 * kMix));
  NeighbourTable t(8);
  EXPECT_TRUE(t.set(a, kMacA));
  EXPECT_TRUE(t.set(b, kMacB));
  EXPECT_EQ(t.find(c), nullptr);
  EXPECT_TRUE(t.set(c, MacAddress{2, 0, 0, 0, 0, 3}));
  ASSERT_TRUE(t.find(a) && t.find(b) && t.find(c));
  EXPECT_EQ(*t.find(a), kMacA);
  EXPECT_EQ(*t.find(b), kMacB);
  EXPECT_EQ((*t.find(c))[5], 3);
  EXPECT_TRUE(t.set(a, MacAddress{2, 0, 0, 0, 0, 9}));  // replaces, adds nothing
  EXPECT_EQ((*t.find(a))[5], 9);
  EXPECT_EQ(t.size(), 3u);
}

// A flood of forged senders (ARP requests to us from made-up addresses) evicts only
// learnt entries: a configured neighbour stays as given, and what is learnt last is in.
TEST(NeighbourTable, a_flood_evicts_learnt_entries_only) {
  NeighbourTable t(4);
  std::string error;
  ASSERT_TRUE(t.add_from_text("10.0.0.1=02:00:00:00:00:01", error)) << error;
  for (uint32_t sender = 0; sender < 100; ++sender) {
    EXPECT_TRUE(
        t.set(0x0a010000 + sender, MacAddress{2, 0, 0, 0, 1, static_cast<uint8_t>(sender)}));
  }
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.evictions(), 97u);
  ASSERT_NE(t.find(kIpA), nullptr);
  EXPECT_EQ(*t.find(kIpA), kMacA);
  for (uint32_t sender = 97; sender < 100; ++sender)
    EXPECT_NE(t.find(0x0a010000 + sender), nullptr);
  EXPECT_EQ(t.find(0x0a010000), nullptr);
  EXPECT_TRUE(t.set(kIpA, kMacB));  // learnt: a configured entry stays as given
  EXPECT_EQ(*t.find(kIpA), kMacA);
}

TEST(NeighbourTable, is_full_only_of_configured_entries) {
  NeighbourTable t(2);
  std::string error;
  ASSERT_TRUE(t.add_from_text("10.0.0.1=02:00:00:00:00:01", error));
  ASSERT_TRUE(t.add_from_text("10.0.0.2=02:00:00:00:00:02", error));
  EXPECT_FALSE(t.set(0x0a000003, kMacA));
  EXPECT_EQ(t.find(0x0a000003), nullptr);
  EXPECT_EQ(t.evictions(), 0u);
}

// Random sets over addresses that mostly fold alike (chains of several entries, unlinked
// at the head, middle and tail as entries give way), checked against what must hold: a
// configured entry stays with its MAC, an address just set is found with its MAC, and
// any address found has the MAC it was last given.
TEST(NeighbourTable, random_sets_keep_every_answer_right) {
  constexpr uint64_t kMix = 0x9e3779b97f4a7c15ULL;
  auto address = [&](uint32_t n) {  // n % 3 != 0: all one fold; n % 3 == 0: folds of their own
    const uint64_t high = n;
    const uint64_t low = n % 3 ? 0x5555 ^ (high * kMix) : n;
    IpBytes ip{};
    std::memcpy(ip.data(), &high, 8);
    std::memcpy(ip.data() + 8, &low, 8);
    return ip;
  };
  NeighbourTable t(8);
  std::map<uint32_t, MacAddress> last;  // the MAC each address was last given
  std::set<uint32_t> configured;
  uint64_t state = 12345;
  for (int step = 0; step < 20000; ++step) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto n = static_cast<uint32_t>(state >> 33) % 40;
    const MacAddress mac{2, 0, 0, 0, static_cast<uint8_t>(n), static_cast<uint8_t>(step)};
    const bool configure = configured.size() < 3 && (state >> 20) % 50 == 0;
    const bool ok =
        t.set(address(n), mac,
              configure ? NeighbourTable::Origin::kConfigured : NeighbourTable::Origin::kLearned);
    ASSERT_TRUE(ok) << "step " << step;
    if (configure) configured.insert(n);
    if (configure || !configured.contains(n)) last[n] = mac;
    ASSERT_NE(t.find(address(n)), nullptr) << "step " << step;
    ASSERT_EQ(*t.find(address(n)), last[n]) << "step " << step;
    ASSERT_LE(t.size(), 8u);
    for (uint32_t c : configured) ASSERT_EQ(*t.find(address(c)), last[c]) << "step " << step;
    for (const auto& [m, want] : last) {
      const MacAddress* got = t.find(address(m));
      if (got) {
        ASSERT_EQ(*got, want) << "address " << m << ", step " << step;
      }
    }
  }
  EXPECT_GT(t.evictions(), 10000u);
}

TEST(NeighbourTable, loads_complete_kernel_entries_only) {
  const std::string path = ::testing::TempDir() + "/spray_arp_table";
  std::ofstream(path)
      << "IP address       HW type     Flags       HW address            Mask     Device\n"
         "10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        eth0\n"
         "10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        eth0\n"
         "garbage line\n"
         "10.0.0.4         0x1         0x6         02:00:00:00:00:04     *        eth0\n";
  NeighbourTable t;
  EXPECT_EQ(t.load_kernel_table(path), 2u);
  EXPECT_NE(t.find(0x0a000002), nullptr);
  EXPECT_EQ(t.find(0x0a000003), nullptr);
  EXPECT_NE(t.find(0x0a000004), nullptr);
  EXPECT_EQ(t.load_kernel_table(path + ".missing"), 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace spray::dp
