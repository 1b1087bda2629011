// UdpDatapath fast path: batched receive and transmit.
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {
namespace {

constexpr size_t kMaxBurst = 64;  // packets per system call; larger bursts are split

}  // namespace

size_t UdpDatapath::alloc(PacketBuf** bufs, size_t n) {
  size_t i = 0;
  for (; i < n && (bufs[i] = pool_.alloc()) != nullptr; ++i) {
  }
  return i;
}

void UdpDatapath::free(PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) pool_.release(bufs[i]);
}

size_t UdpDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  n = std::min(n, kMaxBurst);
  std::array<mmsghdr, kMaxBurst> msgs{};
  std::array<iovec, kMaxBurst> iov{};
  std::array<sockaddr_storage, kMaxBurst> from{};
  const size_t have = alloc(bufs, n);
  for (size_t i = 0; i < have; ++i) {
    iov[i] = {bufs[i]->data, bufs[i]->capacity};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
  }
  const int got = have == 0 ? 0
                            : ::recvmmsg(sockets_[0], msgs.data(), static_cast<unsigned>(have),
                                         MSG_DONTWAIT, nullptr);
  ++stats_.rx_syscalls;
  const size_t received = got > 0 ? static_cast<size_t>(got) : 0;
  size_t kept = 0;
  const auto mask = static_cast<uint16_t>(cfg_.entropy_ports - 1);
  for (size_t i = 0; i < received; ++i) {
    PacketBuf* b = bufs[i];
    if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
      ++stats_.rx_truncated;
      pool_.release(b);
      continue;
    }
    b->len = msgs[i].msg_len;
    b->peer = from_sockaddr(from[i]);
    b->entropy = static_cast<uint16_t>(b->peer.port & mask);
    b->peer.port = static_cast<uint16_t>(b->peer.port & ~mask);  // the sender's base port
    b->flags = 0;
    bufs[kept++] = b;
  }
  for (size_t i = received; i < have; ++i) pool_.release(bufs[i]);
  stats_.rx_packets += kept;
  return kept;
}

size_t UdpDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  // Group the burst by source socket (EV mod entropy_ports): one sendmmsg per socket.
  std::array<mmsghdr, kMaxBurst> msgs{};
  std::array<iovec, kMaxBurst> iov{};
  std::array<sockaddr_storage, kMaxBurst> to{};
  std::array<uint8_t, kMaxBurst> socket_of{};
  const size_t sockets = sockets_.size();
  size_t done = 0;
  while (done < n) {
    const size_t count = std::min(n - done, kMaxBurst);
    // Counting sort by socket, so each socket's packets are contiguous.
    std::array<uint16_t, 65> start{};
    for (size_t i = 0; i < count; ++i) {
      socket_of[i] = static_cast<uint8_t>(bufs[done + i]->entropy % sockets);
      ++start[socket_of[i] + 1];
    }
    for (size_t s = 0; s < sockets; ++s)
      start[s + 1] = static_cast<uint16_t>(start[s + 1] + start[s]);
    std::array<uint16_t, 65> fill = start;
    for (size_t i = 0; i < count; ++i) {
      PacketBuf* b = bufs[done + i];
      const size_t slot = fill[socket_of[i]]++;
      iov[slot] = {b->data, b->len};
      msgs[slot].msg_hdr = {};
      msgs[slot].msg_hdr.msg_iov = &iov[slot];
      msgs[slot].msg_hdr.msg_iovlen = 1;
      msgs[slot].msg_hdr.msg_name = &to[slot];
      msgs[slot].msg_hdr.msg_namelen = to_sockaddr(b->peer, to[slot]);
    }
    for (size_t s = 0; s < sockets; ++s) {
      size_t first = start[s];
      const size_t end = start[s + 1];
      while (first < end) {
        const int sent =
            ::sendmmsg(sockets_[s], &msgs[first], static_cast<unsigned>(end - first), MSG_DONTWAIT);
        ++stats_.tx_syscalls;
        if (sent <= 0) {
          // Full socket buffer or an ICMP error: the rest is lost; PDS recovers it.
          stats_.tx_dropped += end - first;
          break;
        }
        stats_.tx_packets += static_cast<uint64_t>(sent);
        first += static_cast<size_t>(sent);
      }
    }
    for (size_t i = 0; i < count; ++i) pool_.release(bufs[done + i]);
    done += count;
  }
  return n;
}

bool UdpDatapath::wait(Duration timeout) {
  pollfd p{sockets_[0], POLLIN, 0};
  const auto ms = static_cast<int>((timeout.ps + 999'999'999) / 1'000'000'000);
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace spray::dp
