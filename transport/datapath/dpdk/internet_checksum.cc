#include "transport/datapath/dpdk/internet_checksum.h"

#include <bit>
#include <cstring>

namespace spray::dp {
namespace {

// The pseudo-header's protocol and length, as the 16-bit words of memory order they are
// on the wire (a zero byte then the protocol; the length big-endian). The addresses are
// summed from the IP header itself, where source and destination are adjacent.
uint64_t pseudo_header_tail(uint8_t protocol, uint16_t l4_bytes) {
  return uint64_t{rte_cpu_to_be_16(protocol)} + rte_cpu_to_be_16(l4_bytes);
}

uint16_t checksum_field(uint64_t sum) {
  const uint16_t checksum = static_cast<uint16_t>(~ones_complement_fold(sum));
  return checksum == 0 ? 0xffff : checksum;
}

uint64_t ipv4_l4_sum(const rte_ipv4_hdr* ip, const void* l4) {
  const uint16_t header_bytes = static_cast<uint16_t>(rte_ipv4_hdr_len(ip));
  const uint16_t l4_bytes =
      static_cast<uint16_t>(rte_be_to_cpu_16(ip->total_length) - header_bytes);
  const uint64_t sum = ones_complement_add(pseudo_header_tail(ip->next_proto_id, l4_bytes),
                                           &ip->src_addr, 2 * sizeof(ip->src_addr));
  return ones_complement_add(sum, l4, l4_bytes);
}

uint64_t ipv6_l4_sum(const rte_ipv6_hdr* ip, const void* l4, uint8_t protocol, uint16_t l4_bytes) {
  const uint64_t sum = ones_complement_add(pseudo_header_tail(protocol, l4_bytes), ip->src_addr,
                                           2 * sizeof(ip->src_addr));
  return ones_complement_add(sum, l4, l4_bytes);
}

}  // namespace

uint64_t ones_complement_add(uint64_t sum, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  // One independent add per 32-bit word: no carry chain, so the compiler vectorises it.
  size_t i = 0;
  for (; i + 4 <= bytes; i += 4) {
    uint32_t word;
    std::memcpy(&word, p + i, 4);
    sum += word;
  }
  if (i + 2 <= bytes) {
    uint16_t half;
    std::memcpy(&half, p + i, 2);
    sum += half;
    i += 2;
  }
  if (i < bytes) {
    // The last byte is the first of a 16-bit word whose second byte is zero.
    sum += std::endian::native == std::endian::little ? uint64_t{p[i]} : uint64_t{p[i]} << 8;
  }
  return sum;
}

uint16_t ones_complement_fold(uint64_t sum) {
  // 2^16 is 1 modulo 0xffff, so adding the halves keeps the one's-complement value.
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffffffff) + (sum >> 32);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

uint16_t l4_checksum(const rte_ipv4_hdr* ip, const void* l4) {
  return checksum_field(ipv4_l4_sum(ip, l4));
}
uint16_t l4_checksum(const rte_ipv6_hdr* ip, const void* l4) {
  return l4_checksum(ip, l4, ip->proto, rte_be_to_cpu_16(ip->payload_len));
}
uint16_t l4_checksum(const rte_ipv6_hdr* ip, const void* l4, uint8_t protocol, uint16_t l4_bytes) {
  return checksum_field(ipv6_l4_sum(ip, l4, protocol, l4_bytes));
}

bool l4_checksum_ok(const rte_ipv4_hdr* ip, const void* l4) {
  return ones_complement_fold(ipv4_l4_sum(ip, l4)) == 0xffff;
}
bool l4_checksum_ok(const rte_ipv6_hdr* ip, const void* l4) {
  return l4_checksum_ok(ip, l4, ip->proto, rte_be_to_cpu_16(ip->payload_len));
}
bool l4_checksum_ok(const rte_ipv6_hdr* ip, const void* l4, uint8_t protocol, uint16_t l4_bytes) {
  return ones_complement_fold(ipv6_l4_sum(ip, l4, protocol, l4_bytes)) == 0xffff;
}

uint16_t ipv4_header_checksum(const rte_ipv4_hdr* ip) {
  return static_cast<uint16_t>(
      ~ones_complement_fold(ones_complement_add(0, ip, rte_ipv4_hdr_len(ip))));
}
bool ipv4_header_checksum_ok(const rte_ipv4_hdr* ip, uint32_t header_bytes) {
  return ones_complement_fold(ones_complement_add(0, ip, header_bytes)) == 0xffff;
}

}  // namespace spray::dp
