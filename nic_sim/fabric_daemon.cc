#include "nic_sim/fabric_daemon.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "transport/datapath/clock.h"
#include "transport/datapath/udp/bound_socket.h"
#include "transport/datapath/udp/local_interface.h"
#include "transport/datapath/udp/socket_address.h"

namespace spray::sim {
namespace {

constexpr size_t kBatch = 64;
// How early the fabric may deliver a packet: what is due within this long goes out now
// instead of after a sleep. A sleep and wake-up cost tens of microseconds here, more than
// a hop of the modelled fabric (about a microsecond), so waiting for each hop would make
// every packet late by far more than delivering it early does.
constexpr Duration kLookahead = Duration::microseconds(50);

// Sleeps in poll() until `fd` is readable or `timeout` passes (microsecond resolution).
void wait_readable(int fd, Duration timeout) {
  if (timeout.ps <= 0) return;
  pollfd p{fd, POLLIN, 0};
  const int64_t ns = timeout.ps / 1000;
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  ::ppoll(&p, 1, &ts, nullptr);
}

}  // namespace

std::unique_ptr<FabricDaemon> FabricDaemon::open(const FabricDaemonConfig& c, std::string& error) {
  const auto local = dp::parse_ip(c.address, c.port);
  if (!local) {
    error = fmt::format("'{}' is not an IPv4 or IPv6 address", c.address);
    return nullptr;
  }
  if (c.fabric.hosts == 0 || c.fabric.paths == 0) {
    error = "the fabric needs at least one host and one path";
    return nullptr;
  }
  for (const PathOutage& o : c.outages) {
    if (o.path >= c.fabric.paths) {
      error = fmt::format("path {} cannot go down: the fabric has paths 0 to {}", o.path,
                          c.fabric.paths - 1);
      return nullptr;
    }
  }
  const dp::BoundSocket s =
      dp::open_bound_udp_socket(*local, c.socket_buffer_bytes, c.address, error);
  if (s.fd < 0) return nullptr;
  return std::unique_ptr<FabricDaemon>(new FabricDaemon(c, s.fd, s.local));
}

FabricDaemon::FabricDaemon(const FabricDaemonConfig& config, int socket, dp::NetAddr address)
    : cfg_(config),
      socket_(socket),
      address_(address),
      relay_(config.fabric, config.host_idle),
      // One byte more than the largest datagram allowed, so a larger one shows as such.
      receive_area_(kBatch * (dp::kRelayHeaderBytes + config.fabric.mtu_bytes + 1)) {
  // Packets go only to this host's own addresses (any port), as read now.
  relay_.check_new_destinations([local = dp::local_addresses()](const dp::NetAddr& a) {
    for (dp::NetAddr ip : local) {
      ip.port = a.port;
      if (ip == a) return true;
    }
    return false;
  });
}

FabricDaemon::~FabricDaemon() {
  ::close(socket_);
}

size_t FabricDaemon::receive(Time now) {
  const size_t slot = dp::kRelayHeaderBytes + cfg_.fabric.mtu_bytes + 1;
  std::array<mmsghdr, kBatch> msgs;
  std::array<iovec, kBatch> iovs;
  std::array<sockaddr_storage, kBatch> from;
  for (size_t i = 0; i < kBatch; ++i) {
    iovs[i] = {receive_area_.data() + i * slot, slot};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int r = ::recvmmsg(socket_, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (r <= 0) return 0;
  for (size_t i = 0; i < static_cast<size_t>(r); ++i) {
    // A truncated datagram is longer than `slot`: take() sees slot bytes and refuses it
    // as too large.
    relay_.take({receive_area_.data() + i * slot, msgs[i].msg_len}, dp::from_sockaddr(from[i]),
                now);
  }
  stats_.datagrams_in += static_cast<size_t>(r);
  return static_cast<size_t>(r);
}

void FabricDaemon::send_delivered(Time now) {
  std::array<FabricRelay::Outgoing, kBatch> out;
  std::array<mmsghdr, kBatch> msgs;
  std::array<std::array<iovec, 2>, kBatch> iovs;
  std::array<sockaddr_storage, kBatch> to;
  for (;;) {
    const size_t n = relay_.collect(now, out);
    for (size_t i = 0; i < n; ++i) {
      iovs[i][0] = {out[i].header.data(), out[i].header.size()};
      iovs[i][1] = {out[i].packet->data, out[i].packet->len};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &to[i];
      msgs[i].msg_hdr.msg_namelen = dp::to_sockaddr(out[i].to, to[i]);
      msgs[i].msg_hdr.msg_iov = iovs[i].data();
      msgs[i].msg_hdr.msg_iovlen = 2;
    }
    size_t sent = 0;
    while (sent < n) {
      const int r = ::sendmmsg(socket_, msgs.data() + sent, static_cast<unsigned>(n - sent), 0);
      if (r > 0) {
        sent += static_cast<size_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else {
        // This datagram cannot go (a process's socket is gone or full): lost, as on a
        // wire; the others still may.
        ++stats_.send_failures;
        ++sent;
      }
    }
    stats_.datagrams_out += n;
    relay_.release({out.data(), n});
    if (n < out.size()) return;
  }
}

void FabricDaemon::run(const std::atomic<bool>& stop, Duration duration) {
  // The fabric's events are microseconds apart; the kernel's default timer slack (50 us)
  // would stretch every short sleep, and each hop with it.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const Time start = dp::monotonic_now();
  const Time end = duration.ps >= INT64_MAX - start.ps ? Time{INT64_MAX} : start + duration;
  // The longest sleep: how late a stop or an outage's edge may be noticed.
  const Duration longest = Duration::milliseconds(10);
  while (!stop.load(std::memory_order_relaxed)) {
    const Time wall = dp::monotonic_now();
    if (wall >= end) return;
    const Time now = Time{} + (wall - start);  // the fabric's clock
    apply_outages(relay_.fabric(), cfg_.outages, wall - start);
    const size_t received = receive(now);
    send_delivered(now + kLookahead);
    if (received == kBatch) continue;  // more may be waiting
    const Time next = relay_.next_event();
    Duration sleep = longest;
    if (next.ps != INT64_MAX) sleep = std::min(sleep, next - (now + kLookahead));
    wait_readable(socket_, sleep);
  }
}

}  // namespace spray::sim
