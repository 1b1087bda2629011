// FabricDatapath: setup, and the burst paths (one sendmmsg, one recvmmsg).
#include "transport/datapath/fabric/fabric_datapath.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "transport/datapath/fabric/relay_header.h"
#include "transport/datapath/udp/bound_socket.h"
#include "transport/datapath/udp/socket_address.h"

namespace spray::dp {
namespace {

constexpr size_t kMaxBurst = 64;

}  // namespace

std::unique_ptr<FabricDatapath> FabricDatapath::open(const FabricDatapathConfig& c,
                                                     std::string& error) {
  const auto fabric = parse_ip_port(c.fabric);
  if (!fabric || fabric->port == 0) {
    error =
        fmt::format("the fabric's address '{}' is not ADDRESS:PORT (FI_SPRAY_FABRIC)", c.fabric);
    return nullptr;
  }
  auto local = parse_ip(c.address, c.port);
  if (!local) {
    error = fmt::format("'{}' is not an IPv4 or IPv6 address", c.address);
    return nullptr;
  }
  if (local->family != fabric->family) {
    error = fmt::format("the local address {} and the fabric's {} are not of one IP version",
                        c.address, c.fabric);
    return nullptr;
  }
  if (c.mtu_bytes < 64 || c.mtu_bytes > 65507 - kRelayHeaderBytes) {
    error =
        fmt::format("mtu must be 64 to {} bytes, not {}", 65507 - kRelayHeaderBytes, c.mtu_bytes);
    return nullptr;
  }
  const BoundSocket s = open_bound_udp_socket(*local, c.socket_buffer_bytes, c.address, error);
  if (s.fd < 0) return nullptr;
  return std::unique_ptr<FabricDatapath>(new FabricDatapath(c, s.fd, s.local, *fabric));
}

FabricDatapath::FabricDatapath(const FabricDatapathConfig& config, int socket, NetAddr local,
                               NetAddr fabric)
    : cfg_(config),
      socket_(socket),
      local_(local),
      fabric_(fabric),
      pool_(config.buffers, config.mtu_bytes, kRelayHeaderBytes) {}

FabricDatapath::~FabricDatapath() {
  ::close(socket_);
}

size_t FabricDatapath::alloc(PacketBuf** bufs, size_t n) {
  size_t i = 0;
  for (; i < n; ++i) {
    bufs[i] = pool_.alloc();
    if (bufs[i] == nullptr) break;
  }
  return i;
}

void FabricDatapath::free(PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) pool_.release(bufs[i]);
}

size_t FabricDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  std::array<mmsghdr, kMaxBurst> msgs;
  std::array<iovec, kMaxBurst> iovs;
  sockaddr_storage to;
  const socklen_t to_len = to_sockaddr(fabric_, to);
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(n - done, kMaxBurst);
    for (size_t i = 0; i < count; ++i) {
      PacketBuf* b = bufs[done + i];
      uint8_t* header = b->data - kRelayHeaderBytes;  // the pool's headroom
      encode_relay_header({b->peer, b->entropy, 0}, header);
      iovs[i] = {header, kRelayHeaderBytes + b->len};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = &to;
      msgs[i].msg_hdr.msg_namelen = to_len;
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    size_t sent = 0;
    while (sent < count) {
      const int r = ::sendmmsg(socket_, msgs.data() + sent, static_cast<unsigned>(count - sent), 0);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        break;  // a full socket buffer drops the rest, as a NIC would; PDS resends
      }
      sent += static_cast<size_t>(r);
    }
    stats_.tx_packets += sent;
    stats_.tx_dropped += count - sent;
    for (size_t i = 0; i < count; ++i) pool_.release(bufs[done + i]);
    done += count;
  }
  return n;
}

size_t FabricDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  n = std::min(n, kMaxBurst);
  const size_t have = alloc(bufs, n);
  if (have == 0) {
    ++stats_.rx_no_buffer;
    return 0;
  }
  std::array<mmsghdr, kMaxBurst> msgs;
  std::array<iovec, kMaxBurst> iovs;
  std::array<sockaddr_storage, kMaxBurst> from;
  for (size_t i = 0; i < have; ++i) {
    iovs[i] = {bufs[i]->data - kRelayHeaderBytes, kRelayHeaderBytes + cfg_.mtu_bytes};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int r =
      ::recvmmsg(socket_, msgs.data(), static_cast<unsigned>(have), MSG_DONTWAIT, nullptr);
  const size_t received = r > 0 ? static_cast<size_t>(r) : 0;
  // Valid packets are compacted to the front; the rest of the buffers go back.
  size_t kept = 0;
  for (size_t i = 0; i < received; ++i) {
    PacketBuf* b = bufs[i];
    RelayHeader h;
    const bool truncated = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0;
    if (from_sockaddr(from[i]) != fabric_) {
      ++stats_.rx_not_from_fabric;
    } else if (truncated || !decode_relay_header(b->data - kRelayHeaderBytes, msgs[i].msg_len, h)) {
      ++stats_.rx_malformed;
    } else {
      b->len = msgs[i].msg_len - kRelayHeaderBytes;
      b->peer = h.other;
      b->entropy = h.entropy;
      b->flags = h.flags & (PacketBuf::kTrimmed | PacketBuf::kEcnCe);
      std::swap(bufs[kept++], bufs[i]);  // bufs[kept] was handled already (dropped)
    }
  }
  free(bufs + kept, have - kept);
  stats_.rx_packets += kept;
  return kept;
}

bool FabricDatapath::wait(Duration timeout) {
  pollfd p{socket_, POLLIN, 0};
  const auto ms = static_cast<int>((timeout.ps + 999'999'999) / 1'000'000'000);
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace spray::dp
