// Endpoint names in the provider's address formats (see endpoint_name.h).
#include "provider/endpoint_name.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "transport/datapath/udp/socket_address.h"

namespace spray::fi {

uint32_t address_format_of(const std::string& datapath) {
  return datapath == "verbs" ? FI_ADDR_IB_UD : FI_SOCKADDR_IN;
}

bool is_socket_format(uint32_t format) {
  return format == FI_SOCKADDR || format == FI_SOCKADDR_IN || format == FI_SOCKADDR_IN6 ||
         format == FI_FORMAT_UNSPEC;
}

size_t name_length(uint32_t format, const void* name) {
  if (format == FI_ADDR_IB_UD) return sizeof(IbUdName);
  if (!is_socket_format(format)) return 0;
  sa_family_t family;
  std::memcpy(&family, name, sizeof(family));  // names need not be aligned
  if (family == AF_INET) return sizeof(sockaddr_in);
  if (family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

size_t usual_name_length(uint32_t format) {
  if (format == FI_ADDR_IB_UD) return sizeof(IbUdName);
  return format == FI_SOCKADDR_IN6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

bool decode_name(uint32_t format, const void* name, dp::NetAddr& out) {
  if (format == FI_ADDR_IB_UD) {
    IbUdName n;
    std::memcpy(&n, name, sizeof(n));
    if (n.qpn == 0 || n.qpn > 0xffffff) return false;  // QP numbers are 24 bits; QP0 is SMI
    out = {};
    out.family = dp::NetAddr::Family::kVerbs;
    out.qpn = n.qpn;
    std::memcpy(out.ip.data(), n.gid, sizeof(n.gid));
    return true;
  }
  const size_t len = name_length(format, name);
  if (len == 0) return false;
  sockaddr_storage ss{};
  std::memcpy(&ss, name, len);
  out = dp::from_sockaddr(ss);
  return true;
}

size_t encode_name(const dp::NetAddr& a, void* out, size_t room) {
  if (a.family == dp::NetAddr::Family::kVerbs) {
    IbUdName n{};
    std::memcpy(n.gid, a.ip.data(), sizeof(n.gid));
    n.qpn = a.qpn;
    n.pkey = 0xffff;  // the default partition
    if (room >= sizeof(n)) std::memcpy(out, &n, sizeof(n));
    return sizeof(n);
  }
  sockaddr_storage ss{};
  const size_t len = dp::to_sockaddr(a, ss);
  if (room >= len) std::memcpy(out, &ss, len);
  return len;
}

std::string name_to_string(uint32_t format, const void* name) {
  dp::NetAddr a;
  if (!decode_name(format, name, a)) return "spray://?";
  if (a.family == dp::NetAddr::Family::kVerbs) {
    char gid[INET6_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET6, a.ip.data(), gid, sizeof(gid));
    return fmt::format("spray://ib-ud/{}/qpn={}", gid, a.qpn);
  }
  const std::string host = dp::ip_to_string(a);
  return a.family == dp::NetAddr::Family::kIpv6 ? fmt::format("spray://[{}]:{}", host, a.port)
                                                : fmt::format("spray://{}:{}", host, a.port);
}

}  // namespace spray::fi
