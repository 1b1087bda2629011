// UdpDatapath fast path: batched receive and transmit.
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include <array>
#include <cerrno>

#include "transport/datapath/udp/gso_segment.h"
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
  // A burst's lent packets mostly share a few receive buffers: unpin once per run.
  uint32_t slot = 0, pins = 0;
  for (size_t i = 0; i < n; ++i) {
    PacketBuf* b = bufs[i];
    if (pool_.owns(b)) {
      pool_.release(b);
      continue;
    }
    if (pins > 0 && b->owner_tag != slot) {
      unpin(static_cast<uint16_t>(slot), pins);
      pins = 0;
    }
    slot = b->owner_tag;
    ++pins;
  }
  if (pins > 0) unpin(static_cast<uint16_t>(slot), pins);
}

PacketBuf* UdpDatapath::keep(PacketBuf* b) {
  if (!lent(b)) return b;
  PacketBuf* own = pool_.alloc();
  if (own == nullptr) return b;
  std::memcpy(own->data, b->data, b->len);
  own->len = b->len;
  own->peer = b->peer;
  own->entropy = b->entropy;
  own->flags = b->flags;
  free(&b, 1);
  return own;
}

size_t UdpDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  return gro_ ? rx_burst_gro(bufs, n) : rx_burst_direct(bufs, n);
}

// One recvmmsg into the posted receive buffers; each receive becomes a run of datagrams.
// Buffers stay posted until something is received into them, so an empty poll costs the
// system call alone.
void UdpDatapath::receive_gro_runs() {
  gro_next_ = 0;
  gro_count_ = 0;
  auto& g = *gro_;
  const auto post = [&g](uint16_t slot) {
    g.posted[g.posted_count] = slot;
    g.pins[slot] = 1;  // the run's own pin, dropped once it is all handed up
    g.iov[g.posted_count].iov_base = g.arena.data() + size_t{slot} * kGroBufferBytes;
    ++g.posted_count;
  };
  while (g.posted_count < kGroReceives && !g.free_slots.empty()) {
    post(g.free_slots.back());
    g.free_slots.pop_back();
  }
  // Every buffer lent out (the caller holds packets from all of them): receive into the
  // bounce buffer, whose datagrams are copied, so holding packets never stops reception.
  // (Pool buffers cannot stand in: a GRO socket truncates a super-datagram received into
  // one packet's space.) Its last run has been handed up by now, so it is unpinned.
  if (g.posted_count == 0) post(g.bounce);
  const int got = ::recvmmsg(sockets_[0], g.msgs.data(), static_cast<unsigned>(g.posted_count),
                             MSG_DONTWAIT, nullptr);
  ++stats_.rx_syscalls;
  const size_t received = got > 0 ? static_cast<size_t>(got) : 0;
  for (size_t i = 0; i < received; ++i) {
    msghdr& h = g.msgs[i].msg_hdr;
    const ReceivedMessage control = read_receive_control(h, g.msgs[i].msg_len);
    const uint32_t segment = control.segment;  // the whole message unless GRO merged it
    if ((h.msg_flags & MSG_TRUNC) || segment > cfg_.mtu_bytes) {
      ++stats_.rx_truncated;
      unpin(g.posted[i]);
      continue;
    }
    GroRun& run = gro_runs_[gro_count_++];
    run.slot = g.posted[i];
    run.handed = 0;
    run.offset = static_cast<uint32_t>(run.slot) * kGroBufferBytes;
    run.end = run.offset + g.msgs[i].msg_len;
    run.segment = segment;
    run.from = from_sockaddr(g.from[i]);
    const SourcePort source = split_source_port(run.from.port, cfg_.entropy_ports);
    run.from.port = source.base;
    run.entropy = source.entropy;
    run.flags = control.ecn_ce ? PacketBuf::kEcnCe : 0;
    if (g.msgs[i].msg_len > segment) ++stats_.rx_gro_messages;
  }
  // recvmmsg filled the first `received` buffers and shrank their headers to what it
  // wrote: restore the headers and move the buffers still posted to the front.
  for (size_t i = 0; i < received; ++i) {
    g.msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    g.msgs[i].msg_hdr.msg_controllen = g.cmsg[i].bytes.size();
  }
  if (received > 0) {
    for (size_t i = received; i < g.posted_count; ++i) {
      g.posted[i - received] = g.posted[i];
      g.iov[i - received].iov_base = g.iov[i].iov_base;
    }
    g.posted_count -= received;
  }
}

size_t UdpDatapath::rx_burst_gro(PacketBuf** bufs, size_t n) {
  if (gro_next_ == gro_count_) receive_gro_runs();
  auto& g = *gro_;
  size_t kept = 0;
  while (kept < n && gro_next_ < gro_count_) {
    GroRun& run = gro_runs_[gro_next_];
    const uint32_t len = std::min(run.segment, run.end - run.offset);
    PacketBuf* b = nullptr;
    if (run.handed < kLentPerBuffer && run.slot != g.bounce) {  // lend it in place
      b = &g.lent[size_t{run.slot} * kLentPerBuffer + run.handed];
      b->data = g.arena.data() + run.offset;
      b->capacity = len;
      b->owner_tag = run.slot;
      ++g.pins[run.slot];
    } else if ((b = pool_.alloc()) != nullptr) {  // bounce buffer, or out of descriptors
      std::memcpy(b->data, g.arena.data() + run.offset, len);
      ++stats_.rx_copied;
    } else {  // nowhere to put it: this datagram is lost (PDS recovers it)
      ++stats_.rx_no_buffer;
    }
    if (b != nullptr) {
      b->len = len;
      b->peer = run.from;
      b->entropy = run.entropy;
      b->flags = run.flags;
      if (run.flags & PacketBuf::kEcnCe) ++stats_.rx_ecn_ce;
      bufs[kept++] = b;
    }
    ++run.handed;
    run.offset += len;
    if (run.offset >= run.end) {  // a zero-length datagram is one packet too
      unpin(run.slot);
      ++gro_next_;
    }
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
  std::array<ReceiveControl, kMaxBurst> control;
  const size_t have = alloc(bufs, n);
  for (size_t i = 0; i < have; ++i) {
    iov[i] = {bufs[i]->data, bufs[i]->capacity};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    msgs[i].msg_hdr.msg_control = control[i].bytes.data();
    msgs[i].msg_hdr.msg_controllen = control[i].bytes.size();
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
    if (read_receive_control(msgs[i].msg_hdr, b->len).ecn_ce) {
      b->flags = PacketBuf::kEcnCe;
      ++stats_.rx_ecn_ce;
    }
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
  // iovecs are the packets (one each, or two when the payload is gathered from the
  // sender's memory) and whose UDP_SEGMENT is the run's first packet length (every
  // segment but the last must have exactly that length).
  // Not zero-initialised (a burst is often one packet); each used entry is set below.
  std::array<mmsghdr, kMaxBurst> msgs;
  std::array<iovec, 2 * kMaxBurst> iov;
  std::array<sockaddr_storage, kMaxBurst> to;
  std::array<uint8_t, kMaxBurst> packets_in;  // packets carried by each message
  std::array<uint32_t, kMaxBurst> segment;    // bytes of each message's first packet
  std::array<GsoControl, kMaxBurst> cmsg;
  std::array<uint8_t, kMaxBurst> socket_of;
  std::array<PacketBuf*, kMaxBurst> ordered;
  const size_t sockets = sockets_.size();
  size_t done = 0;
  while (done < n) {
    const size_t count = std::min(n - done, kMaxBurst);
    // Counting sort by socket, so each socket's packets are contiguous, in burst order.
    std::array<uint16_t, 65> start{};
    for (size_t i = 0; i < count; ++i) {
      const PacketBuf* b = bufs[done + i];
      socket_of[i] = static_cast<uint8_t>(
          cfg_.spray_over_loopback || !b->peer.is_loopback() ? b->entropy % sockets : 0);
      ++start[socket_of[i] + 1];
    }
    for (size_t s = 0; s < sockets; ++s)
      start[s + 1] = static_cast<uint16_t>(start[s + 1] + start[s]);
    std::array<uint16_t, 65> fill = start;
    for (size_t i = 0; i < count; ++i) ordered[fill[socket_of[i]]++] = bufs[done + i];

    size_t vectors = 0;  // iovecs used so far in this chunk
    for (size_t s = 0; s < sockets; ++s) {
      // Build this socket's messages from packets [start[s], start[s + 1]).
      size_t messages = 0;
      uint32_t prev_bytes = 0;
      for (size_t i = start[s]; i < start[s + 1]; ++i) {
        PacketBuf* b = ordered[i];
        const uint32_t bytes = b->len + b->payload_len;
        iovec* first_vector = &iov[vectors];
        iov[vectors++] = {b->data, b->len};
        if (b->payload_len > 0) iov[vectors++] = {const_cast<uint8_t*>(b->payload), b->payload_len};
        const size_t vectors_of_b = static_cast<size_t>(&iov[vectors] - first_vector);
        if (messages > 0) {
          mmsghdr& m = msgs[messages - 1];
          const size_t run_bytes = size_t{segment[messages - 1]} * packets_in[messages - 1] + bytes;
          const PacketBuf* first = ordered[i - packets_in[messages - 1]];
          if (gso_ && b->peer == first->peer && prev_bytes == segment[messages - 1] &&
              bytes <= segment[messages - 1] && bytes > 0 &&
              packets_in[messages - 1] < kMaxGsoSegments && run_bytes <= kMaxGsoBytes) {
            m.msg_hdr.msg_iovlen += vectors_of_b;
            ++packets_in[messages - 1];
            prev_bytes = bytes;
            continue;
          }
        }
        mmsghdr& m = msgs[messages];
        m.msg_hdr = {};
        m.msg_hdr.msg_iov = first_vector;
        m.msg_hdr.msg_iovlen = vectors_of_b;
        m.msg_hdr.msg_name = &to[messages];
        m.msg_hdr.msg_namelen = to_sockaddr(b->peer, to[messages]);
        packets_in[messages] = 1;
        segment[messages] = bytes;
        prev_bytes = bytes;
        ++messages;
      }
      for (size_t k = 0; k < messages; ++k) {
        msghdr& h = msgs[k].msg_hdr;
        if (packets_in[k] < 2) continue;
        set_gso_segment(h, cmsg[k], static_cast<uint16_t>(segment[k]));
        ++stats_.tx_gso_messages;
      }
      size_t first = 0;
      while (first < messages) {
        const int sent = ::sendmmsg(sockets_[s], &msgs[first],
                                    static_cast<unsigned>(messages - first), MSG_DONTWAIT);
        ++stats_.tx_syscalls;
        if (sent <= 0) {
          // Full socket buffer or an ICMP error: the rest is lost; PDS recovers it. A GSO
          // message refused turns GSO off for good, and datagrams then go one by one: a
          // device that cannot segment (EIO, EINVAL), or segments longer than the route's
          // MTU (EMSGSIZE, over IPv4 and IPv6 alike: the kernel fragments a single
          // datagram that long, but refuses a run of them; until this was handled every
          // run was lost and resent, and a transfer ran at a third of its rate).
          if ((errno == EIO || errno == EINVAL || errno == EMSGSIZE) && packets_in[first] > 1)
            gso_ = false;
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
