// Fabric: an in-process, virtual-time network of N hosts for tests and tools.
//
// Topology: every host has an uplink and a downlink; between them sit `paths` spine
// queues. A packet takes path (entropy % paths), so the entropy value really chooses
// its route. Each queue serializes at its rate, marks ECN above a threshold and trims
// the packet to its headers when full (as UET switches do), or drops it if trimming is
// off. On top, seeded faults: loss, duplication, bit corruption (caught by the NIC's
// FCS check, as Ethernet would), reordering (extra random delay), random trimming, and
// paths set down and up. Deterministic for a given seed and call sequence.
//
// Time only moves when the owner calls advance_to(); nothing here reads a clock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "transport/base/rng.h"
#include "transport/base/time.h"
#include "transport/datapath/packet_pool.h"

namespace spray::sim {

class SimNic;

struct QueueConfig {
  double gbps = 100.0;
  Duration propagation = Duration::microseconds(1);
  uint32_t capacity_bytes = 512 * 1024;
  uint32_t ecn_threshold_bytes = 128 * 1024;
  bool trim_when_full = true;
};

struct FaultConfig {
  double loss = 0;       // probability a packet vanishes
  double duplicate = 0;  // probability a packet arrives twice
  double corrupt = 0;    // probability one bit flips (the FCS check drops it)
  double reorder = 0;    // probability a packet is held back
  Duration reorder_delay = Duration::microseconds(20);  // max extra delay when held
  double trim = 0;  // probability a switch trims it regardless of queue
};

struct FabricConfig {
  uint32_t hosts = 2;
  uint32_t paths = 4;
  QueueConfig host_link{};  // uplinks and downlinks
  QueueConfig path_link{};  // spine paths
  FaultConfig faults{};
  uint32_t mtu_bytes = 4096;
  uint32_t buffers = 32768;     // packet buffers shared by all NICs
  uint32_t nic_rx_ring = 8192;  // per-NIC receive ring; overflow drops
  uint64_t seed = 1;
};

struct FabricStats {
  uint64_t injected = 0;
  uint64_t delivered = 0;
  uint64_t lost = 0;  // random loss
  uint64_t dropped_path_down = 0;
  uint64_t dropped_host_down = 0;
  uint64_t dropped_by_filter = 0;  // the test's drop filter took them (set_drop_filter)
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_rx_ring = 0;
  uint64_t dropped_fcs = 0;  // corrupted, caught by the receiving NIC
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t trimmed = 0;
  uint64_t ecn_marked = 0;
  std::vector<uint64_t> path_packets;  // packets that entered each spine path
};

inline constexpr uint32_t kTrimmedBytes = 64;  // what survives a trim: PDS + SES headers

class Fabric {
 public:
  explicit Fabric(const FabricConfig& config);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  SimNic& nic(uint32_t host) { return *nics_[host]; }
  uint32_t hosts() const { return static_cast<uint32_t>(nics_.size()); }
  const FabricConfig& config() const { return cfg_; }
  const FabricStats& stats() const { return stats_; }
  dp::PacketPool& pool() { return pool_; }

  void set_path_up(uint32_t path, bool up) { path_up_[path] = up; }
  // A host that is down neither sends nor receives: a dead peer.
  void set_host_up(uint32_t host, bool up) { host_up_[host] = up; }
  // Packets for which the filter returns true vanish as they are sent: a failure no
  // random fault gives, such as one direction between two hosts only (one side's sends
  // are lost, its ACKs are not) or one PDC's packets only. Empty: none. For tests.
  using DropFilter = std::function<bool(uint32_t src, uint32_t dst, const dp::PacketBuf& packet)>;
  void set_drop_filter(DropFilter filter) { drop_filter_ = std::move(filter); }
  bool path_up(uint32_t path) const { return path_up_[path]; }
  void set_faults(const FaultConfig& f) { cfg_.faults = f; }

  // Delivers every hop event due at or before `t`.
  void advance_to(Time t);
  // The earliest pending event, or Time{INT64_MAX} when the fabric is empty.
  Time next_event() const;
  Time now() const { return now_; }
  bool idle() const { return events_.empty(); }
  // The longest a packet can spend between entering the fabric and reaching its
  // destination's receive ring: each of its three queues full ahead of it, their
  // propagation, the longest reordering hold and a duplicate's jitter. A packet that
  // entered at t has been delivered or lost by t + longest_transit().
  Duration longest_transit() const;

  // Called by SimNic::tx_burst. Takes ownership of the buffers.
  void inject(uint32_t src_host, dp::PacketBuf** bufs, size_t n);

 private:
  struct Queue {
    QueueConfig cfg;
    Time busy_until{};
  };
  enum class Hop : uint8_t { kUplink, kPath, kDownlink, kDeliver };
  struct Event {
    Time at;
    uint64_t seq;  // ties broken by insertion order: deterministic
    dp::PacketBuf* buf;
    uint32_t src;
    uint32_t dst;
    Hop hop;
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void schedule(Time at, dp::PacketBuf* buf, uint32_t src, uint32_t dst, Hop hop);
  // Passes the packet through a queue; returns false if it was dropped.
  bool enqueue(Queue& q, dp::PacketBuf* buf, Time at, Time& leaves);
  void process(const Event& e);
  void apply_faults(const Event& e);
  void drop(dp::PacketBuf* buf) { pool_.release(buf); }

  FabricConfig cfg_;
  dp::PacketPool pool_;
  std::vector<std::unique_ptr<SimNic>> nics_;
  std::vector<Queue> uplinks_, downlinks_, paths_;
  std::vector<bool> path_up_;
  std::vector<bool> host_up_;
  DropFilter drop_filter_;
  std::vector<uint32_t> fcs_;  // per buffer: the checksum its sender's NIC computed
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0;
  Time now_{};
  Rng rng_;
  FabricStats stats_;

  friend class SimNic;
};

}  // namespace spray::sim
