// AutoDatapath (FI_SPRAY_DATAPATH=auto): shared memory to peers on this host, kernel UDP
// to the rest, behind one endpoint name, as HPC providers pair a network path with a
// shared-memory one (libfabric's efa with shm, psm3). A job that spans hosts gets one
// copy (or none) between local ranks and the sprayed UDP path between hosts.
//
// One name: the UDP endpoint binds address:port and the shared-memory region is named
// after the same address and port, so a peer's address says both where its socket is
// and where its region would be. A peer is local when its region exists (and is live);
// that is learnt on the first packet to it and remembered either way.
//
// Buffers: alloc() hands out shared-memory buffers (lent to local receivers without a
// copy; for a remote peer the kernel copies them like any other), and UDP buffers only
// when those run out. A packet for a local peer in a UDP buffer goes over UDP: still
// correct, the peer receives UDP too.
//
// Waking: the UDP socket is also the shared-memory doorbell; doorbell datagrams
// (kDoorbellBytes long, shorter than any UET packet) are dropped on receipt.
//
// Polling: shared memory costs a few loads per poll, the UDP socket a system call
// (recvmmsg, 1.6 us empty on the PVM guests we test on), and between local ranks the
// socket is nearly always empty: with 4 ranks on 2 cores recvmmsg was a tenth of a 4 KiB
// all-reduce's CPU time. So a socket that has been empty for kUdpIdlePolls polls is
// polled once per kUdpIdleInterval, until it yields a packet again; a socket that
// carries traffic is polled every time. The bound is in time, not in polls, because a
// poll's cost varies (an idle engine polls every ~0.1 us): it caps what a remote
// peer's first packet after a quiet spell waits, and keeps the idle socket's system
// calls under a tenth of an idle loop. The clock itself (26 ns) is read only every
// kUdpClockStride-th skipped poll. fi_pingpong 8 B between local processes, five
// interleaved rounds (2026-11-26): 2.1-2.5 us a transfer, against 2.7-3.1 when the idle
// socket was polled every 16th time.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/shm/shm_datapath.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {

struct AutoStats {
  uint64_t tx_local = 0;   // packets sent through shared memory
  uint64_t tx_remote = 0;  // packets sent over UDP
  uint64_t rx_doorbells = 0;
  uint64_t udp_polls_skipped = 0;  // rx_burst calls that left the idle UDP socket alone
};

class AutoDatapath {
 public:
  // Opens the UDP endpoint of `udp` and a shared-memory region named like it; `shm`
  // gives the region's geometry (its address, port and MTU are taken from the UDP side).
  static std::unique_ptr<AutoDatapath> open(const UdpConfig& udp, ShmConfig shm,
                                            std::string& error);

  // The Datapath concept.
  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  // What every path carries: UDP's. Peers on this host take up to host_local_mtu().
  uint32_t mtu() const { return udp_->mtu(); }
  // UET bytes per packet to a peer for which is_host_local() holds: shared memory's
  // (16467 by default), not the network's (1472 on a 1500-byte Ethernet, 8972 on
  // loopback), so local ranks of a job that spans hosts exchange as few packets as
  // over FI_SPRAY_DATAPATH=shm. Such a packet fits only a shared-memory buffer: one
  // built while they are all lent (alloc then hands out UDP buffers) does not fit, is
  // counted sent and lost, and goes again on PDS's retransmission timeout.
  uint32_t host_local_mtu() const { return shm_->mtu(); }
  NetAddr local_address() const { return udp_->local_address(); }
  uint16_t entropy_values() const { return udp_->entropy_values(); }  // the network's

  // One copy for rendezvous receives from local peers (see ShmDatapath); remote peers
  // answer false at once and are read through packets.
  bool read_peer_memory(const NetAddr& peer, uint64_t key, uint64_t remote_address, uint8_t* local,
                        size_t length) {
    return shm_->read_peer_memory(peer, key, remote_address, local, length);
  }
  void offer_for_reading(uint64_t key) { shm_->offer_for_reading(key); }
  void withdraw_from_reading(uint64_t key) { shm_->withdraw_from_reading(key); }
  // True when `peer` is on this host (it has a live shared-memory region), so packets to
  // it go through shared memory; false when they cross the network over UDP. The engine
  // gives the latter a longer base RTT (EngineConfig::network_base_rtt). Asking changes
  // nothing: where packets go is still decided on the first one sent (ShmDatapath::reaches).
  bool is_host_local(const NetAddr& peer) { return shm_->has_live_region(peer); }
  // A batch goes out once it holds this many bytes for local peers (see ShmDatapath):
  // they see nothing until tx_burst publishes. Packets over UDP do not count, since a
  // system call per 64 KiB is dear there. Measured (spray-fi-rate, 64 KiB messages, 16 in
  // flight, between local processes, 2026-11-28, medians of five interleaved rounds):
  // 8.9 GB/s against 5.1 when only full batches left.
  static constexpr size_t kTxFlushBytes = ShmDatapath::kTxFlushBytes;
  bool flushes_early(const PacketBuf& b) {
    if (!shm_->owns(&b)) return false;  // a UDP buffer goes over UDP, local peer or not
    if (!(b.peer == flush_peer_)) {     // runs of packets to one peer ask reaches() once
      flush_peer_ = b.peer;
      flush_peer_local_ = shm_->reaches(b.peer);
    }
    return flush_peer_local_;
  }
  // See UdpDatapath::keep; shared-memory buffers are held as they are.
  PacketBuf* keep(PacketBuf* b) { return udp_->owns(b) ? udp_->keep(b) : b; }
  bool wait(Duration timeout);
  // Also makes the next rx_burst poll the UDP socket: what wakes a sleeper is a datagram.
  bool prepare_wait() {
    idle_udp_poll_due_.store(true, std::memory_order_relaxed);
    return shm_->prepare_wait() && !udp_->has_pending();
  }
  int wait_fd() const { return udp_->wait_fd(); }

  const AutoStats& stats() const { return stats_; }
  const UdpDatapath& udp() const { return *udp_; }
  const ShmDatapath& shm() const { return *shm_; }

 private:
  AutoDatapath(std::unique_ptr<UdpDatapath> udp, std::unique_ptr<ShmDatapath> shm)
      : udp_(std::move(udp)), shm_(std::move(shm)) {}

  std::unique_ptr<UdpDatapath> udp_;
  std::unique_ptr<ShmDatapath> shm_;  // borrows udp_'s base socket: destroyed first
  AutoStats stats_;
  // Whether this rx_burst should poll the idle UDP socket (see "Polling" above).
  bool idle_udp_poll_due();

  // flushes_early's last answer. A peer that dies meanwhile may be taken for local a
  // little longer: that decides only when a batch leaves, not where it goes.
  NetAddr flush_peer_;
  bool flush_peer_local_ = false;

  static constexpr uint32_t kUdpIdlePolls = 1024;
  static constexpr Duration kUdpIdleInterval = Duration::microseconds(20);
  static constexpr uint32_t kUdpClockStride = 16;
  uint32_t udp_empty_polls_ = 0;  // consecutive UDP polls that brought no packet
  uint32_t udp_skipped_ = 0;      // polls the idle socket was skipped since the clock read
  Time last_idle_udp_poll_;       // monotonic_now() at the idle socket's last poll
  // Poll it next time whatever the clock says. Atomic: prepare_wait may run in a thread
  // that waits outside the provider's lock while another progresses (cq.cc).
  std::atomic<bool> idle_udp_poll_due_{false};
};

static_assert(Datapath<AutoDatapath>);

}  // namespace spray::dp
