// UdpDatapath fast path: batched receive and transmit.
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include <array>
#include <cerrno>

#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {
namespace {

constexpr size_t kMaxBurst = 64;        // packets per system call; larger bursts are split
constexpr size_t kMaxGsoSegments = 64;  // the kernel's UDP_MAX_SEGMENTS
constexpr size_t kMaxGsoBytes = 65507;  // a UDP datagram's payload limit

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
  return gro_ ? rx_burst_gro(bufs, n) : rx_burst_direct(bufs, n);
}

// One recvmmsg into GRO buffers; each receive becomes a run of datagrams.
void UdpDatapath::receive_gro_runs() {
  // The headers are built once (init_gro_headers); this runs on every poll, and building
  // 64 of them each time was a fifth of an idle spin.
  auto& msgs = gro_->msgs;
  const int got = ::recvmmsg(sockets_[0], msgs.data(), kGroBuffers, MSG_DONTWAIT, nullptr);
  ++stats_.rx_syscalls;
  gro_next_ = 0;
  gro_count_ = 0;
  for (int i = 0; i < got; ++i) {
    msghdr& h = msgs[static_cast<size_t>(i)].msg_hdr;
    uint32_t segment = msgs[i].msg_len;  // a single datagram unless GRO says otherwise
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int size = 0;
        std::memcpy(&size, CMSG_DATA(c), sizeof(size));
        if (size > 0) segment = static_cast<uint32_t>(size);
      }
    }
    if ((h.msg_flags & MSG_TRUNC) || segment > cfg_.mtu_bytes) {
      ++stats_.rx_truncated;
      continue;
    }
    GroRun& run = gro_runs_[gro_count_++];
    run.offset = static_cast<uint32_t>(i) * kGroBufferBytes;
    run.end = run.offset + msgs[i].msg_len;
    run.segment = segment;
    run.from = from_sockaddr(gro_->from[static_cast<size_t>(i)]);
    const SourcePort source = split_source_port(run.from.port, cfg_.entropy_ports);
    run.from.port = source.base;
    run.entropy = source.entropy;
    if (msgs[i].msg_len > segment) ++stats_.rx_gro_messages;
  }
  for (int i = 0; i < got; ++i) {  // recvmmsg shrank these to what it wrote
    msgs[static_cast<size_t>(i)].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    msgs[static_cast<size_t>(i)].msg_hdr.msg_controllen = gro_->cmsg[static_cast<size_t>(i)].size();
  }
}

size_t UdpDatapath::rx_burst_gro(PacketBuf** bufs, size_t n) {
  if (gro_next_ == gro_count_) receive_gro_runs();
  size_t kept = 0;
  while (kept < n && gro_next_ < gro_count_) {
    GroRun& run = gro_runs_[gro_next_];
    PacketBuf* b = pool_.alloc();
    if (b == nullptr) {  // out of buffers: what is left of this receive is lost
      for (; gro_next_ < gro_count_; ++gro_next_) {
        const GroRun& r = gro_runs_[gro_next_];
        stats_.rx_no_buffer +=
            std::max<uint32_t>(1, (r.end - r.offset + r.segment - 1) / r.segment);
      }
      break;
    }
    const uint32_t len = std::min(run.segment, run.end - run.offset);
    std::memcpy(b->data, gro_->arena.get() + run.offset, len);
    b->len = len;
    b->peer = run.from;
    b->entropy = run.entropy;
    b->flags = 0;
    bufs[kept++] = b;
    run.offset += len;
    if (run.offset >= run.end) ++gro_next_;  // a zero-length datagram is one packet too
  }
  stats_.rx_packets += kept;
  return kept;
}

size_t UdpDatapath::rx_burst_direct(PacketBuf** bufs, size_t n) {
  n = std::min(n, kMaxBurst);
  // Not zero-initialised (see receive_gro_runs); only the first `have` entries are used.
  std::array<mmsghdr, kMaxBurst> msgs;
  std::array<iovec, kMaxBurst> iov;
  std::array<sockaddr_storage, kMaxBurst> from;
  const size_t have = alloc(bufs, n);
  for (size_t i = 0; i < have; ++i) {
    iov[i] = {bufs[i]->data, bufs[i]->capacity};
    msgs[i] = {};
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
  for (size_t i = 0; i < received; ++i) {
    PacketBuf* b = bufs[i];
    if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
      ++stats_.rx_truncated;
      pool_.release(b);
      continue;
    }
    b->len = msgs[i].msg_len;
    b->peer = from_sockaddr(from[i]);
    const SourcePort source = split_source_port(b->peer.port, cfg_.entropy_ports);
    b->peer.port = source.base;
    b->entropy = source.entropy;
    b->flags = 0;
    bufs[kept++] = b;
  }
  for (size_t i = received; i < have; ++i) pool_.release(bufs[i]);
  stats_.rx_packets += kept;
  return kept;
}

size_t UdpDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  return send_burst(bufs, n, true);
}

size_t UdpDatapath::send_burst(PacketBuf** bufs, size_t n, bool release) {
  // Group the burst by source socket (EV mod entropy_ports): one sendmmsg per socket.
  // Within a socket's group, a run of packets to one peer becomes one message whose
  // iovecs are the packets and whose UDP_SEGMENT is the run's first length (every
  // segment but the last must have exactly that length).
  // Not zero-initialised (a burst is often one packet); each used entry is set below.
  std::array<mmsghdr, kMaxBurst> msgs;
  std::array<iovec, kMaxBurst> iov;
  std::array<sockaddr_storage, kMaxBurst> to;
  std::array<uint8_t, kMaxBurst> packets_in;  // packets carried by each message
  alignas(cmsghdr) std::array<std::array<uint8_t, CMSG_SPACE(sizeof(uint16_t))>, kMaxBurst> cmsg;
  std::array<uint8_t, kMaxBurst> socket_of;
  std::array<PacketBuf*, kMaxBurst> ordered;
  const size_t sockets = sockets_.size();
  size_t done = 0;
  while (done < n) {
    const size_t count = std::min(n - done, kMaxBurst);
    // Counting sort by socket, so each socket's packets are contiguous, in burst order.
    std::array<uint16_t, 65> start{};
    for (size_t i = 0; i < count; ++i) {
      socket_of[i] = static_cast<uint8_t>(bufs[done + i]->entropy % sockets);
      ++start[socket_of[i] + 1];
    }
    for (size_t s = 0; s < sockets; ++s)
      start[s + 1] = static_cast<uint16_t>(start[s + 1] + start[s]);
    std::array<uint16_t, 65> fill = start;
    for (size_t i = 0; i < count; ++i) ordered[fill[socket_of[i]]++] = bufs[done + i];

    for (size_t s = 0; s < sockets; ++s) {
      // Build this socket's messages from packets [start[s], start[s + 1]).
      size_t messages = 0;
      for (size_t i = start[s]; i < start[s + 1]; ++i) {
        PacketBuf* b = ordered[i];
        iov[i] = {b->data, b->len};
        if (messages > 0) {
          mmsghdr& m = msgs[messages - 1];
          const PacketBuf* first = ordered[i - m.msg_hdr.msg_iovlen];
          const PacketBuf* prev = ordered[i - 1];
          const size_t bytes = size_t{first->len} * m.msg_hdr.msg_iovlen + b->len;
          if (gso_ && b->peer == first->peer && prev->len == first->len && b->len <= first->len &&
              b->len > 0 && m.msg_hdr.msg_iovlen < kMaxGsoSegments && bytes <= kMaxGsoBytes) {
            ++m.msg_hdr.msg_iovlen;
            ++packets_in[messages - 1];
            continue;
          }
        }
        mmsghdr& m = msgs[messages];
        m.msg_hdr = {};
        m.msg_hdr.msg_iov = &iov[i];
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_name = &to[messages];
        m.msg_hdr.msg_namelen = to_sockaddr(b->peer, to[messages]);
        packets_in[messages] = 1;
        ++messages;
      }
      for (size_t k = 0; k < messages; ++k) {
        msghdr& h = msgs[k].msg_hdr;
        if (h.msg_iovlen < 2) continue;
        cmsg[k] = {};  // the kernel reads the padding too
        h.msg_control = cmsg[k].data();
        h.msg_controllen = cmsg[k].size();
        cmsghdr* c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const auto segment = static_cast<uint16_t>(h.msg_iov[0].iov_len);
        std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
        ++stats_.tx_gso_messages;
      }
      size_t first = 0;
      while (first < messages) {
        const int sent = ::sendmmsg(sockets_[s], &msgs[first],
                                    static_cast<unsigned>(messages - first), MSG_DONTWAIT);
        ++stats_.tx_syscalls;
        if (sent <= 0) {
          // Full socket buffer or an ICMP error: the rest is lost; PDS recovers it. A
          // device that cannot segment (EIO on a GSO message) turns GSO off for good.
          if ((errno == EIO || errno == EINVAL) && msgs[first].msg_hdr.msg_iovlen > 1) gso_ = false;
          for (size_t k = first; k < messages; ++k) stats_.tx_dropped += packets_in[k];
          break;
        }
        for (size_t k = first; k < first + static_cast<size_t>(sent); ++k)
          stats_.tx_packets += packets_in[k];
        first += static_cast<size_t>(sent);
      }
    }
    if (release) {
      for (size_t i = 0; i < count; ++i) pool_.release(bufs[done + i]);
    }
    done += count;
  }
  return n;
}

bool UdpDatapath::wait(Duration timeout) {
  if (gro_next_ < gro_count_) return true;  // datagrams already received, not yet handed up
  pollfd p{sockets_[0], POLLIN, 0};
  const auto ms = static_cast<int>((timeout.ps + 999'999'999) / 1'000'000'000);
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace spray::dp
