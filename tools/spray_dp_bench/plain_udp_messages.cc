// See plain_udp_messages.h.
#include "tools/spray_dp_bench/plain_udp_messages.h"

#include <fmt/format.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "transport/datapath/udp/gso_segment.h"

namespace spray::tools {

int open_loopback_udp(std::string& error) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = fmt::format("socket(): {}", std::strerror(errno));
    return -1;
  }
  const int on = 1, buffer = 8 << 20;  // capped by net.core.{r,w}mem_max
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  if (::setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) != 0) {
    error = fmt::format("UDP_GRO: {}", std::strerror(errno));
    ::close(fd);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    error = fmt::format("bind(127.0.0.1): {}", std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

sockaddr_in local_address_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a;
}

bool open_loopback_pair(UdpSide& a, UdpSide& b, std::string& error) {
  a.fd = open_loopback_udp(error);
  if (a.fd < 0) return false;
  b.fd = open_loopback_udp(error);
  if (b.fd < 0) {
    ::close(a.fd);
    a.fd = -1;
    return false;
  }
  a.peer = local_address_of(b.fd);
  b.peer = local_address_of(a.fd);
  return true;
}

MessageCut cut_message(size_t bytes, uint32_t datagram) {
  MessageCut cut{bytes, std::clamp<size_t>(datagram, 1, kMaxUdpPayload), 0};
  cut.piece = cut.datagram * std::clamp<size_t>(kMaxUdpPayload / cut.datagram, 1, kMaxGsoSegments);
  return cut;
}

bool send_message(const UdpSide& s, const MessageCut& cut, const uint8_t* data,
                  BenchClock::time_point deadline) {
  std::array<mmsghdr, kMaxPieces> msgs{};
  std::array<iovec, kMaxPieces> iov{};
  std::array<dp::GsoControl, kMaxPieces> cmsg;
  const size_t n = cut.pieces();
  for (size_t k = 0; k < n; ++k) {
    iov[k] = {const_cast<uint8_t*>(data) + k * cut.piece, cut.length(k)};
    msghdr& h = msgs[k].msg_hdr;
    h.msg_name = const_cast<sockaddr_in*>(&s.peer);
    h.msg_namelen = sizeof(s.peer);
    h.msg_iov = &iov[k];
    h.msg_iovlen = 1;
    if (cut.length(k) > cut.datagram) {  // more than one datagram: segmentation offload
      dp::set_gso_segment(h, cmsg[k], static_cast<uint16_t>(cut.datagram));
    }
  }
  size_t sent = 0;
  while (sent < n) {
    const int r = ::sendmmsg(s.fd, &msgs[sent], static_cast<unsigned>(n - sent), 0);
    if (r > 0) {
      sent += static_cast<size_t>(r);
    } else if ((errno != EAGAIN && errno != ENOBUFS) || BenchClock::now() > deadline) {
      return false;
    }
  }
  return true;
}

}  // namespace spray::tools
