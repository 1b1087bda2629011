#include "transport/datapath/dpdk/neighbour_table.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace spray::dp {

std::optional<MacAddress> parse_mac(const std::string& text) {
  MacAddress mac{};
  unsigned bytes[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &bytes[0], &bytes[1], &bytes[2],
                  &bytes[3], &bytes[4], &bytes[5], &tail) != 6)
    return std::nullopt;
  for (size_t i = 0; i < 6; ++i) mac[i] = static_cast<uint8_t>(bytes[i]);
  return mac;
}

std::string mac_to_string(const MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4],
                     m[5]);
}

std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

NeighbourTable::NeighbourTable(uint32_t max_entries)
    : max_entries_(max_entries), by_ip_(max_entries) {
  macs_.reserve(max_entries);
}

bool NeighbourTable::set(uint32_t ipv4, const MacAddress& mac) {
  if (const auto slot = by_ip_.find(ipv4)) {
    macs_[*slot] = mac;
    return true;
  }
  if (macs_.size() >= max_entries_) return false;
  by_ip_.insert(ipv4, static_cast<uint32_t>(macs_.size()));
  macs_.push_back(mac);
  return true;
}

bool NeighbourTable::add_from_text(const std::string& entry, std::string& error) {
  const auto eq = entry.find('=');
  const auto ip = eq == std::string::npos ? std::nullopt : parse_ipv4(entry.substr(0, eq));
  const auto mac = eq == std::string::npos ? std::nullopt : parse_mac(entry.substr(eq + 1));
  if (!ip || !mac) {
    error = fmt::format("neighbour '{}' is not IPV4=MAC (e.g. 10.0.0.2=02:00:00:00:00:02)", entry);
    return false;
  }
  if (!set(*ip, *mac)) {
    error = fmt::format("neighbour table full ({} entries)", max_entries_);
    return false;
  }
  return true;
}

size_t NeighbourTable::load_kernel_table(const std::string& path) {
  // Format: "IP address  HW type  Flags  HW address  Mask  Device", one header line.
  // Flags 0x2 (ATF_COM) marks a completed entry; incomplete ones have a zero MAC.
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  size_t added = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string ip, hw_type, flags, mac;
    if (!(fields >> ip >> hw_type >> flags >> mac)) continue;
    const auto flag_bits = std::strtoul(flags.c_str(), nullptr, 16);
    const auto addr = parse_ipv4(ip);
    const auto hw = parse_mac(mac);
    if ((flag_bits & 0x2) == 0 || !addr || !hw) continue;
    added += set(*addr, *hw);
  }
  return added;
}

}  // namespace spray::dp
