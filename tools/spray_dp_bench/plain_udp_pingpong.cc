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

#include "tools/spray_dp_bench/plain_udp_messages.h"

namespace spray::tools {
namespace {

// Spins until every piece of the message has landed in `data` at its offset. On loopback
// a GSO super-datagram reaches a GRO socket whole, so each receive is one piece.
bool receive_message(const UdpSide& s, const MessageCut& cut, uint8_t* data,
                     BenchClock::time_point deadline) {
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
    } else if (++polls % 1024 == 0 && BenchClock::now() > deadline) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<PingpongResult> plain_udp_pingpong(size_t bytes, uint32_t datagram, int iterations,
                                                 double timeout_s, std::string& error) {
  const MessageCut cut = cut_message(bytes, datagram);
  if (cut.pieces() > kMaxPieces) {
    error = fmt::format("{} bytes is more than {} super-datagrams", bytes, kMaxPieces);
    return std::nullopt;
  }
  UdpSide ping, pong;
  if (!open_loopback_pair(ping, pong, error)) return std::nullopt;
  const auto timeout =
      std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(timeout_s));
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
      const auto deadline = BenchClock::now() + timeout;
      if (!receive_message(pong, cut, in.data(), deadline) ||
          !send_message(pong, cut, in.data(), deadline))
        ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(pong.fd);
  bool ok = true;
  BenchClock::time_point start{};
  for (int i = 0; ok && i <= iterations; ++i) {
    if (i == 1) start = BenchClock::now();  // round 0 warms up
    const auto deadline = BenchClock::now() + timeout;
    ok = send_message(ping, cut, out.data(), deadline) &&
         receive_message(ping, cut, in.data(), deadline);
  }
  const double seconds = std::chrono::duration<double>(BenchClock::now() - start).count();
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
