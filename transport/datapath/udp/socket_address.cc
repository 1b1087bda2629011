#include "transport/datapath/udp/socket_address.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace spray::dp {

std::optional<NetAddr> parse_ip(const std::string& text, uint16_t port) {
  NetAddr a;
  a.port = port;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    a.family = NetAddr::Family::kIpv4;
    std::memcpy(a.ip.data(), &v4, 4);
    return a;
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    a.family = NetAddr::Family::kIpv6;
    std::memcpy(a.ip.data(), &v6, 16);
    return a;
  }
  return std::nullopt;
}

std::optional<NetAddr> parse_ip_port(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const unsigned long p = std::stoul(port);
  if (p > 65535) return std::nullopt;
  return parse_ip(host, static_cast<uint16_t>(p));
}

socklen_t to_sockaddr(const NetAddr& a, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof(out));
  if (a.family == NetAddr::Family::kIpv6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(a.port);
    std::memcpy(&s->sin6_addr, a.ip.data(), 16);
    return sizeof(sockaddr_in6);
  }
  auto* s = reinterpret_cast<sockaddr_in*>(&out);
  s->sin_family = AF_INET;
  s->sin_port = htons(a.port);
  std::memcpy(&s->sin_addr, a.ip.data(), 4);
  return sizeof(sockaddr_in);
}

NetAddr from_sockaddr(const sockaddr_storage& in) {
  NetAddr a;
  if (in.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&in);
    a.family = NetAddr::Family::kIpv6;
    a.port = ntohs(s->sin6_port);
    std::memcpy(a.ip.data(), &s->sin6_addr, 16);
  } else if (in.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&in);
    a.family = NetAddr::Family::kIpv4;
    a.port = ntohs(s->sin_port);
    std::memcpy(a.ip.data(), &s->sin_addr, 4);
  }
  return a;
}

std::string ip_to_string(const NetAddr& a) {
  char text[INET6_ADDRSTRLEN] = {};
  const int family = a.family == NetAddr::Family::kIpv6 ? AF_INET6 : AF_INET;
  ::inet_ntop(family, a.ip.data(), text, sizeof(text));
  return text;
}

std::string explain_bind_error(int err, const NetAddr& addr, const std::string& text) {
  if (err == EADDRINUSE) return fmt::format("UDP port {} on {} is already in use", addr.port, text);
  if (err == EADDRNOTAVAIL) return fmt::format("address {} is not an address of this host", text);
  return fmt::format("bind({}): {}", addr.to_string(), std::strerror(err));
}

}  // namespace spray::dp
