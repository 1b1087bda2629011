// UdpDatapath: Spray over kernel UDP sockets (the default datapath).
//
// Addressing: an endpoint owns `entropy_ports` consecutive UDP ports starting at a base
// that is a multiple of entropy_ports. It receives on the base port; it sends each
// packet from port base + (EV mod entropy_ports), so the entropy value is the UDP source
// port and kernel or switch ECMP hashing (L4) spreads packets over paths. A receiver
// names the sender by its base (source port rounded down to the multiple), so every
// endpoint of a job must use the same entropy_ports (FI_SPRAY_ENTROPY_PORTS).
//
// Batching: rx_burst is one recvmmsg; tx_burst groups a burst by source socket and
// issues one sendmmsg per socket used, so a burst costs at most entropy_ports system
// calls, not one per packet (packets to a loopback address all go from the base port,
// see UdpConfig::spray_over_loopback); within a socket, runs of packets to one peer go as one
// GSO super-datagram (UdpConfig::gso). Buffers come from one preallocated pool; with
// GRO (UdpConfig::gro) received datagrams are instead lent in place from the 64 KiB
// buffers the kernel filled, so the only copy on receive is the kernel's.
//
// ECN: datagrams leave ECT(0); a CE mark on a received one is reported as
// PacketBuf::kEcnCe (UdpConfig::ecn).
//
// Waiting: wait() polls the receive socket; callers spin on rx_burst for a while and
// then block in wait(), so more processes than cores still make progress.
#pragma once

#include <sys/socket.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/huge_page_memory.h"
#include "transport/datapath/packet_pool.h"
#include "transport/datapath/udp/receive_control.h"

namespace spray::dp {

struct UdpConfig {
  std::string address = "127.0.0.1";  // local IPv4 or IPv6 address to bind
  std::string interface;              // optional: bind to this device (SO_BINDTODEVICE)
  uint16_t port = 0;                  // base port, a multiple of entropy_ports; 0 picks one
  uint16_t entropy_ports = 8;         // source ports per endpoint: a power of two, <= 64
  uint32_t mtu_bytes = 1472;          // UET bytes per datagram (1500 - IP - UDP headers)
  // Kernel receive and send buffer of each socket, bytes (SO_RCVBUF / SO_SNDBUF). The
  // receive buffer absorbs what arrives while the engine is busy elsewhere: too small,
  // and bursts from many senders are dropped in the kernel and must be resent. Granted
  // past net.core.{r,w}mem_max when the process has CAP_NET_ADMIN, else up to that cap;
  // socket_buffers() tells what was granted.
  uint32_t socket_buffer_bytes = 4 << 20;
  uint32_t buffers = 8192;  // packet buffers in the pool
  // UDP GSO (UDP_SEGMENT): consecutive packets of a burst to one peer from one source
  // port leave as one super-datagram that the kernel (or NIC) cuts into datagrams, so
  // the stack is traversed once per up to 64 packets. Switched off by itself when the
  // route's device cannot segment.
  bool gso = true;
  // UDP GRO: the kernel may hand up runs of datagrams from one sender as one buffer
  // (on loopback a GSO super-datagram is never cut at all). rx_burst hands up each
  // datagram of such a run in place, lent from the receive buffer (no copy), so the
  // receive buffers are separate from the pool: gro_buffers x 64 KiB, on huge pages and
  // warmed when the datapath opens, so all resident from the start (huge_page_memory.h:
  // each buffer's first use had cost a fresh process's first dozen 1 MiB all-reduces
  // 2-30x their steady time).
  bool gro = true;
  uint32_t gro_buffers = 128;  // 64 KiB receive buffers lent out; 1 to 65534
  // ECN: datagrams leave marked ECT(0), so switches that would drop them for congestion
  // mark them CE instead; a CE mark is read from the IP header (IP_RECVTOS /
  // IPV6_RECVTCLASS) and reported as PacketBuf::kEcnCe, which PDS echoes to the sender's
  // congestion control and path selector in its ACKs (as over DPDK).
  bool ecn = true;
  // Spray over loopback: send each packet from the source port of its EV even to a peer
  // at a loopback address (127.0.0.0/8, ::1). Off by default: loopback is one path with
  // no ECMP to steer, so packets to such a peer all leave from the base port and runs of
  // them become GSO super-datagrams; spread over the ports, each socket's share of a
  // burst is its own system call and shorter runs (a 1 MiB stream on loopback ran ~1.4x
  // faster from one port, 2026-11-25). The EV each packet carried is still the one PDS
  // chose and gets feedback for; the receiver reads EV 0 from the base port. On for
  // tests that look at the source ports on loopback.
  bool spray_over_loopback = false;
};

struct UdpStats {
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;  // the kernel refused them (buffer full, unreachable)
  uint64_t tx_syscalls = 0;
  uint64_t tx_gso_messages = 0;  // super-datagrams carrying two or more packets
  uint64_t rx_packets = 0;
  uint64_t rx_syscalls = 0;
  uint64_t rx_truncated = 0;     // datagrams larger than a buffer, dropped
  uint64_t rx_gro_messages = 0;  // receives that carried two or more datagrams
  uint64_t rx_no_buffer = 0;     // datagrams dropped because the pool was empty
  uint64_t rx_ecn_ce = 0;        // datagrams that arrived marked CE (congestion experienced)
  // GRO datagrams copied into pool buffers instead of lent: every receive buffer was
  // pinned (received through the bounce buffer), or a receive held more than 64.
  uint64_t rx_copied = 0;
};

class UdpDatapath {
 public:
  // Opens and binds the sockets. On failure returns nullptr and a message that names
  // the cause (address not local, port in use, bad configuration, ...).
  static std::unique_ptr<UdpDatapath> open(const UdpConfig& config, std::string& error);
  ~UdpDatapath();
  UdpDatapath(const UdpDatapath&) = delete;
  UdpDatapath& operator=(const UdpDatapath&) = delete;

  // The Datapath concept.
  static constexpr bool kGathersPayload = true;  // sendmmsg gathers header and payload
  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  uint32_t mtu() const { return cfg_.mtu_bytes; }
  NetAddr local_address() const { return local_; }
  uint16_t entropy_values() const { return cfg_.entropy_ports; }

  // Sends like tx_burst but leaves the buffers with the caller: for buffers of another
  // datapath (the `auto` datapath sends shared-memory buffers to remote peers).
  void transmit(PacketBuf** bufs, size_t n) { send_burst(bufs, n, false); }
  // True when `b` came from this datapath (its pool, or lent from a GRO receive).
  bool owns(const PacketBuf* b) const { return pool_.owns(b) || lent(b); }
  // Datagrams received but not yet handed up (the rest of a GRO receive).
  bool has_pending() const { return gro_next_ < gro_count_; }
  // Makes a received buffer safe to hold across later rx_bursts and returns the buffer
  // to hold instead of `b`. A datagram lent from a GRO receive buffer pins that whole
  // buffer, so one the caller means to keep (an out-of-order packet waiting for its
  // predecessors) is moved into a pool buffer; any other buffer is returned as it is.
  // If the pool is empty `b` itself is returned: still correct, it just pins the buffer.
  PacketBuf* keep(PacketBuf* b);

  // Blocks until a datagram is waiting or `timeout` passes. True if one is waiting.
  bool wait(Duration timeout);
  // The descriptor that becomes readable when a datagram arrives, for callers that wait
  // on many sources at once (epoll). Datagrams already received but not yet handed up
  // (a split GRO run) do not show on it: drain rx_burst before waiting.
  int wait_fd() const { return sockets_[0]; }
  const UdpStats& stats() const { return stats_; }

  // The socket buffers the kernel granted, in the units UdpConfig::socket_buffer_bytes
  // asks in (the kernel books twice that for its own overhead, and reports the booking;
  // this halves it back). Less than asked when net.core.{r,w}mem_max capped the request.
  struct SocketBuffers {
    uint32_t receive_bytes = 0;
    uint32_t send_bytes = 0;
  };
  SocketBuffers socket_buffers() const;

 private:
  UdpDatapath(const UdpConfig& config, NetAddr local, std::vector<int> sockets);

  // A GRO receive not yet fully handed up: datagrams of `segment` bytes (the last may be
  // shorter) in receive buffer `slot` at arena offsets [offset, end), all from one
  // sender and source port; `handed` of them have been handed up so far.
  struct GroRun {
    uint32_t offset = 0;
    uint32_t end = 0;
    uint32_t segment = 0;
    uint16_t slot = 0;
    uint32_t handed = 0;
    NetAddr from;
    uint16_t entropy = 0;
    uint8_t flags = 0;  // PacketBuf flags of every datagram in it (kEcnCe)
  };
  static constexpr size_t kGroReceives = 64;  // receive buffers posted per recvmmsg
  static constexpr uint32_t kGroBufferBytes = 65536;
  // Datagrams one receive buffer can lend (the kernel's UDP_GRO_CNT_MAX); any beyond
  // that are copied into pool buffers.
  static constexpr uint32_t kLentPerBuffer = 64;

  size_t send_burst(PacketBuf** bufs, size_t n, bool release);
  size_t rx_burst_direct(PacketBuf** bufs, size_t n);
  size_t rx_burst_gro(PacketBuf** bufs, size_t n);
  void receive_gro_runs();
  bool lent(const PacketBuf* b) const {
    return gro_ && b >= gro_->lent.data() && b < gro_->lent.data() + gro_->lent.size();
  }
  void unpin(uint16_t slot, uint32_t count = 1) {
    uint16_t& pins = gro_->pins[slot];
    pins = static_cast<uint16_t>(pins - count);
    if (pins == 0 && slot != gro_->bounce) gro_->free_slots.push_back(slot);
  }

  UdpConfig cfg_;
  NetAddr local_;
  std::vector<int> sockets_;  // [0] receives and sends; [i] sends from base + i
  PacketPool pool_;
  UdpStats stats_;
  bool gso_;  // cfg_.gso, until a device refuses it
  // Receive state for GRO, built once when the kernel accepts UDP_GRO; null otherwise.
  // A receive buffer (slot) is posted to recvmmsg only when free: pinned once while its
  // run is being handed up and once per datagram lent from it until that is freed.
  // A posted slot is pinned once, for the run it will hold. The last slot is the bounce
  // buffer: never lent, posted only when every other slot is pinned, its datagrams
  // copied into pool buffers.
  struct GroReceive {
    explicit GroReceive(size_t slots) : arena((slots + 1) * kGroBufferBytes) {}
    WarmHugePages arena;               // (slots + 1) x kGroBufferBytes
    std::vector<PacketBuf> lent;       // slots x kLentPerBuffer descriptors into the arena
    std::vector<uint16_t> pins;        // per slot
    std::vector<uint16_t> free_slots;  // lendable slots with no pin, ready to post
    uint16_t bounce = 0;               // the bounce buffer's slot
    size_t posted_count = 0;           // msgs[0, posted_count) are posted to recvmmsg
    std::array<uint16_t, kGroReceives> posted{};  // the slot behind each msgs entry
    std::array<mmsghdr, kGroReceives> msgs{};
    std::array<iovec, kGroReceives> iov{};
    std::array<sockaddr_storage, kGroReceives> from{};
    std::array<ReceiveControl, kGroReceives> cmsg{};
  };
  std::unique_ptr<GroReceive> gro_;
  std::array<GroRun, kGroReceives> gro_runs_{};
  size_t gro_next_ = 0;   // the run being handed up
  size_t gro_count_ = 0;  // runs from the last receive
};

static_assert(Datapath<UdpDatapath>);

}  // namespace spray::dp
