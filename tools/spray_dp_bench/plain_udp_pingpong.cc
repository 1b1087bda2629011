// See plain_udp_pingpong.h.
#include "tools/spray_dp_bench/plain_udp_pingpong.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "transport/datapath/udp/gso_segment.h"

namespace spray::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxUdpPayload = 65507;  // 65535 - IPv4 header - UDP header
constexpr size_t kMaxGsoSegments = 64;    // UDP_MAX_SEGMENTS on older kernels
constexpr size_t kMaxPieces = 64;         // super-datagrams per message: 4 MiB at 64 KiB

// One side: a bound, non-blocking socket with GRO and large buffers, and its peer.
struct Side {
  int fd = -1;
  sockaddr_in peer{};
};

int open_socket(std::string& error) {
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

sockaddr_in address_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a;
}

// How a message is cut: `piece` bytes per super-datagram (whole datagrams), the last
// one shorter. Both sides compute the same, so the receiver places each piece at its
// offset without reading anything first.
struct Cut {
  size_t bytes = 0;
  size_t datagram = 0;
  size_t piece = 0;
  size_t pieces() const { return bytes == 0 ? 1 : (bytes + piece - 1) / piece; }
  size_t length(size_t k) const { return std::min(piece, bytes - k * piece); }
};

// The whole message in one sendmmsg (retried while the send buffer is full).
bool send_message(const Side& s, const Cut& cut, const uint8_t* data, Clock::time_point deadline) {
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
    } else if ((errno != EAGAIN && errno != ENOBUFS) || Clock::now() > deadline) {
      return false;
    }
  }
  return true;
}

// Spins until every piece of the message has landed in `data` at its offset. On loopback
// a GSO super-datagram reaches a GRO socket whole, so each receive is one piece.
bool receive_message(const Side& s, const Cut& cut, uint8_t* data, Clock::time_point deadline) {
  std::array<mmsghdr, kMaxPieces> msgs{};
  std::array<iovec, kMaxPieces> iov{};
  const size_t n = cut.pieces();
  // recvmmsg writes only the entries it fills, so the ones still waiting stay as set here.
  for (size_t k = 0; k < n; ++k) {
    iov[k] = {data + k * cut.piece, cut.length(k)};
    msgs[k].msg_hdr.msg_iov = &iov[k];
    msgs[k].msg_hdr.msg_iovlen = 1;
  }
  size_t got = 0;
  uint32_t polls = 0;
  while (got < n) {
    const int r =
        ::recvmmsg(s.fd, &msgs[got], static_cast<unsigned>(n - got), MSG_DONTWAIT, nullptr);
    if (r > 0) {
      for (size_t k = got; k < got + static_cast<size_t>(r); ++k) {
        if (msgs[k].msg_len != cut.length(k)) return false;  // a piece was cut or lost
      }
      got += static_cast<size_t>(r);
    } else if (++polls % 1024 == 0 && Clock::now() > deadline) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<PingpongResult> plain_udp_pingpong(size_t bytes, uint32_t datagram, int iterations,
                                                 double timeout_s, std::string& error) {
  Cut cut{bytes, std::clamp<size_t>(datagram, 1, kMaxUdpPayload), 0};
  cut.piece = cut.datagram * std::clamp<size_t>(kMaxUdpPayload / cut.datagram, 1, kMaxGsoSegments);
  if (cut.pieces() > kMaxPieces) {
    error = fmt::format("{} bytes is more than {} super-datagrams", bytes, kMaxPieces);
    return std::nullopt;
  }
  Side ping, pong;
  ping.fd = open_socket(error);
  if (ping.fd < 0) return std::nullopt;
  pong.fd = open_socket(error);
  if (pong.fd < 0) {
    ::close(ping.fd);
    return std::nullopt;
  }
  ping.peer = address_of(pong.fd);
  pong.peer = address_of(ping.fd);
  const auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::vector<uint8_t> out(bytes, 0x5a), in(bytes);
  const pid_t child = ::fork();
  if (child < 0) {
    error = fmt::format("fork(): {}", std::strerror(errno));
    ::close(ping.fd);
    ::close(pong.fd);
    return std::nullopt;
  }
  if (child == 0) {  // the echo side: receive, send back, iterations + 1 times
    ::close(ping.fd);
    for (int i = 0; i <= iterations; ++i) {
      const auto deadline = Clock::now() + timeout;
      if (!receive_message(pong, cut, in.data(), deadline) ||
          !send_message(pong, cut, in.data(), deadline))
        ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(pong.fd);
  bool ok = true;
  Clock::time_point start{};
  for (int i = 0; ok && i <= iterations; ++i) {
    if (i == 1) start = Clock::now();  // round 0 warms up
    const auto deadline = Clock::now() + timeout;
    ok = send_message(ping, cut, out.data(), deadline) &&
         receive_message(ping, cut, in.data(), deadline);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(ping.fd);
  if (!ok) ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = fmt::format(
        "a {}-byte round trip did not complete within {} s (datagrams dropped: are "
        "net.core.rmem_max and wmem_max at least a few MiB?)",
        bytes, timeout_s);
    return std::nullopt;
  }
  PingpongResult r;
  r.one_way_us = seconds * 1e6 / iterations / 2;
  r.megabytes_per_s = static_cast<double>(bytes) / r.one_way_us;
  return r;
}

}  // namespace spray::tools
