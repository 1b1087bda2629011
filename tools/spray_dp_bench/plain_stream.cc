// See plain_stream.h.
#include "tools/spray_dp_bench/plain_stream.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tools/spray_dp_bench/loopback_tcp_listener.h"
#include "tools/spray_dp_bench/plain_udp_messages.h"

namespace spray::tools {
namespace {

constexpr size_t kWindow = 16;  // message buffers each side cycles through
constexpr auto kFirstByteTimeout = std::chrono::seconds(5);
// Not counted after the first byte: both sides settle (first touches of the socket
// buffers' pages, the CPUs' clocks); the first quarter second ran at half speed.
constexpr auto kWarmUp = std::chrono::milliseconds(250);
// The sender stops by itself this long after it starts, should the receiver never stop it.
constexpr auto kSenderLimit = std::chrono::seconds(30);

// The CPU time process `pid` has used so far (user + system), in seconds, read from its
// CPU-time clock; -1 when that clock cannot be read.
double process_cpu_seconds(pid_t pid) {
  clockid_t clock{};
  timespec t{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &t) != 0) return -1;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// A receiving socket's loop: `receive(buffer, length)` returns the bytes it took (0 when
// nothing was waiting, -1 on a broken connection). Counts for `seconds`, starting kWarmUp
// after the first byte, and samples process `sender`'s CPU time at both ends of that.
template <class Receive>
std::optional<StreamResult> count_received(size_t message_bytes, double seconds, pid_t sender,
                                           Receive&& receive, std::string& error) {
  std::vector<uint8_t> window(kWindow * message_bytes);
  const auto give_up = BenchClock::now() + kFirstByteTimeout;
  BenchClock::time_point start{}, end{};
  double sender_cpu_from = -1;  // the sender's CPU seconds when counting started
  StreamResult r;
  size_t message = 0;
  uint32_t polls = 0;
  bool started = false, counting = false;
  for (;;) {
    const ssize_t got = receive(window.data() + message * message_bytes, message_bytes);
    if (got < 0) {
      error = "the sender's connection broke";
      return std::nullopt;
    }
    if (got > 0 && !started) {
      started = true;
      start = BenchClock::now() + kWarmUp;
      end = start + std::chrono::duration_cast<BenchClock::duration>(
                        std::chrono::duration<double>(seconds));
    } else if (got > 0 && counting) {
      r.bytes += static_cast<uint64_t>(got);
    }
    if (got > 0) message = (message + 1) % kWindow;
    if (++polls % 64 == 0) {
      const auto now = BenchClock::now();
      if (!counting && started && now >= start) {
        counting = true;
        sender_cpu_from = process_cpu_seconds(sender);
      }
      if (started && now >= end) {
        r.seconds = std::chrono::duration<double>(now - start).count();
        r.megabytes_per_s = static_cast<double>(r.bytes) / r.seconds / 1e6;
        const double sender_cpu = process_cpu_seconds(sender) - sender_cpu_from;
        if (sender_cpu_from >= 0 && sender_cpu >= 0 && r.bytes > 0) {
          r.sender_busy = sender_cpu / r.seconds;
          r.sender_us_per_mb = sender_cpu * 1e6 / (static_cast<double>(r.bytes) / 1e6);
        }
        return r;
      }
      if (!started && now > give_up) {
        error = "no data arrived within 5 s";
        return std::nullopt;
      }
    }
  }
}

// TCP: a whole message per call (a partial read keeps going into the same message).
std::optional<StreamResult> tcp_stream(size_t message_bytes, double seconds, std::string& error) {
  const int listener = listen_loopback_tcp(error);
  if (listener < 0) return std::nullopt;
  const sockaddr_in a = local_address_of(listener);
  const pid_t child = ::fork();
  if (child < 0) {
    error = fmt::format("fork(): {}", std::strerror(errno));
    ::close(listener);
    return std::nullopt;
  }
  if (child == 0) {  // the sender: writes messages until killed, the receiver closes, or the limit
    ::close(listener);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) ::_exit(1);
    std::vector<uint8_t> window(kWindow * message_bytes, 0x5a);
    const auto limit = BenchClock::now() + kSenderLimit;
    for (size_t message = 0; BenchClock::now() < limit; message = (message + 1) % kWindow) {
      for (size_t done = 0; done < message_bytes;) {
        const ssize_t n = ::send(fd, window.data() + message * message_bytes + done,
                                 message_bytes - done, MSG_NOSIGNAL);
        if (n <= 0) ::_exit(0);
        done += static_cast<size_t>(n);
      }
    }
    ::_exit(0);
  }
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  std::optional<StreamResult> r;
  if (fd < 0) {
    error = fmt::format("accept(): {}", std::strerror(errno));
  } else {
    size_t filled = 0;  // of the current message
    r = count_received(
        message_bytes, seconds, child,
        [&](uint8_t* message, size_t length) -> ssize_t {
          const ssize_t n = ::recv(fd, message + filled, length - filled, MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN)) return -1;
          if (n < 0) return 0;
          filled += static_cast<size_t>(n);
          if (filled < length) return 0;  // not a whole message yet: counted when it is
          filled = 0;
          return static_cast<ssize_t>(length);
        },
        error);
    ::close(fd);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return r;
}

// UDP: one call drains what is waiting into the message, a GRO piece per entry.
std::optional<StreamResult> udp_stream(size_t message_bytes, uint32_t datagram, double seconds,
                                       std::string& error) {
  const MessageCut cut = cut_message(message_bytes, datagram);
  if (message_bytes == 0 || cut.pieces() > kMaxPieces) {
    error = fmt::format("a UDP stream wants messages of 1 byte to {} super-datagrams", kMaxPieces);
    return std::nullopt;
  }
  UdpSide tx, rx;
  if (!open_loopback_pair(tx, rx, error)) return std::nullopt;
  const pid_t child = ::fork();
  if (child < 0) {
    error = fmt::format("fork(): {}", std::strerror(errno));
    ::close(tx.fd);
    ::close(rx.fd);
    return std::nullopt;
  }
  if (child == 0) {  // the sender: messages back to back until killed or the limit
    ::close(rx.fd);
    std::vector<uint8_t> window(kWindow * message_bytes, 0x5a);
    const auto limit = BenchClock::now() + kSenderLimit;
    for (size_t message = 0; BenchClock::now() < limit; message = (message + 1) % kWindow) {
      if (!send_message(tx, cut, window.data() + message * message_bytes, limit)) ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(tx.fd);
  std::array<mmsghdr, kMaxPieces> msgs{};
  std::array<iovec, kMaxPieces> iov{};
  auto r = count_received(
      message_bytes, seconds, child,
      [&](uint8_t* message, size_t) -> ssize_t {
        const size_t n = cut.pieces();
        for (size_t k = 0; k < n; ++k) {
          iov[k] = {message + k * cut.piece, cut.length(k)};
          msgs[k].msg_hdr = {};
          msgs[k].msg_hdr.msg_iov = &iov[k];
          msgs[k].msg_hdr.msg_iovlen = 1;
        }
        const int got =
            ::recvmmsg(rx.fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
        if (got <= 0) return 0;
        ssize_t bytes = 0;
        for (int k = 0; k < got; ++k) bytes += msgs[static_cast<size_t>(k)].msg_len;
        return bytes;
      },
      error);
  ::close(rx.fd);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return r;
}

}  // namespace

std::optional<StreamResult> plain_stream(StreamKind kind, size_t message_bytes, uint32_t datagram,
                                         double seconds, std::string& error) {
  if (message_bytes == 0) {
    error = "a stream wants messages of at least 1 byte";
    return std::nullopt;
  }
  return kind == StreamKind::kTcp ? tcp_stream(message_bytes, seconds, error)
                                  : udp_stream(message_bytes, datagram, seconds, error);
}

}  // namespace spray::tools
