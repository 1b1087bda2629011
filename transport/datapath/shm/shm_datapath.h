// ShmDatapath: Spray between processes on one host through shared memory
// (FI_SPRAY_DATAPATH=shm), the path Open MPI's vader and libfabric's shm take for local
// peers. The transport above it is unchanged (PDS still acknowledges, SES still
// matches), but packets cross without the kernel: an eager message's bytes are copied
// twice (application to buffer, buffer to application), against four or five times over
// kernel UDP, and a rendezvous message's once, by the receiving engine straight from the
// sender's buffer (read_peer_memory). See shm_layout.h for the region and how a packet
// travels.
//
// Addressing: an endpoint is named by an IP address and UDP port like a UDP endpoint
// (so the provider's address vector is the same), and holds a UDP socket bound to that
// address and port. The socket makes the name unique on the host and is the doorbell:
// a sender sends it one byte only when the owner said it is going to sleep, so a busy
// receiver costs no system call. Both ends must be on this host.
//
// Batching: tx_burst publishes each touched ring's head once per burst; rx_burst takes
// every waiting descriptor of each sender with one load of its head and one store of its
// tail. No system call, lock or allocation per packet.
//
// Failures: a peer whose region does not exist is unreachable (packets dropped and
// counted; PDS times out as for a dead host). A receiver that dies keeps the buffers it
// held until the sender notices it is gone (its pid no longer exists) and takes them
// back; a sender that dies has its inbox slot freed by the receiver when it is idle.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/huge_page_memory.h"
#include "transport/datapath/shm/shm_layout.h"

namespace spray::dp {

struct ShmConfig {
  std::string address = "127.0.0.1";  // a local IPv4/IPv6 address: the endpoint's name
  uint16_t port = 0;                  // UDP port of the name and doorbell; 0 picks one
  // UET bytes per packet. SES carries at most 16383 payload bytes per packet (a 14-bit
  // length), so larger buffers would be wasted: 16383 + SES's header reserve.
  uint32_t mtu_bytes = 16383 + 84;
  // This endpoint's transmit buffers (shared memory, reserved when the endpoint opens:
  // 1024 x 16.5 KB = 17 MB). A 500 KB window is 31 packets per peer.
  uint32_t buffers = 1024;
  uint32_t inbox_slots = 64;    // distinct senders this endpoint can receive from at once
  uint32_t ring_entries = 512;  // descriptors per sender ring, a power of two
  uint32_t rx_views = 4096;     // received packets the engine may hold at once
  // A UDP socket the caller already bound (the `auto` datapath's, whose UDP endpoint
  // shares the name): borrowed, not closed, and never read here, since real packets
  // arrive on it too. Doorbells then arrive as kDoorbellBytes-long datagrams, which its
  // owner must discard. -1: bind our own socket to address:port.
  int shared_socket = -1;
  // How read_peer_memory copies to a destination 1-63 bytes past its source modulo 4 KiB:
  // as this CPU does it faster (measured once per process: short_distance_reads.h), or
  // always one way (tests).
  enum class ShortDistanceReads { kMeasured, kDirect, kBounced };
  ShortDistanceReads short_distance_reads = ShortDistanceReads::kMeasured;
};

// A doorbell datagram's length: no UET packet is this short.
inline constexpr uint32_t kDoorbellBytes = 1;

struct ShmStats {
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;      // the receiver's ring was full or it is gone
  uint64_t tx_unreachable = 0;  // of those: no region at that address, or its owner died
  uint64_t tx_doorbells = 0;    // wake-ups sent to sleeping receivers
  uint64_t rx_packets = 0;
  uint64_t rx_malformed = 0;         // descriptors naming a buffer or length outside the sender
  uint64_t reclaimed_from_dead = 0;  // buffers taken back from receivers that died
  uint64_t slots_freed = 0;          // inbox slots of dead senders freed
  uint64_t peer_reads = 0;           // read_peer_memory calls that copied
  uint64_t peer_read_bytes = 0;
  uint64_t peer_reads_refused = 0;    // ... that failed (permission, bad address, peer gone)
  uint64_t peer_reads_withdrawn = 0;  // ... that copied, but the peer had withdrawn the key
  uint64_t peer_reads_bounced = 0;    // ... copied through the bounce buffer (read_peer_memory)
};

class ShmDatapath {
 public:
  // Binds the doorbell socket and creates the region. nullptr and a message naming the
  // cause on failure (address not local, port in use, /dev/shm full, bad geometry).
  static std::unique_ptr<ShmDatapath> open(const ShmConfig& config, std::string& error);

  // alloc() reclaims first once this many buffers are lent out (a scan of their lent
  // flags per burst, loads from one 4 KiB page). Not much fewer: a buffer used again
  // while the receiver's core still caches it costs the writer a snoop per line, and
  // fi_pingpong at 64 KiB took 10-12.5 us a message reclaiming at 32 or 64 against
  // 6.5-7.5 at 128-512 (9.8-10.9 reclaiming only when none was left; 2026-11-24). At
  // 256 the hot set is 4 MB: inside L3, four times a core's L2.
  static constexpr size_t kReclaimAtLent = 256;
  static constexpr size_t kReclaimStride = 32;
  // Buffers whose pages are touched once, one access a page, when this endpoint creates
  // its region (writes) and when it maps a peer's (reads): the hot set above and a
  // reclaim stride, the first buffers alloc() hands out. Why, although both mappings are
  // populated (MAP_POPULATE, MADV_POPULATE_WRITE): on the PVM guests this project is
  // built and measured on, a process's first access to each such page still cost far
  // more than later ones, with no page fault counted. Every packet of a new endpoint's
  // first few hundred paid it on both sides, and collectives ran 2-3x slower for their
  // first 15-45 calls. Measured (2026-11-26, mean of a fresh process's first 60 calls):
  // 4 ranks on 2 cores, 4 KiB all-reduce 143-151 us against 332-408 before; 2 ranks,
  // 64 KiB, 47-57 against 189-205; and the first call, which maps the peers, got no
  // slower (1.0-1.3 ms against 1.6-2.8). Where populating suffices, this is one read or
  // write per page of memory already mapped.
  static constexpr size_t kTouchedBuffers = kReclaimAtLent + kReclaimStride;
  ~ShmDatapath();
  ShmDatapath(const ShmDatapath&) = delete;
  ShmDatapath& operator=(const ShmDatapath&) = delete;

  // The engine hands over its transmit batch at this many bytes: a receiver sees nothing
  // until tx_burst publishes, and publishing costs a store and a fence. 64 KiB measured
  // best among 16-128 KiB (1 MiB ping-pong and stream).
  static constexpr size_t kTxFlushBytes = 64 * 1024;

  // The Datapath concept.
  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  uint32_t mtu() const { return layout_.mtu_bytes; }
  NetAddr local_address() const { return local_; }

  // Copies `length` bytes at `remote_address` in the memory of the process that owns the
  // endpoint at `peer` into `local` (one copy, by cross-memory attach: process_vm_readv),
  // for a rendezvous receive whose sender offers `key` (offer_for_reading). False when
  // that is not possible (the peer is unknown or gone, the kernel refuses: then it stays
  // off) or when, after the copy, the peer no longer offers `key` (what was copied may be
  // what its application wrote since): the engine then reads through packets instead,
  // which the sender answers only while the send is live.
  // The kernel copies with `rep movsb`, on some CPUs several times slower when `local`
  // lies 1-63 bytes past the source modulo 4 KiB (transport/base/copy_bytes.h); on those
  // such a read goes through a bounce buffer placed at the source's offset in its page,
  // kBouncePiece at a time, and copy_bytes moves it on (spray-fi-rate, 1 MiB messages over
  // shm received 16 bytes past their source: 3581 against 1591 MB/s before, 2026-11-28).
  // Which CPUs: config.short_distance_reads, short_distance_reads.h.
  bool read_peer_memory(const NetAddr& peer, uint64_t key, uint64_t remote_address, uint8_t* local,
                        size_t length);
  // This endpoint's rendezvous send of `key` may be copied from by peers, until
  // withdraw_from_reading(key). Called before the send's header leaves.
  void offer_for_reading(uint64_t key);
  // It may no longer: called before the send's completion can be read, so a copy that
  // ends after the application may have reused the buffer finds the key gone.
  void withdraw_from_reading(uint64_t key);
  // True when packets to `peer` can go through shared memory: it has a live region on
  // this host with room in its inbox. A peer found without one is remembered as not
  // local (no system call on the next asks): the `auto` datapath sends to it over UDP.
  bool reaches(const NetAddr& peer);
  // Whether `peer` has a live region on this host, without the side effects of reaches():
  // no inbox slot is taken and a peer without one is not remembered as remote (the auto
  // datapath asks this when an engine first hears of a peer, which may be before that
  // peer's endpoint exists; taking a slot in every peer's inbox then would fill the
  // inboxes of a host with more ranks than slots). A few system calls for a new peer.
  bool has_live_region(const NetAddr& peer);
  // True when `b` is one of this datapath's buffers (transmit buffer or received view).
  bool owns(const PacketBuf* b) const {
    return (b >= tx_bufs_.data() && b < tx_bufs_.data() + tx_bufs_.size()) ||
           (b >= rx_views_.data() && b < rx_views_.data() + rx_views_.size());
  }

  // Blocks until a packet is waiting or `timeout` passes. True if one is waiting.
  bool wait(Duration timeout);
  // Before blocking on wait_fd() elsewhere (epoll): announces the sleep to senders.
  // False when packets are already waiting (then do not block). rx_burst ends the sleep.
  bool prepare_wait();
  // Frees the inbox slots of senders that died (rx_burst does it every
  // kIdlePollsPerCollection empty polls).
  void collect_dead_senders();
  static constexpr uint32_t kIdlePollsPerCollection = 1 << 14;
  int wait_fd() const { return socket_; }
  const ShmStats& stats() const { return stats_; }

 private:
  // Another endpoint's region, mapped read-write (we write its inbox rings and lent flags).
  struct PeerRegion {
    NetAddr addr;
    uint8_t* base = nullptr;
    shm::RegionLayout layout;  // copied and checked when mapped
    int32_t pid = 0;
    bool gone = false;  // its owner died; unmapped once no received packet points into it
  };
  // Where this endpoint sends to one peer: the slot it claimed in the peer's inbox.
  struct Outbox {
    uint32_t region = 0;  // index into regions_
    shm::SlotControl* slot = nullptr;
    shm::Descriptor* ring = nullptr;
    uint32_t head = 0;       // next descriptor to write (published at the burst's end)
    uint32_t tail_seen = 0;  // the receiver's tail when last loaded
    bool touched = false;    // has unpublished descriptors in this burst
    bool dead = false;       // the receiver died; packets to it are dropped
    sockaddr_storage doorbell{};
    socklen_t doorbell_len = 0;
  };
  // What this endpoint knows of one slot of its own inbox.
  struct Inbound {
    uint32_t generation = 0;
    int32_t region = -1;  // the sender's region, or -1 until mapped
  };

  ShmDatapath(const shm::RegionLayout& layout, NetAddr local, int socket, bool owns_socket,
              uint8_t* base, std::string name, uint32_t rx_views);

  // Setup (shm_setup.cc).
  int32_t map_peer(const NetAddr& addr);  // index into regions_, -1 if it has no region
  int32_t outbox_for(const NetAddr& peer);
  static bool process_is_alive(int32_t pid);
  // True when `h`, the header of a region file of `file_bytes`, is the live region of the
  // endpoint at `addr`: ours in format, its layout within the file, its owner alive.
  static bool is_live_region_of(const shm::RegionHeader* h, const NetAddr& addr,
                                uint64_t file_bytes);
  void reclaim();  // lent buffers that came back, and those lent to the dead
  // A peer's owner died: no more packets to it (its outboxes die), and its mapping goes
  // once no received packet points into it.
  void forget_region(uint32_t index);
  void unmap_region(uint32_t index);
  void end_sleep();

  bool packets_waiting() const;

  static constexpr uint32_t kViewTag = 0x80000000;  // owner_tag of a received packet's view

  shm::RegionLayout layout_;  // of this endpoint's region
  NetAddr local_;
  int socket_ = -1;
  bool owns_socket_ = true;  // false: ShmConfig::shared_socket, borrowed
  uint8_t* base_ = nullptr;  // this endpoint's region
  shm::RegionHeader* header_ = nullptr;
  std::string name_;  // of this endpoint's region, unlinked on close
  ShmStats stats_;

  // Transmit buffers: this region's buffers, in order; free ones are a LIFO stack so the
  // same few pages stay hot. lent_ lists the buffers with a receiver and lent_to_ the
  // outbox each was sent through.
  std::vector<PacketBuf> tx_bufs_;
  std::vector<uint32_t> tx_free_;
  std::vector<uint32_t> lent_;
  std::vector<uint32_t> lent_to_;
  size_t next_reclaim_at_ = kReclaimAtLent;  // lent_.size() at which alloc() reclaims

  // Receive views: descriptors for packets in senders' regions, and the lent flag each
  // clears when freed.
  std::vector<PacketBuf> rx_views_;
  std::vector<uint32_t> rx_free_;
  std::vector<std::atomic<uint32_t>*> rx_lent_flag_;
  std::vector<int32_t> rx_region_;  // the region each view points into

  std::vector<PeerRegion> regions_;
  std::vector<uint32_t> region_views_;  // views outstanding per region
  struct AddrHash {
    size_t operator()(const NetAddr& a) const { return a.hash(); }
  };
  std::unordered_map<NetAddr, int32_t, AddrHash> region_by_addr_;
  std::vector<Outbox> outboxes_;
  std::unordered_map<NetAddr, int32_t, AddrHash> outbox_by_addr_;
  std::unordered_set<NetAddr, AddrHash> not_local_;  // peers reaches() found no region for
  std::vector<uint32_t> touched_;   // outboxes with descriptors to publish this burst
  std::vector<Inbound> inbound_;    // per own inbox slot
  uint32_t rx_next_slot_ = 0;       // round robin over senders
  uint32_t idle_polls_ = 0;         // empty rx_bursts, for collect_dead_senders
  bool peer_reads_allowed_ = true;  // false after the kernel refused cross-memory reads
  ShmConfig::ShortDistanceReads short_distance_reads_ = ShmConfig::ShortDistanceReads::kMeasured;
  // read_peer_memory's bounce buffer: kBouncePiece + one page on warmed huge pages
  // (page-aligned, and the kernel writes it first). bounce_buffer() makes it on first use
  // (most endpoints never need it) and returns null when it cannot be had.
  static constexpr size_t kBouncePiece = size_t{256} << 10;
  uint8_t* bounce_buffer();
  // Whether a read at a short distance goes through bounce_buffer() (config's choice, or
  // the process's measurement when that is kMeasured).
  bool bounce_short_reads() const;
  std::unique_ptr<WarmHugePages> bounce_;
};

static_assert(Datapath<ShmDatapath>);

}  // namespace spray::dp
