#include "transport/datapath/udp/bound_socket.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "transport/datapath/udp/socket_address.h"

namespace spray::dp {

void set_socket_buffers(int fd, uint32_t bytes) {
  const int size = static_cast<int>(std::min<uint32_t>(bytes, INT_MAX / 2));
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

BoundSocket open_bound_udp_socket(const NetAddr& at, uint32_t buffer_bytes, const std::string& text,
                                  std::string& error) {
  const int family = at.family == NetAddr::Family::kIpv6 ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = fmt::format("socket(): {}", std::strerror(errno));
    return {};
  }
  set_socket_buffers(fd, buffer_bytes);
  sockaddr_storage sa;
  socklen_t len = to_sockaddr(at, sa);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    error = explain_bind_error(errno, at, text);
    ::close(fd);
    return {};
  }
  len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return {fd, from_sockaddr(sa)};
}

}  // namespace spray::dp
