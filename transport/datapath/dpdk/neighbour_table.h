// NeighbourTable: IP address -> Ethernet address, for datapaths that build their own
// Ethernet frames (DPDK). Filled from configuration ("10.0.0.2=02:00:00:00:00:02",
// "fd00::2=02:00:00:00:00:02"), from the kernel's neighbour tables of the calling
// process's network namespace (IPv4 from /proc/net/arp, IPv6 over rtnetlink) and from
// ARP and IPv6 neighbour discovery addressed to us. Looked up once per transmitted
// packet, so lookups are a flat hash probe with no allocation; inserts happen off the
// fast path (open, ARP, NDP) and are bounded by `max_entries`.
//
// Configured entries are kept as given: nothing learnt replaces or evicts them, so a
// host on the link cannot redirect a configured neighbour with forged ARP. Learnt ones
// (the kernel's, ARP, NDP) make room for newer ones once the table is full, taken in
// turn, so a flood of forged senders costs us entries, never the ability to learn.
//
// Keys are 16-byte addresses: IPv6 as it is, IPv4 in its v4-mapped form
// (::ffff:a.b.c.d), so one table serves either family.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "transport/base/flat_map.h"

namespace spray::dp {

using MacAddress = std::array<uint8_t, 6>;
// An IPv6 address in network byte order, or an IPv4 one as ::ffff:a.b.c.d.
using IpBytes = std::array<uint8_t, 16>;

// "02:00:00:00:00:01" -> bytes; nullopt when malformed.
std::optional<MacAddress> parse_mac(const std::string& text);
std::string mac_to_string(const MacAddress& mac);
// "10.0.0.1" -> host-order IPv4; nullopt when malformed.
std::optional<uint32_t> parse_ipv4(const std::string& text);
// "10.0.0.1" (v4-mapped) or "fd00::1" -> bytes; nullopt when malformed.
std::optional<IpBytes> parse_ip_bytes(const std::string& text);
// Host-order IPv4 -> ::ffff:a.b.c.d. Inline: once per packet sent over IPv4.
inline IpBytes ipv4_mapped(uint32_t ipv4) {
  IpBytes ip{};
  ip[10] = ip[11] = 0xff;
  for (size_t byte = 0; byte < 4; ++byte) ip[15 - byte] = static_cast<uint8_t>(ipv4 >> (8 * byte));
  return ip;
}
// Whether `ip` is an IPv4 address in v4-mapped form.
bool is_ipv4_mapped(const IpBytes& ip);
// ::ffff:a.b.c.d -> host-order IPv4 (the inverse of ipv4_mapped).
inline uint32_t ipv4_from_mapped(const IpBytes& ip) {
  return uint32_t{ip[12]} << 24 | uint32_t{ip[13]} << 16 | uint32_t{ip[14]} << 8 | ip[15];
}

class NeighbourTable {
 public:
  explicit NeighbourTable(uint32_t max_entries = 4096);

  enum class Origin : uint8_t { kLearned, kConfigured };
  // Inserts or replaces; a learnt entry leaves a configured one as it is. When the table
  // is full, a learnt entry gives way. False only when every entry is configured.
  bool set(const IpBytes& ip, const MacAddress& mac, Origin origin = Origin::kLearned);
  bool set(uint32_t ipv4, const MacAddress& mac, Origin origin = Origin::kLearned) {
    return set(ipv4_mapped(ipv4), mac, origin);
  }
  // Nullptr when unknown. The pointer stays valid until the next set().
  const MacAddress* find(const IpBytes& ip) const {
    const auto first = by_fold_.find(fold(ip));
    for (uint32_t i = first ? *first : kNone; i != kNone; i = entries_[i].next_same_fold) {
      if (same_address(entries_[i].ip, ip)) return &entries_[i].mac;
    }
    return nullptr;
  }
  const MacAddress* find(uint32_t ipv4) const { return find(ipv4_mapped(ipv4)); }
  size_t size() const { return entries_.size(); }
  uint64_t evictions() const { return evictions_; }  // learnt entries that made room

  // Parses "IP=MAC" (IPv4 or IPv6); on failure returns false and a message naming the
  // problem.
  bool add_from_text(const std::string& entry, std::string& error);
  // Adds every complete entry of a /proc/net/arp-formatted file; returns how many.
  size_t load_kernel_table(const std::string& path = "/proc/net/arp");
  // Adds every usable entry of the kernel's IPv6 neighbour table (reachable, stale,
  // delayed, probing, permanent or no-ARP, with a MAC; multicast addresses left out),
  // read over rtnetlink with libnl. Returns how many; 0 when netlink refuses.
  size_t load_kernel_ipv6_table();

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Entry {
    IpBytes ip{};
    MacAddress mac{};
    uint32_t next_same_fold = kNone;  // the next entry whose address folds alike
    bool configured = false;
  };
  // 16 bytes to the map's 64-bit key. Two addresses may fold alike; find() compares the
  // whole address along the chain, so that costs a step, never a wrong answer.
  static uint64_t fold(const IpBytes& ip) {
    uint64_t high, low;
    std::memcpy(&high, ip.data(), 8);
    std::memcpy(&low, ip.data() + 8, 8);
    return (high * 0x9e3779b97f4a7c15ULL) ^ low;
  }
  // Two 8-byte compares, inline: std::array's == calls memcmp, once per packet sent.
  static bool same_address(const IpBytes& a, const IpBytes& b) {
    uint64_t a_high, a_low, b_high, b_low;
    std::memcpy(&a_high, a.data(), 8);
    std::memcpy(&a_low, a.data() + 8, 8);
    std::memcpy(&b_high, b.data(), 8);
    std::memcpy(&b_low, b.data() + 8, 8);
    return a_high == b_high && a_low == b_low;
  }
  // A learnt entry to give way, taken in turn from `next_victim_`; kNone when all are
  // configured.
  uint32_t pick_victim();
  // Takes entry `index` out of its fold's chain.
  void unlink(uint32_t index);

  uint32_t max_entries_;
  FlatMap by_fold_;             // fold(ip) -> index of the first entry of that fold
  std::vector<Entry> entries_;  // reserved to max_entries_, so find() pointers are stable
  uint32_t next_victim_ = 0;    // where pick_victim() looks first
  uint64_t evictions_ = 0;
};

}  // namespace spray::dp
