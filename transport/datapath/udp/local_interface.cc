#include "transport/datapath/udp/local_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "transport/datapath/udp/socket_address.h"

namespace spray::dp {
namespace {

using InterfaceList = std::unique_ptr<ifaddrs, decltype(&freeifaddrs)>;

// This host's interface addresses (getifaddrs); null when they cannot be read.
InterfaceList interface_list() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) list = nullptr;
  return InterfaceList(list, freeifaddrs);
}

// The interface that holds an address, and what udp_payload_mtu asks of the two.
struct Holder {
  std::string name;               // "" when no interface holds the address
  bool v6 = false;                // the address is IPv6
  bool loopback_device = false;   // the interface is a loopback device (IFF_LOOPBACK)
  bool loopback_address = false;  // 127.0.0.0/8 or ::1: it never leaves the host
};

Holder interface_of(const std::string& address) {
  Holder h;
  const std::optional<NetAddr> parsed = parse_ip(address);
  if (!parsed) return h;
  h.v6 = parsed->family == NetAddr::Family::kIpv6;
  h.loopback_address = parsed->is_loopback();
  const InterfaceList list = interface_list();
  for (const ifaddrs* i = list.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    const bool holds = (!h.v6 && i->ifa_addr->sa_family == AF_INET &&
                        std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr,
                                    parsed->ip.data(), 4) == 0) ||
                       (h.v6 && i->ifa_addr->sa_family == AF_INET6 &&
                        std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                                    parsed->ip.data(), 16) == 0);
    if (holds) {
      h.name = i->ifa_name;
      h.loopback_device = (i->ifa_flags & IFF_LOOPBACK) != 0;
      return h;
    }
  }
  return h;
}

// Interface `name`'s MTU (SIOCGIFMTU on a socket of the family), or 0 with `error` set.
int interface_mtu(const std::string& name, bool v6, std::string& error) {
  const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    error = "socket: " + std::string(std::strerror(errno));
    return 0;
  }
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  const int rc = ioctl(fd, SIOCGIFMTU, &req);
  close(fd);
  if (rc != 0) {
    error = "SIOCGIFMTU on " + name + ": " + std::strerror(errno);
    return 0;
  }
  return req.ifr_mtu;
}

// The smallest MTU among the interfaces that are up, are not loopback devices and hold an
// address of the family; 0 when there is none.
int smallest_outward_mtu(bool v6) {
  int smallest = 0;
  std::string error;  // an interface whose MTU cannot be read is left out
  const InterfaceList list = interface_list();
  for (const ifaddrs* i = list.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != (v6 ? AF_INET6 : AF_INET)) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const int mtu = interface_mtu(i->ifa_name, v6, error);
    if (mtu > 0 && (smallest == 0 || mtu < smallest)) smallest = mtu;
  }
  return smallest;
}

}  // namespace

uint32_t udp_payload_mtu(const std::string& address, std::string& error) {
  const Holder holder = interface_of(address);
  if (holder.name.empty()) {
    error = "no local interface has address " + address;
    return 0;
  }
  const bool v6 = holder.v6;
  int mtu = interface_mtu(holder.name, v6, error);
  if (mtu == 0) return 0;
  // A host address on the loopback device (a routed host's own address, reached over
  // ECMP routes through its links) leaves by the host's other interfaces, not by lo:
  // packets must fit the smallest of them. Sized by lo's 64 KiB MTU (capped to 9000),
  // every GSO run of them was refused on 1500-byte links (EMSGSIZE) and the kernel
  // fragmented each single one (tests/integration/netns_multipath.sh, provider_mtu).
  if (holder.loopback_device && !holder.loopback_address) {
    if (const int outward = smallest_outward_mtu(v6); outward > 0) mtu = outward;
  }
  const uint32_t headers = ip_udp_header_bytes(v6);
  const uint32_t capped = std::min<uint32_t>(static_cast<uint32_t>(mtu), 9000);
  if (capped <= headers + 256) {
    error = "interface " + holder.name + " MTU " + std::to_string(mtu) + " is too small";
    return 0;
  }
  return capped - headers;
}

std::string interface_address(const std::string& name, std::string& error) {
  if (if_nametoindex(name.c_str()) == 0) {
    error = "no network interface is named '" + name + "'";
    return {};
  }
  const InterfaceList list = interface_list();
  std::string v6;
  for (const ifaddrs* i = list.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr || name != i->ifa_name) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      return inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    }
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr))
        v6 = inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    }
  }
  if (v6.empty()) {
    error = "network interface '" + name +
            "' has no IPv4 address and no IPv6 address that is not link-local";
  }
  return v6;
}

std::vector<NetAddr> local_addresses() {
  std::vector<NetAddr> out;
  const InterfaceList list = interface_list();
  for (const ifaddrs* i = list.get(); i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    sockaddr_storage ss{};
    std::memcpy(&ss, i->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    NetAddr a = from_sockaddr(ss);
    a.port = 0;
    out.push_back(a);
  }
  return out;
}

}  // namespace spray::dp
