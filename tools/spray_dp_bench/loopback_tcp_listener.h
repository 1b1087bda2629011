// A TCP listener on 127.0.0.1 at a port the kernel picks (read it with getsockname), for
// the bare-TCP references spray-dp-bench measures (plain_stream.h, plain_tcp_allreduce.h).
#pragma once

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace spray::tools {

// The listening socket (backlog 1), or -1 and `error`.
inline int listen_loopback_tcp(std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd, 1) != 0) {
    error = fmt::format("TCP listener on 127.0.0.1: {}", std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace spray::tools
