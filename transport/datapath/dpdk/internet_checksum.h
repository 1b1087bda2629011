// The Internet checksum (RFC 1071) that DPDK frames carry: the IPv4 header checksum and
// the UDP and ICMPv6 checksums over a pseudo-header (RFC 768, RFC 8200 8.1) and the
// datagram.
//
// Why our own and not DPDK's rte_raw_cksum: DPDK's is a loop of 16-bit adds that GCC's
// -O2 leaves scalar, and on the receive path that loop's speed moved by a third with
// where it landed in the code (docs/issue-3-record.md, 2026-12-06). Ours reads 32 bits a
// step into a 64-bit sum, which is twice the bytes per add when scalar and which GCC
// vectorises (internet_checksum.cc is compiled with its full cost model).
//
// Sums are taken over 16-bit words in memory order, as RFC 1071 allows (the one's-
// complement sum does not depend on byte order), so a folded sum is stored as it is and
// a valid datagram folds to 0xffff in either byte order.
#pragma once

#include <rte_ip.h>

#include <cstddef>
#include <cstdint>

namespace spray::dp {

// Adds `bytes` bytes at `data` (any alignment; an odd last byte is padded with zero) to
// the unfolded one's-complement sum `sum`. Safe for any frame: a 64-bit sum of 32-bit
// words cannot wrap below 2^32 words.
uint64_t ones_complement_add(uint64_t sum, const void* data, size_t bytes);

// Folds an unfolded sum to 16 bits; 0 only when every word summed was 0.
uint16_t ones_complement_fold(uint64_t sum);

// What a UDP header's checksum field must hold for the datagram `l4` (its header with a
// zero checksum field, then its payload) behind `ip`; the length is read from
// `ip`. Never 0 (RFC 768: a computed 0 is sent as 0xffff). Also right for ICMPv6 behind
// IPv6, where 0xffff and 0 are the same one's-complement value.
uint16_t l4_checksum(const rte_ipv4_hdr* ip, const void* l4);
uint16_t l4_checksum(const rte_ipv6_hdr* ip, const void* l4);

// Whether the datagram `l4` behind `ip`, its checksum field included, sums to all ones.
bool l4_checksum_ok(const rte_ipv4_hdr* ip, const void* l4);
bool l4_checksum_ok(const rte_ipv6_hdr* ip, const void* l4);

// The same for an IPv6 upper-layer message behind extension headers (MLD behind its
// hop-by-hop options): the pseudo-header names its protocol and its own length, not the
// IPv6 header's next header and payload length.
uint16_t l4_checksum(const rte_ipv6_hdr* ip, const void* l4, uint8_t protocol, uint16_t l4_bytes);
bool l4_checksum_ok(const rte_ipv6_hdr* ip, const void* l4, uint8_t protocol, uint16_t l4_bytes);

// The IPv4 header checksum for `ip` with a zero checksum field, and whether `ip` (its
// checksum field included, `header_bytes` long with options) sums to all ones.
uint16_t ipv4_header_checksum(const rte_ipv4_hdr* ip);
bool ipv4_header_checksum_ok(const rte_ipv4_hdr* ip, uint32_t header_bytes);

}  // namespace spray::dp
