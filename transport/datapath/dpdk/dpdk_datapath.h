// DpdkDatapath: Spray over a DPDK Ethernet port (kernel bypass).
//
// One port and one RX/TX queue pair per engine. We frame every packet ourselves as
// Ethernet / IPv4 / UDP or Ethernet / IPv6 / UDP (by the family of our address), exactly
// as the kernel UDP datapath's packets look on the wire, so a DPDK endpoint and a kernel
// UDP endpoint talk to each other: the same UDP base port and entropy_ports rule (source
// port = base + EV mod entropy_ports), IPv4 DF, ECT(0) set on transmit and CE reported
// on receive (PacketBuf::kEcnCe). An endpoint speaks its own family only.
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
// Neighbours: a NeighbourTable filled from configuration, from the kernel's table
// and from ARP (IPv4) or neighbour discovery (IPv6). We answer ARP requests and neighbour
// solicitations for our address; sending to an unknown neighbour sends one ARP request or
// neighbour solicitation (at most one per neighbour per millisecond) and holds the
// packet until the answer comes, as the kernel does: up to kMaxHeldPackets in all, for
// at most a second, the oldest dropped first (PDS resends what RDM loses so; a DGRAM
// datagram's first packets would otherwise be lost for certain). An IPv6 endpoint takes in an
// advertisement only for an address it asked about or already knows, so that nobody on the link
// fills its table unasked. IPv6 receives its solicitations on a multicast group, which the port is
// asked to let in (allmulticast; virtual ports here pass every frame anyway), and which the
// endpoint reports with MLD (mld_frame.h) so that switches that snoop MLD forward the group
// to it: an MLDv2 join on its first poll and again a second later, an answer to each query
// that asks for the group (in the query's version, at a random time within its maximum
// response delay), and a leave when it closes.
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
#include "transport/datapath/dpdk/mld_frame.h"
#include "transport/datapath/dpdk/neighbour_table.h"

struct rte_mempool;
struct rte_mbuf;

namespace spray::dp {

struct DpdkConfig {
  std::string eal_args;      // EAL parameters (FI_SPRAY_DPDK_ARGS); see above
  std::string port;          // ethdev name ("net_memif0", "0000:3b:00.0"); empty: the only port
  std::string address;       // our IPv4 or IPv6 address (required)
  uint16_t udp_port = 4800;  // base UDP port, a multiple of entropy_ports
  uint16_t entropy_ports = 8;
  uint32_t mtu_bytes = 1472;            // UET bytes per packet (1500 - IPv4 - UDP; IPv6: 1452)
  std::vector<std::string> neighbours;  // "IP=MAC" entries
  bool kernel_neighbours = true;        // also read the kernel's table at open
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
  uint64_t tx_no_neighbour = 0;  // no MAC for the destination yet: held, ARP or NDP sent
  uint64_t tx_held_dropped = 0;  // held packets dropped: no answer within a second, or
                                 // pushed out by newer ones
  uint64_t tx_bad_address = 0;   // destination is not of our address family
  uint64_t rx_packets = 0;       // UET packets handed up
  uint64_t rx_not_for_us = 0;    // other protocols, addresses or ports
  uint64_t rx_bad_checksum = 0;  // IPv4 or UDP checksum wrong (or none, over IPv6)
  uint64_t rx_malformed = 0;     // truncated, inconsistent lengths, fragments
  uint64_t rx_ecn_ce = 0;        // received with CE marked
  uint64_t arp_requests_sent = 0;
  uint64_t arp_replies_sent = 0;
  uint64_t nd_solicitations_sent = 0;      // IPv6 neighbour discovery
  uint64_t nd_advertisements_sent = 0;     // answers to solicitations for our address
  uint64_t nd_advertisements_ignored = 0;  // unasked and unknown, or not overriding a known MAC
  uint64_t link_wait_expired = 0;          // 1 if a burst gave up waiting for the first link up
  uint64_t mld_reports_sent = 0;           // MLD joins, answers to queries, the leave
  uint64_t mldv1_reports_sent = 0;         // of those, MLDv1 (reports or done) to an MLDv1 querier
  uint64_t mld_queries_received = 0;       // valid MLD queries (invalid ones: rx_not_for_us)
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
  uint16_t entropy_values() const { return cfg_.entropy_ports; }

  // Blocks until a packet may be waiting or `timeout` passes.
  bool wait(Duration timeout);
  const DpdkStats& stats() const { return stats_; }
  MacAddress mac() const { return mac_; }
  NeighbourTable& neighbours() { return neighbours_; }
  bool checksum_offload() const { return tx_checksum_offload_; }
  // Whether the port's link is up now (a memif link comes up once its peer connects).
  bool link_up() const;
  // Sends one Ethernet frame exactly as given, outside the packet path: forged or odd
  // frames in tests, probes. False when it is longer than an mbuf holds, no mbuf is free
  // or the TX queue is full.
  bool send_frame(const uint8_t* frame, uint32_t length);
  // Waits up to `timeout` for the link, then polls the RX queue once: a memif client
  // offers its receive slots to the server only on its first poll (an engine's
  // progress() does that at once; raw-burst users call this before traffic). Anything
  // received by that poll is freed. False if the link stayed down.
  bool await_link(Duration timeout);

 private:
  DpdkDatapath(const DpdkConfig& config, uint16_t port_id, rte_mempool* pool, MacAddress mac,
               const IpBytes& ip);
  static constexpr size_t kMaxPendingResolutions = 64;
  static constexpr size_t kMaxHeldPackets = 64;
  // RFC 3810's robustness variable: unsolicited reports sent when joining, a second apart.
  static constexpr uint8_t kMldUnsolicitedReports = 2;

  enum class Framed : uint8_t { kReady, kHeld, kUnsendable };
  // Frames one packet in place. kHeld: its neighbour is unknown, so the datapath keeps
  // it (hold()); kUnsendable: of the other family or too long, the caller frees it.
  Framed frame(PacketBuf* b, rte_mbuf* m);
  // Keeps `m` for `target` until it resolves; the oldest held packet makes room.
  void hold(rte_mbuf* m, const IpBytes& target);
  // Frames and sends the packets held for `target`, whose MAC is now known.
  void release_held(const IpBytes& target);
  // Drops held packets older than a second.
  void expire_held();
  // Returns the packet's PacketBuf if `m` is a UET packet for us; otherwise counts why
  // not, handles ARP and neighbour discovery, and frees or reuses `m`.
  PacketBuf* accept(rte_mbuf* m);
  // Takes ownership of `m`: learns the sender if it is for us; turns requests into replies.
  void handle_arp(rte_mbuf* m);
  // The same for IPv6 neighbour solicitations and advertisements.
  void handle_neighbour_discovery(rte_mbuf* m);
  // Takes ownership of `m`: a valid MLD query for our group (or all groups) makes a report
  // due within its maximum response delay.
  void handle_mld_query(rte_mbuf* m);
  // Sends the report that is due (mld_report_due_), when the link is up.
  void send_due_mld_report();
  // Sends one MLD message for our solicited-node group: MLDv1 after an MLDv1 query (a
  // report, or a done for kChangeToInclude), otherwise an MLDv2 report with `record`.
  void send_mld_report(MldRecord record);
  // Asks for `target`'s MAC (ARP or a neighbour solicitation), at most once per holdoff.
  void resolve(const IpBytes& target);
  // Whether resolve() asked for `target` and no answer has come yet.
  bool asked_about(const IpBytes& target) const;
  // An answer for `ip` (ARP, or a discovery message we take): records its MAC, stops
  // asking for it, and sends what was held for it.
  void learn(const IpBytes& ip, const MacAddress& mac);
  // Sends control frames (ARP, NDP) right away; they are rare.
  void send_now(rte_mbuf* m);
  // Sleeps until the link is up or `deadline` passes; whether it is up.
  bool link_up_by(std::chrono::steady_clock::time_point deadline) const;
  // The first bursts' wait for the link (DpdkConfig::first_link_wait); afterwards a no-op.
  void await_first_link();

  DpdkConfig cfg_;
  uint16_t port_id_;
  rte_mempool* pool_;  // owned
  MacAddress mac_;
  bool ipv6_;              // our address's family, the only one we send and take
  uint32_t ipv4_ = 0;      // IPv4: our address, host byte order
  IpBytes ip_{};           // our address (IPv4 v4-mapped)
  uint32_t header_bytes_;  // Ethernet + IP + UDP in front of each UET packet
  NetAddr local_;
  NeighbourTable neighbours_;
  bool tx_checksum_offload_ = false;
  // IPv6: whether closing sends an MLD report leaving our solicited-node group, for
  // switches that snoop MLD. Not over net_memif, which joins two processes with no switch
  // between them, and whose control thread unmaps the rings of a peer that has just left
  // while a burst may still be writing to them: a leave report sent as the peer's own
  // endpoint closed crashed the process in memif's tx burst (DPDK 22.11, seen once in
  // about 20 runs of fi_pingpong_dpdk_memif_ipv6_rdm under ctest -j4, 2026-12-07).
  bool leave_report_on_close_ = true;
  bool rx_interrupts_ = false;
  int rx_interrupt_fd_ = -1;  // the RX queue's event fd, owned by the PMD
  uint64_t resolve_holdoff_cycles_ = 0;
  // Whether bursts still wait for the link (DpdkConfig::first_link_wait), until when:
  // cleared by the first burst, which waits at most to the deadline, so tx_burst checks
  // a single flag after the start.
  bool awaiting_first_link_ = false;
  std::chrono::steady_clock::time_point first_link_deadline_{};
  std::vector<std::pair<IpBytes, uint64_t>> resolving_;  // (ip, TSC of last request)
  struct HeldPacket {
    rte_mbuf* m;       // owned; its PacketBuf still names the peer
    IpBytes target;    // the neighbour it waits for
    uint64_t held_at;  // TSC
  };
  std::vector<HeldPacket> held_;  // oldest first; reserved to kMaxHeldPackets
  uint64_t hold_limit_cycles_ = 0;
  // MLD (IPv6 only): when the next report is due (TSC; 0: none), how many unsolicited
  // joins are still to go, and the version of the last query heard (1 or 2).
  uint64_t mld_report_due_ = 0;
  uint8_t mld_unsolicited_left_ = 0;
  uint8_t mld_version_ = 2;
  DpdkStats stats_;
};

static_assert(Datapath<DpdkDatapath>);

}  // namespace spray::dp
