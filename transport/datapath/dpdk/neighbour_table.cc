#include "transport/datapath/dpdk/neighbour_table.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/neighbour.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>

#include <cstring>
#include <fstream>
#include <memory>
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

bool is_ipv4_mapped(const IpBytes& ip) {
  constexpr std::array<uint8_t, 12> kPrefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(ip.data(), kPrefix.data(), kPrefix.size()) == 0;
}

std::optional<IpBytes> parse_ip_bytes(const std::string& text) {
  if (const auto v4 = parse_ipv4(text)) return ipv4_mapped(*v4);
  IpBytes ip{};
  if (::inet_pton(AF_INET6, text.c_str(), ip.data()) != 1) return std::nullopt;
  return ip;
}

NeighbourTable::NeighbourTable(uint32_t max_entries)
    : max_entries_(max_entries), by_fold_(max_entries) {
  entries_.reserve(max_entries);
}

bool NeighbourTable::set(const IpBytes& ip, const MacAddress& mac, Origin origin) {
  const bool configured = origin == Origin::kConfigured;
  const uint64_t key = fold(ip);
  const auto first = by_fold_.find(key);
  for (uint32_t i = first ? *first : kNone; i != kNone; i = entries_[i].next_same_fold) {
    if (!same_address(entries_[i].ip, ip)) continue;
    if (configured || !entries_[i].configured) {
      entries_[i].mac = mac;
      entries_[i].configured = entries_[i].configured || configured;
    }
    return true;
  }
  auto index = static_cast<uint32_t>(entries_.size());
  if (entries_.size() < max_entries_) {
    entries_.emplace_back();
  } else {
    index = pick_victim();
    if (index == kNone) return false;
    unlink(index);
    ++evictions_;
  }
  const auto head = by_fold_.find(key);  // unlink() may have changed this fold's chain
  entries_[index] = Entry{ip, mac, head ? *head : kNone, configured};
  by_fold_.insert(key, index);  // the newest entry heads its fold's chain
  return true;
}

uint32_t NeighbourTable::pick_victim() {
  const auto count = static_cast<uint32_t>(entries_.size());
  for (uint32_t step = 0; step < count; ++step) {
    const uint32_t i = (next_victim_ + step) % count;
    if (!entries_[i].configured) {
      next_victim_ = (i + 1) % count;
      return i;
    }
  }
  return kNone;
}

void NeighbourTable::unlink(uint32_t index) {
  const uint64_t key = fold(entries_[index].ip);
  const uint32_t after = entries_[index].next_same_fold;
  const uint32_t head = *by_fold_.find(key);
  if (head == index) {
    if (after == kNone) {
      by_fold_.erase(key);
    } else {
      by_fold_.insert(key, after);
    }
    return;
  }
  uint32_t i = head;
  while (entries_[i].next_same_fold != index) i = entries_[i].next_same_fold;
  entries_[i].next_same_fold = after;
}

bool NeighbourTable::add_from_text(const std::string& entry, std::string& error) {
  const auto eq = entry.find('=');
  const auto ip = eq == std::string::npos ? std::nullopt : parse_ip_bytes(entry.substr(0, eq));
  const auto mac = eq == std::string::npos ? std::nullopt : parse_mac(entry.substr(eq + 1));
  if (!ip || !mac) {
    error = fmt::format(
        "neighbour '{}' is not IP=MAC (e.g. 10.0.0.2=02:00:00:00:00:02 or "
        "fd00::2=02:00:00:00:00:02)",
        entry);
    return false;
  }
  if (!set(*ip, *mac, Origin::kConfigured)) {
    error = fmt::format("neighbour table full of configured entries ({})", max_entries_);
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

size_t NeighbourTable::load_kernel_ipv6_table() {
  const std::unique_ptr<nl_sock, void (*)(nl_sock*)> sock(nl_socket_alloc(), nl_socket_free);
  if (!sock || nl_connect(sock.get(), NETLINK_ROUTE) != 0) return 0;
  nl_cache* dump = nullptr;
  if (rtnl_neigh_alloc_cache(sock.get(), &dump) != 0) return 0;
  const std::unique_ptr<nl_cache, void (*)(nl_cache*)> cache(dump, nl_cache_free);
  constexpr int kUsable =
      NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
  size_t added = 0;
  for (nl_object* entry = nl_cache_get_first(cache.get()); entry;
       entry = nl_cache_get_next(entry)) {
    auto* neighbour = reinterpret_cast<rtnl_neigh*>(entry);
    if (rtnl_neigh_get_family(neighbour) != AF_INET6 ||
        (rtnl_neigh_get_state(neighbour) & kUsable) == 0)
      continue;
    nl_addr* dst = rtnl_neigh_get_dst(neighbour);
    nl_addr* lladdr = rtnl_neigh_get_lladdr(neighbour);
    IpBytes ip{};
    MacAddress mac{};
    if (!dst || !lladdr || nl_addr_get_len(dst) != ip.size() ||
        nl_addr_get_len(lladdr) != mac.size())
      continue;
    std::memcpy(ip.data(), nl_addr_get_binary_addr(dst), ip.size());
    std::memcpy(mac.data(), nl_addr_get_binary_addr(lladdr), mac.size());
    if (ip[0] == 0xff) continue;  // multicast: its MAC is derived, never looked up
    added += set(ip, mac);
  }
  return added;
}

}  // namespace spray::dp
