// NeighbourTable: IPv4 address -> Ethernet address, for datapaths that build their own
// Ethernet frames (DPDK). Filled from configuration ("10.0.0.2=02:00:00:00:00:02"),
// from the kernel's neighbour table (/proc/net/arp of the calling process's network
// namespace) and from ARP traffic addressed to us. Looked up once per transmitted
// packet, so lookups are a flat hash probe with no allocation; inserts happen off the
// fast path (open, ARP) and are bounded by `max_entries`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/base/flat_map.h"

namespace spray::dp {

using MacAddress = std::array<uint8_t, 6>;

// "02:00:00:00:00:01" -> bytes; nullopt when malformed.
std::optional<MacAddress> parse_mac(const std::string& text);
std::string mac_to_string(const MacAddress& mac);
// "10.0.0.1" -> host-order IPv4; nullopt when malformed.
std::optional<uint32_t> parse_ipv4(const std::string& text);

class NeighbourTable {
 public:
  explicit NeighbourTable(uint32_t max_entries = 4096);

  // Inserts or replaces. False when the table is full.
  bool set(uint32_t ipv4, const MacAddress& mac);
  // Nullptr when unknown. The pointer stays valid until the next set().
  const MacAddress* find(uint32_t ipv4) const {
    const auto slot = by_ip_.find(ipv4);
    return slot ? &macs_[*slot] : nullptr;
  }
  size_t size() const { return macs_.size(); }

  // Parses "IP=MAC"; on failure returns false and a message naming the problem.
  bool add_from_text(const std::string& entry, std::string& error);
  // Adds every complete entry of a /proc/net/arp-formatted file; returns how many.
  size_t load_kernel_table(const std::string& path = "/proc/net/arp");

 private:
  uint32_t max_entries_;
  FlatMap by_ip_;                 // IPv4 -> index into macs_
  std::vector<MacAddress> macs_;  // reserved to max_entries_, so find() pointers are stable
};

}  // namespace spray::dp
