// UdpDatapath setup: validating the configuration, creating, tuning and binding the
// sockets, and explaining failures.
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>

#include <fmt/format.h>

#include "transport/datapath/ecn.h"
#include "transport/datapath/udp/bound_socket.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {
namespace {

void close_all(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

// Sends ECT(0) and asks for the received ECN field (UdpConfig::ecn). The kernel keeps
// the ECN bits a UDP socket sets (it clears them only for TCP).
bool enable_ecn(int fd, int family, std::string& error) {
  const int ect = ecn::kEct0;
  const int on = 1;
  const bool v6 = family == AF_INET6;
  const int level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
  if (::setsockopt(fd, level, v6 ? IPV6_TCLASS : IP_TOS, &ect, sizeof(ect)) != 0 ||
      ::setsockopt(fd, level, v6 ? IPV6_RECVTCLASS : IP_RECVTOS, &on, sizeof(on)) != 0) {
    error = fmt::format("cannot enable ECN on the socket: {}", std::strerror(errno));
    return false;
  }
  return true;
}

// Creates and binds one socket; on failure fills `error` and returns -1.
int open_socket(const UdpConfig& c, const NetAddr& addr, std::string& error) {
  const int family = addr.family == NetAddr::Family::kIpv6 ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = fmt::format("socket(): {}", std::strerror(errno));
    return -1;
  }
  set_socket_buffers(fd, c.socket_buffer_bytes);  // read back by socket_buffers()
  if (family == AF_INET6) {
    const int only = 1;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
  }
  if (c.ecn && !enable_ecn(fd, family, error)) {
    ::close(fd);
    return -1;
  }
  if (!c.interface.empty() && ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, c.interface.c_str(),
                                           static_cast<socklen_t>(c.interface.size())) != 0) {
    error = fmt::format("cannot bind to interface '{}': {}", c.interface, std::strerror(errno));
    ::close(fd);
    return -1;
  }
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(addr, sa);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    error = explain_bind_error(errno, addr, c.address);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Binds entropy_ports sockets at base, base + 1, ...; empty on failure.
std::vector<int> bind_range(const UdpConfig& c, NetAddr base, std::string& error) {
  std::vector<int> fds;
  for (uint16_t i = 0; i < c.entropy_ports; ++i) {
    NetAddr a = base;
    a.port = static_cast<uint16_t>(base.port + i);
    const int fd = open_socket(c, a, error);
    if (fd < 0) {
      close_all(fds);
      return fds;
    }
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace

std::unique_ptr<UdpDatapath> UdpDatapath::open(const UdpConfig& c, std::string& error) {
  const uint16_t n = c.entropy_ports;
  if (n == 0 || n > 64 || (n & (n - 1)) != 0) {
    error = fmt::format("entropy_ports must be a power of two from 1 to 64, not {}", n);
    return nullptr;
  }
  if (c.mtu_bytes < 128 || c.mtu_bytes > 65507) {
    error = fmt::format("mtu_bytes must be within [128, 65507], not {}", c.mtu_bytes);
    return nullptr;
  }
  if (c.gro && (c.gro_buffers == 0 || c.gro_buffers > 65534)) {
    error = fmt::format("gro_buffers must be within [1, 65534], not {}", c.gro_buffers);
    return nullptr;
  }
  if (c.port % n != 0) {
    error = fmt::format("port {} must be a multiple of entropy_ports ({})", c.port, n);
    return nullptr;
  }
  auto local = parse_ip(c.address);
  if (!local) {
    error = fmt::format("'{}' is not an IPv4 or IPv6 address", c.address);
    return nullptr;
  }
  std::vector<int> fds;
  if (c.port != 0) {
    local->port = c.port;
    fds = bind_range(c, *local, error);
  } else {
    // Pick an aligned base in the dynamic range; retry where some port is taken.
    std::minstd_rand pick(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(reinterpret_cast<uintptr_t>(&fds)));
    for (int attempt = 0; attempt < 64 && fds.empty(); ++attempt) {
      const uint32_t slots = (65536 - 49152) / n;
      local->port = static_cast<uint16_t>(49152 + (pick() % slots) * n);
      fds = bind_range(c, *local, error);
      if (fds.empty() && error.find("already in use") == std::string::npos) break;
    }
  }
  if (fds.empty()) return nullptr;
  error.clear();
  // The buffers are allocated (and the receive buffers warmed) by the constructor; an
  // allocation that fails there is an error to report, never an exception through the
  // provider's C interface, and the sockets already bound are closed.
  std::vector<int> bound = fds;
  try {
    return std::unique_ptr<UdpDatapath>(new UdpDatapath(c, *local, std::move(fds)));
  } catch (const std::bad_alloc&) {
    close_all(bound);
    error = fmt::format(
        "cannot allocate the datapath's buffers ({} packet buffers of {} bytes{})", c.buffers,
        c.mtu_bytes,
        c.gro ? fmt::format(", {} receive buffers of 64 KiB", c.gro_buffers) : std::string());
    return nullptr;
  }
}

UdpDatapath::UdpDatapath(const UdpConfig& config, NetAddr local, std::vector<int> sockets)
    : cfg_(config),
      local_(local),
      sockets_(std::move(sockets)),
      pool_(config.buffers, config.mtu_bytes),
      gso_(config.gso) {
  const int on = 1;
  if (!config.gro || ::setsockopt(sockets_[0], SOL_UDP, UDP_GRO, &on, sizeof(on)) != 0) return;
  const size_t slots = config.gro_buffers;
  gro_ = std::make_unique<GroReceive>(slots);
  gro_->lent.resize(slots * kLentPerBuffer);
  gro_->pins.assign(slots + 1, 0);
  gro_->bounce = static_cast<uint16_t>(slots);
  gro_->free_slots.reserve(slots);
  for (size_t s = slots; s-- > 0;) gro_->free_slots.push_back(static_cast<uint16_t>(s));
  for (size_t i = 0; i < kGroReceives; ++i) {
    gro_->iov[i].iov_len = kGroBufferBytes;  // iov_base: the slot posted there
    msghdr& h = gro_->msgs[i].msg_hdr;
    h.msg_iov = &gro_->iov[i];
    h.msg_iovlen = 1;
    h.msg_name = &gro_->from[i];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_control = gro_->cmsg[i].bytes.data();
    h.msg_controllen = gro_->cmsg[i].bytes.size();
  }
}

UdpDatapath::~UdpDatapath() {
  close_all(sockets_);
}

UdpDatapath::SocketBuffers UdpDatapath::socket_buffers() const {
  const auto granted = [this](int option) {
    int booked = 0;
    socklen_t len = sizeof(booked);
    if (::getsockopt(sockets_[0], SOL_SOCKET, option, &booked, &len) != 0) return 0u;
    return static_cast<uint32_t>(booked) / 2;
  };
  return {granted(SO_RCVBUF), granted(SO_SNDBUF)};
}

}  // namespace spray::dp
