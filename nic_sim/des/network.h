// Network: the discrete-event simulation of a Topology whose hosts run the real
// transport — SES over PDS with its congestion control and path selection from
// transport/ and congestion/ (one Ses and one Pds per host, the same code the UDP and
// DPDK engines run) — on simulated NICs that serialise at line rate, through switches
// with output queues.
//
// Switch output queue (per port, a FIFO at line rate): packets arriving above
// `ecn_min_bytes` are ECN-marked with a probability rising linearly to 1 at
// `ecn_max_bytes`; a data packet that does not fit in `buffer_bytes` is trimmed to its
// headers (kHeaderBytes) and sent in a priority lane of its own (bounded by
// `priority_buffer_bytes`, not delayed by the data), so the receiver NACKs it (UET
// TRIMMED) at once; headers that do not fit either, or anything when trimming is off,
// are dropped (drop-tail). A FIFO is kept as the time its last byte leaves, so each
// packet's departure is computed on arrival (one event per packet per hop).
// Forwarding: ECMP over the up ports by a hash of (source, destination, entropy value,
// switch), at every hop.
//
// Flows are SES messages: tagged eager sends (tag = flow index) that the source's SES
// starts at the flow's start time (or when the flows it depends on have arrived), into
// receives its destination posted up front; a flow completes when the destination's
// SES completes that receive (every byte placed once; PDS deduplicates by PSN). Packets
// carry the SES header SES encoded and the PDS header PDS built, never payload: the
// sender's SES writes headers only (Ses::build_header), and the receiver's SES is handed
// the header followed by that many bytes of a scratch buffer, which it places into one
// receive buffer all flows share (sized by the largest flow; nothing reads it). Each
// host names its peers by dense indices, as the real engine's peer table does.
//
// Time is integer picoseconds; nothing reads a clock. Same seed, same results.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nic_sim/des/event_queue.h"
#include "nic_sim/des/sim_packet.h"
#include "nic_sim/des/topology.h"
#include "transport/base/rng.h"
#include "transport/pds/pds.h"
#include "transport/ses/ses.h"

namespace spray::des {

struct SwitchConfig {
  uint32_t buffer_bytes = 512 * 1024;  // per output port
  uint32_t ecn_min_bytes = 64 * 1024;
  uint32_t ecn_max_bytes = 256 * 1024;
  bool trimming = true;
  uint32_t priority_buffer_bytes = 64 * 1024;  // trimmed headers, per port
};

struct NetworkConfig {
  SwitchConfig switches{};
  uint32_t mtu_bytes = 4096;  // wire bytes of a full packet, headers included
  pds::PdsConfig pds{};       // cc_name, path_name, entropy_count, timers, window
  // RACK's least reorder window and the least retransmission timeout, in base RTTs of
  // the fabric (they replace pds's reorder_window and min_rto). The PDS defaults, 20 and
  // 100 us, cover kernel UDP's scheduling jitter; on a fabric whose RTT is a few us they
  // leave a packet stranded on a slow path unrecovered for many RTTs. Measured on the
  // k=16 fat-tree (RTT 6.5 us) with 8 core links at 10 %: REPS p99 1.30x ideal with a
  // 1.25-RTT reorder window, 1.62x with 1.5 and up; at 1 RTT spraying's own reordering
  // triggers spurious resends (3,000 on the undegraded fabric, p99 1.33x not 1.20x).
  // The RTO floor matters for incasts: below ~8 RTTs NSCC's 127->1 incast (queues of
  // tens of us) times out spuriously 22,000 times and finishes 11 % later.
  double reorder_window_rtts = 1.25;
  double min_rto_rtts = 8;
  Duration ack_delay = Duration::nanoseconds(200);    // receive coalescing before ACKing
  Duration timer_tick = Duration::microseconds(2);    // PDS timer granularity while armed
  Duration goodput_bin = Duration::microseconds(10);  // resolution of delivered_per_bin()
  uint64_t seed = 1;
};

struct Flow {
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t bytes = 0;  // payload
  Time start{};        // earliest start; it also waits for `waits_for` flows
  // Filled in by the simulation.
  Time started{};
  Time finished{};
  bool done = false;
  uint64_t received = 0;
  uint32_t waits_for = 0;            // flows still to complete before this one starts
  std::vector<uint32_t> dependents;  // flows that wait for this one
};

struct LinkChange {
  Time at{};
  uint32_t port = 0;         // a link (one direction; change both for a cable)
  double rate_fraction = 1;  // 0: down; (0, 1): degraded; 1: restored
};

struct NetworkStats {
  uint64_t events = 0;
  uint64_t packets_sent = 0;  // by hosts
  uint64_t ecn_marked = 0;
  uint64_t trimmed = 0;
  uint64_t dropped_full = 0;
  uint64_t dropped_link_down = 0;
  uint32_t max_queue_bytes = 0;    // over all switch ports
  uint64_t messages_received = 0;  // summed over hosts' SES at the end
  uint64_t retransmits = 0;        // summed over hosts' PDS at the end
  uint64_t timeouts = 0;
  uint64_t failed_flows = 0;       // the transport gave up (retries exhausted)
  uint64_t refused_packets = 0;    // SES had no room: NACKed, retried by the sender
  uint64_t malformed_packets = 0;  // SES rejected the header (a simulator bug if ever > 0)
};

class Network {
 public:
  Network(const Topology& topology, const NetworkConfig& config, std::vector<Flow> flows);
  ~Network();

  // Schedules a link change (failure, degradation, recovery).
  void schedule(const LinkChange& change);
  // Watches a port's queue depth every `interval` (for plots); samples in queue_samples().
  void watch_port(uint32_t port, Duration interval);
  // Runs until every flow is done or `limit` of virtual time passed; true if all done.
  bool run(Duration limit);

  Time now() const { return now_; }
  // Nothing left to happen (every flow done, or stuck with no timer to unstick it).
  bool idle() const { return events_.empty(); }
  const std::vector<Flow>& flows() const { return flows_; }
  const NetworkStats& stats() const { return stats_; }
  const Topology& topology() const { return topo_; }
  // Ideal completion time of a flow: its size with headers at the host line rate, plus
  // the unloaded store-and-forward latency of one full packet over the rest of its path.
  Duration ideal_fct(const Flow& f) const;
  // Packets that left through a port (link).
  uint64_t port_packets(uint32_t port) const { return ports_[port].tx_packets; }
  struct QueueSample {
    Time at;
    uint32_t port;
    uint32_t bytes;
  };
  const std::vector<QueueSample>& queue_samples() const { return samples_; }
  // Payload bytes delivered (first copies only) in each goodput_bin of virtual time.
  const std::vector<uint64_t>& delivered_per_bin() const { return delivered_; }
  // The last time a data packet was routed to a port (whether the link carried it or
  // was dead and lost it), for failure reaction: when did senders stop using a path?
  Time last_use(uint32_t port) const { return ports_[port].last_offered; }
  size_t memory_bytes() const;

 private:
  enum Kind : uint8_t { kArrive, kTxDone, kFlowStart, kHostTimer, kAckFlush, kLinkChange, kSample };
  // A port: at a host, the NIC's FIFO (packets the host has handed over) and whether it
  // is transmitting; at a switch, only when the last queued byte of its data FIFO and
  // of its trimmed-header lane leave (their depth follows from that and the rate).
  struct Port {
    uint32_t head = kNoPacket, tail = kNoPacket;  // host NIC FIFO
    uint32_t queued_bytes = 0;                    // host NIC
    uint32_t queued_packets = 0;                  // host NIC
    bool busy = false;                            // host NIC
    Time busy_until{};                            // switch: data FIFO drained
    Time prio_busy_until{};                       // switch: trimmed headers drained
    double rate_fraction = 1;
    uint64_t tx_packets = 0;
    Time last_offered{};  // the last data packet routed to this port (sent or dropped)
  };
  struct Host {
    std::unique_ptr<pds::Pds> pds;
    std::unique_ptr<ses::Ses> ses;
    std::vector<uint32_t> peers;  // PeerIndex -> host, sorted: every host a flow pairs it with
    bool timer_pending = false;
    bool flush_pending = false;
  };

  void dispatch(const Event& e);
  // A packet reaches the output port `port` (at a switch or a host's NIC).
  void enqueue(uint32_t port, uint32_t packet);
  void enqueue_at_switch(uint32_t port, uint32_t packet);
  // Bytes still to leave a switch lane that drains at `until` at `gbps`.
  uint32_t queued_bytes(Time until, double gbps) const;
  void start_tx(uint32_t port);
  void arrive(uint32_t port, uint32_t packet);
  void receive(uint32_t host, uint32_t packet);
  // Moves what the host's PDS wants sent onto its NIC, keeping one packet queued behind
  // the one on the wire.
  void kick(uint32_t host);
  uint32_t make_packet(uint32_t src, uint32_t dst, uint16_t entropy);
  void start_flow(uint32_t flow);
  void finish_flow(uint32_t flow);
  void arm_timer(uint32_t host);
  // Hands PDS's reports (acknowledged, failed) to SES and SES's completions to the flows.
  void drain_reports(uint32_t host);
  void drain_completions(uint32_t host);
  // How `host` names `remote` (its PeerIndex).
  pds::PeerIndex peer_index(uint32_t host, uint32_t remote) const;
  uint64_t ecmp_hash(uint32_t node, const SimPacket& p) const;
  void push(uint32_t& head, uint32_t& tail, uint32_t packet);
  uint32_t pop(uint32_t& head, uint32_t& tail);

  const Topology& topo_;
  NetworkConfig cfg_;
  std::vector<Flow> flows_;
  std::vector<Port> ports_;
  std::vector<Host> hosts_;
  std::vector<LinkChange> changes_;
  std::vector<std::pair<uint32_t, Duration>> watched_;
  std::vector<QueueSample> samples_;
  std::vector<uint64_t> delivered_;
  PacketStore packets_;
  std::unique_ptr<uint8_t[]> payload_area_;  // the one send source and receive buffer
  std::vector<uint8_t> rx_scratch_;          // a header and its stand-in payload, for SES
  uint32_t payload_per_packet_ = 0;          // SES's, the same on every host
  EventQueue events_;
  Rng rng_;
  Time now_{};
  uint32_t flows_done_ = 0;
  NetworkStats stats_;
};

}  // namespace spray::des
