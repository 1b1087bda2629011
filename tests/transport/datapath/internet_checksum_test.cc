// The Internet checksum of the DPDK framing, against two implementations it shares no
// code with: RFC 1071's definition written out here (big-endian 16-bit words, end-around
// carry) and DPDK's rte_raw_cksum / rte_ipv{4,6}_udptcp_cksum.
#include "transport/datapath/dpdk/internet_checksum.h"

#include <gtest/gtest.h>
#include <rte_udp.h>

#include <cstring>
#include <random>
#include <vector>

namespace spray::dp {
namespace {

// RFC 1071 as written: the one's-complement sum of big-endian 16-bit words, folded as
// it goes; an odd last byte is the high byte of a word.
uint16_t rfc1071_sum(const uint8_t* p, size_t bytes) {
  uint32_t sum = 0;
  for (size_t i = 0; i < bytes; i += 2) {
    sum += uint32_t{p[i]} << 8 | (i + 1 < bytes ? p[i + 1] : 0);
    sum = (sum & 0xffff) + (sum >> 16);
  }
  return static_cast<uint16_t>(sum);
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(InternetChecksum, sum__matches_rfc1071_and_dpdk_at_every_length_and_alignment) {
  std::mt19937 rng(1071);
  for (size_t length = 0; length <= 300; ++length) {
    for (size_t offset = 0; offset < 8; ++offset) {
      const auto buffer = random_bytes(rng, length + offset);
      const uint8_t* data = buffer.data() + offset;
      const uint16_t ours = ones_complement_fold(ones_complement_add(0, data, length));
      // Our sum is in memory order; RFC 1071's is big-endian (the sum is order-free).
      EXPECT_EQ(rte_be_to_cpu_16(ours), rfc1071_sum(data, length))
          << "length " << length << " offset " << offset;
      // DPDK folds an all-zero sum to 0, as we do, and to 0xffff never.
      EXPECT_EQ(ours, rte_raw_cksum(data, length)) << "length " << length;
    }
  }
}

TEST(InternetChecksum, sum__holds_for_the_largest_datagram_of_all_ones) {
  // 65535 bytes of 0xff: the most any IP datagram can add, to check nothing overflows.
  const std::vector<uint8_t> ones(65535, 0xff);
  EXPECT_EQ(
      rte_be_to_cpu_16(ones_complement_fold(ones_complement_add(0, ones.data(), ones.size()))),
      rfc1071_sum(ones.data(), ones.size()));
  // Without the odd last byte, words of all ones sum to all ones.
  EXPECT_EQ(ones_complement_fold(ones_complement_add(0, ones.data(), ones.size() - 1)), 0xffff);
  const std::vector<uint8_t> zeros(9000, 0);
  EXPECT_EQ(ones_complement_fold(ones_complement_add(0, zeros.data(), zeros.size())), 0);
}

TEST(InternetChecksum, sum__can_be_taken_in_pieces_of_even_length) {
  std::mt19937 rng(7);
  const auto data = random_bytes(rng, 1452);
  const uint64_t whole = ones_complement_add(0, data.data(), data.size());
  const uint64_t pieces = ones_complement_add(ones_complement_add(0, data.data(), 606),
                                              data.data() + 606, data.size() - 606);
  EXPECT_EQ(ones_complement_fold(whole), ones_complement_fold(pieces));
}

// An IPv4 header (20 bytes, or more with options) and a UDP datagram of `payload` random
// bytes behind it, checksum fields zero.
struct Ipv4Datagram {
  std::vector<uint8_t> bytes;
  uint32_t header_bytes;
  Ipv4Datagram(std::mt19937& rng, uint32_t options_words, uint32_t payload)
      : bytes(random_bytes(rng, 20 + 4 * options_words + 8 + payload)),
        header_bytes(20 + 4 * options_words) {
    ip()->version_ihl = static_cast<uint8_t>(0x40 | (5 + options_words));
    ip()->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(bytes.size()));
    ip()->hdr_checksum = 0;
    ip()->next_proto_id = IPPROTO_UDP;
    udp()->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(8 + payload));
    udp()->dgram_cksum = 0;
  }
  rte_ipv4_hdr* ip() { return reinterpret_cast<rte_ipv4_hdr*>(bytes.data()); }
  rte_udp_hdr* udp() { return reinterpret_cast<rte_udp_hdr*>(bytes.data() + header_bytes); }
};

struct Ipv6Datagram {
  std::vector<uint8_t> bytes;
  Ipv6Datagram(std::mt19937& rng, uint8_t protocol, uint32_t payload)
      : bytes(random_bytes(rng, 40 + 8 + payload)) {
    ip()->payload_len = rte_cpu_to_be_16(static_cast<uint16_t>(8 + payload));
    ip()->proto = protocol;
    udp()->dgram_cksum = 0;  // also where ICMPv6 keeps its checksum (offset 2)
  }
  rte_ipv6_hdr* ip() { return reinterpret_cast<rte_ipv6_hdr*>(bytes.data()); }
  rte_udp_hdr* udp() { return reinterpret_cast<rte_udp_hdr*>(bytes.data() + 40); }
};

TEST(InternetChecksum, ipv4__matches_dpdk_and_every_flipped_bit_is_caught) {
  std::mt19937 rng(768);
  for (uint32_t payload : {0u, 1u, 2u, 3u, 17u, 64u, 1024u, 1471u, 1472u, 8972u}) {
    for (uint32_t options : {0u, 1u, 10u}) {
      Ipv4Datagram d(rng, options, payload);
      const uint16_t header = ipv4_header_checksum(d.ip());
      EXPECT_EQ(header, rte_ipv4_cksum(d.ip())) << payload;
      d.ip()->hdr_checksum = header;
      EXPECT_TRUE(ipv4_header_checksum_ok(d.ip(), d.header_bytes));

      const uint16_t l4 = l4_checksum(d.ip(), d.udp());
      EXPECT_EQ(l4, rte_ipv4_udptcp_cksum(d.ip(), d.udp())) << payload;
      d.udp()->dgram_cksum = l4;
      ASSERT_TRUE(l4_checksum_ok(d.ip(), d.udp())) << payload;

      // One bit flipped anywhere the UDP checksum covers: the datagram, or the addresses
      // of the pseudo-header.
      std::uniform_int_distribution<size_t> byte(d.header_bytes, d.bytes.size() - 1);
      for (int trial = 0; trial < 20; ++trial) {
        const size_t at = trial == 0 ? 12 : trial == 1 ? 19 : byte(rng);
        const auto bit = static_cast<uint8_t>(1u << (rng() % 8));
        d.bytes[at] ^= bit;
        EXPECT_FALSE(l4_checksum_ok(d.ip(), d.udp())) << "byte " << at;
        d.bytes[at] ^= bit;
      }
      d.bytes[1] ^= 0x10;  // the header's type of service
      EXPECT_FALSE(ipv4_header_checksum_ok(d.ip(), d.header_bytes));
    }
  }
}

TEST(InternetChecksum, ipv6__matches_dpdk_for_udp_and_icmpv6) {
  std::mt19937 rng(8200);
  for (uint8_t protocol : {uint8_t{IPPROTO_UDP}, uint8_t{IPPROTO_ICMPV6}}) {
    for (uint32_t payload : {0u, 1u, 5u, 16u, 1451u, 1452u, 8952u}) {
      Ipv6Datagram d(rng, protocol, payload);
      const uint16_t l4 = l4_checksum(d.ip(), d.udp());
      EXPECT_EQ(l4, rte_ipv6_udptcp_cksum(d.ip(), d.udp())) << payload;
      d.udp()->dgram_cksum = l4;
      ASSERT_TRUE(l4_checksum_ok(d.ip(), d.udp()));
      for (size_t at :
           {size_t{8}, size_t{39}, d.bytes.size() - 1}) {  // source, destination, payload
        d.bytes[at] ^= 0x01;
        EXPECT_FALSE(l4_checksum_ok(d.ip(), d.udp())) << "byte " << at;
        d.bytes[at] ^= 0x01;
      }
    }
  }
}

TEST(InternetChecksum, a_computed_zero_is_sent_as_all_ones) {
  std::mt19937 rng(0);
  Ipv4Datagram d(rng, 0, 16);
  // Choose the last payload word so that the datagram sums to all ones: its checksum
  // computes to 0, which UDP must send as 0xffff (0 means "no checksum" over IPv4).
  uint8_t* last = d.bytes.data() + d.bytes.size() - 2;  // an even offset in the datagram
  last[0] = last[1] = 0;
  const uint16_t fill = l4_checksum(d.ip(), d.udp());  // what the rest lacks of all ones
  std::memcpy(last, &fill, 2);
  EXPECT_EQ(l4_checksum(d.ip(), d.udp()), 0xffff);
  d.udp()->dgram_cksum = 0xffff;
  EXPECT_TRUE(l4_checksum_ok(d.ip(), d.udp()));
}

}  // namespace
}  // namespace spray::dp
