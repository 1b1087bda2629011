// DpdkDatapath: Spray over a DPDK Ethernet port (kernel bypass).
//
// One port and one RX/TX queue pair per engine. We frame every packet ourselves as
// Ethernet / IPv4 / UDP, exactly as the kernel UDP datapath's packets look on the wire,
// so a DPDK endpoint and a kernel UDP endpoint talk to each other: the same UDP base port
// and entropy_ports rule (source port = base + EV mod entropy_ports), IPv4 DF, ECT(0)
// set on transmit and CE reported on receive (PacketBuf::kEcnCe).
//
// Buffers are mbufs. Each mbuf's private area holds its PacketBuf, so a received packet
// reaches the engine without a copy (PacketBuf::data points at the UDP payload inside
// the mbuf) and a transmitted one is framed in place in the headroom the datapath keeps
// in front of PacketBuf::data.
//
// Checksums: IPv4 header and UDP checksums are offloaded when the port offers it and
// computed in software otherwise; on receive they are verified (or the NIC's verdict is
// taken) and bad packets are dropped and counted, never handed up.
//
// Neighbours: a NeighbourTable filled from configuration, from the kernel's table and
// from ARP. We answer ARP requests for our address; sending to an unknown neighbour
// broadcasts one ARP request (at most one per neighbour per millisecond) and drops the
// packet, which PDS retransmits.
//
// EAL: initialised once per process from a parameter string (FI_SPRAY_DPDK_ARGS), e.g.
// "--no-huge -m 512 --in-memory --vdev=net_memif0,role=server,socket=/tmp/s.sock".
// Later datapaths in the same process must pass the same string or none.
//
// Waiting: wait() sleeps on the queue's RX interrupt when the PMD supports one (memif
// does) and otherwise sleeps in short slices (af_packet), so idle processes do not burn
// a core.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/dpdk/neighbour_table.h"

struct rte_mempool;
struct rte_mbuf;

namespace spray::dp {

struct DpdkConfig {
  std::string eal_args;      // EAL parameters (FI_SPRAY_DPDK_ARGS); see above
  std::string port;          // ethdev name ("net_memif0", "0000:3b:00.0"); empty: the only port
  std::string address;       // our IPv4 address (required)
  uint16_t udp_port = 4800;  // base UDP port, a multiple of entropy_ports
  uint16_t entropy_ports = 8;
  uint32_t mtu_bytes = 1472;            // UET bytes per packet (1500 - IPv4 - UDP)
  std::vector<std::string> neighbours;  // "IPV4=MAC" entries
  bool kernel_neighbours = true;        // also read /proc/net/arp at open
  uint32_t mbufs = 8191;                // mempool size (2^k - 1 is optimal for DPDK)
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  // Frames sent before the port's link first comes up are lost (a memif link comes up
  // only once its peer connects): harmless for RDM, where PDS resends, but a DGRAM
  // application's first datagram would vanish. Bursts sent within this long of open()
  // wait for the link first; later ones, or any once the link has been up, never wait.
  // Zero: never wait. Waiting here rather than in open() costs nothing to a side that
  // receives first (a server), whose link is up by the time it answers.
  Duration first_link_wait{};
};

struct DpdkStats {
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;       // the TX queue was full
  uint64_t tx_no_neighbour = 0;  // no MAC for the destination yet (ARP sent)
  uint64_t tx_bad_address = 0;   // destination is not IPv4
  uint64_t rx_packets = 0;       // UET packets handed up
  uint64_t rx_not_for_us = 0;    // other protocols, addresses or ports
  uint64_t rx_bad_checksum = 0;  // IPv4 or UDP checksum wrong
  uint64_t rx_malformed = 0;     // truncated, inconsistent lengths, fragments
  uint64_t rx_ecn_ce = 0;        // received with CE marked
  uint64_t arp_requests_sent = 0;
  uint64_t arp_replies_sent = 0;
  uint64_t link_wait_expired = 0;  // 1 if a burst gave up waiting for the first link up
};

class DpdkDatapath {
 public:
  // Initialises the EAL if needed, then configures and starts the port. On failure
  // returns nullptr and a message that names the cause.
  static std::unique_ptr<DpdkDatapath> open(const DpdkConfig& config, std::string& error);
  ~DpdkDatapath();
  DpdkDatapath(const DpdkDatapath&) = delete;
  DpdkDatapath& operator=(const DpdkDatapath&) = delete;

  // The Datapath concept.
  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  uint32_t mtu() const { return cfg_.mtu_bytes; }
  NetAddr local_address() const { return local_; }

  // Blocks until a packet may be waiting or `timeout` passes.
  bool wait(Duration timeout);
  const DpdkStats& stats() const { return stats_; }
  MacAddress mac() const { return mac_; }
  NeighbourTable& neighbours() { return neighbours_; }
  bool checksum_offload() const { return tx_checksum_offload_; }
  // Whether the port's link is up now (a memif link comes up once its peer connects).
  bool link_up() const;
  // Waits up to `timeout` for the link, then polls the RX queue once: a memif client
  // offers its receive slots to the server only on its first poll (an engine's
  // progress() does that at once; raw-burst users call this before traffic). Anything
  // received by that poll is freed. False if the link stayed down.
  bool await_link(Duration timeout);

 private:
  DpdkDatapath(const DpdkConfig& config, uint16_t port_id, rte_mempool* pool, MacAddress mac,
               uint32_t ipv4);
  static constexpr size_t kMaxPendingArp = 64;

  // Frames one packet in place; false (not sendable) when the neighbour is unknown.
  bool frame(PacketBuf* b, rte_mbuf* m);
  // Returns the packet's PacketBuf if `m` is a UET packet for us; otherwise counts why
  // not, handles ARP, and frees or reuses `m`.
  PacketBuf* accept(rte_mbuf* m);
  // Takes ownership of `m`: learns the sender if it is for us; turns requests into replies.
  void handle_arp(rte_mbuf* m);
  void send_arp_request(uint32_t target_ipv4);
  // Sends control frames (ARP) right away; they are rare.
  void send_now(rte_mbuf* m);
  // Sleeps until the link is up or `deadline` passes; whether it is up.
  bool link_up_by(std::chrono::steady_clock::time_point deadline) const;
  // The first bursts' wait for the link (DpdkConfig::first_link_wait); afterwards a no-op.
  void await_first_link();

  DpdkConfig cfg_;
  uint16_t port_id_;
  rte_mempool* pool_;  // owned
  MacAddress mac_;
  uint32_t ipv4_;  // host byte order
  NetAddr local_;
  NeighbourTable neighbours_;
  bool tx_checksum_offload_ = false;
  bool rx_interrupts_ = false;
  int rx_interrupt_fd_ = -1;  // the RX queue's event fd, owned by the PMD
  uint64_t arp_holdoff_cycles_ = 0;
  // Whether bursts still wait for the link (DpdkConfig::first_link_wait), until when:
  // cleared by the first burst, which waits at most to the deadline, so tx_burst checks
  // a single flag after the start.
  bool awaiting_first_link_ = false;
  std::chrono::steady_clock::time_point first_link_deadline_{};
  std::vector<std::pair<uint32_t, uint64_t>> arp_pending_;  // (ip, TSC of last request)
  DpdkStats stats_;
};

static_assert(Datapath<DpdkDatapath>);

}  // namespace spray::dp
