// FabricRelay: the simulated Fabric (fabric.h) with real processes on it, the core of
// spray-fabric (tools/spray_fabric). Pure, like the Fabric: datagrams and the time come
// in as arguments and datagrams to send go out as values; the daemon owns the socket
// and the clock.
//
// Each process endpoint is a host of the fabric, named by the UDP address it sends
// from; hosts are given out in the order addresses are first seen, as a source or as a
// destination, up to FabricConfig::hosts. When every host is taken, a new address gets
// the host idle longest, if it has neither sent nor been sent to for `host_idle` and no
// packet of its old address can still be in the fabric or a receive ring (see
// reclaimable()): processes come and go, and a long-running daemon would otherwise refuse
// newcomers once as many endpoints as hosts had ever opened.
//
// A datagram from a process carries a relay header
// (transport/datapath/fabric/relay_header.h) naming its destination; its packet enters
// the fabric from the sender's host on the path its EV picks, and leaves at the
// destination's host with a header naming the sender, the EV, and whether the fabric
// trimmed it or marked it CE.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "nic_sim/fabric.h"
#include "nic_sim/sim_nic.h"
#include "transport/datapath/fabric/relay_header.h"

namespace spray::sim {

struct RelayStats {
  uint64_t taken = 0;            // packets that entered the fabric
  uint64_t malformed = 0;        // datagrams without a valid relay header
  uint64_t too_large = 0;        // packets longer than the fabric's MTU
  uint64_t no_host_left = 0;     // from or to a new address while no host was free or idle
  uint64_t not_allowed = 0;      // to a new address the destination check refused
  uint64_t no_buffer = 0;        // the fabric's buffers were all in flight
  uint64_t delivered = 0;        // packets handed out by collect()
  uint64_t hosts_reclaimed = 0;  // idle hosts given to a new address

  // Datagrams dropped at the door, for every reason above.
  uint64_t refused() const {
    return malformed + too_large + no_host_left + not_allowed + no_buffer;
  }
};

// A spine path taken down for a while and brought back up.
struct PathOutage {
  uint32_t path = 0;
  Duration from{};   // since the fabric started
  Duration until{};  // back up at this time; Duration{INT64_MAX}: for good
};

// Sets every path named in `outages` down while one of its outages lasts at `since_start`
// and up otherwise (so outages of one path may follow or overlap each other).
void apply_outages(Fabric& fabric, const std::vector<PathOutage>& outages, Duration since_start);

class FabricRelay {
 public:
  // A host idle this long may go to a new address once every host is taken.
  static constexpr Duration kDefaultHostIdle = Duration::seconds(1);

  explicit FabricRelay(const FabricConfig& config, Duration host_idle = kDefaultHostIdle);

  // Whether a destination not seen before may be given a host. Without a check any
  // address may; the daemon allows only this host's own addresses, so that a datagram
  // naming another machine cannot make it send there (a reflector). Sources need no
  // check: they are where datagrams really came from.
  using DestinationCheck = std::function<bool(const dp::NetAddr&)>;
  void check_new_destinations(DestinationCheck check) { check_ = std::move(check); }

  // A datagram from `from` at `now`. False (counted in stats()) when it is dropped at
  // the door: malformed, too large, no host left for its source or destination, a new
  // destination the check refuses, or no buffer. A packet that enters may still be lost,
  // trimmed, ... by the fabric.
  bool take(std::span<const uint8_t> datagram, const dp::NetAddr& from, Time now);

  // A packet leaving the fabric: send `header` then the packet's bytes to `to`, then
  // hand it back with release().
  struct Outgoing {
    dp::NetAddr to;
    std::array<uint8_t, dp::kRelayHeaderBytes> header;
    dp::PacketBuf* packet;
  };
  // Moves the fabric to `now` and fills `out` with packets delivered by then; returns
  // how many. Call until it returns less than out.size() (until then no idle host is
  // reclaimed: one of its packets may still wait in a ring).
  size_t collect(Time now, std::span<Outgoing> out);
  void release(std::span<Outgoing> sent);

  // When the fabric next has something to do (Time{INT64_MAX} when idle).
  Time next_event() const { return fabric_.next_event(); }
  Fabric& fabric() { return fabric_; }
  const Fabric& fabric() const { return fabric_; }
  const RelayStats& stats() const { return stats_; }
  uint32_t hosts_in_use() const { return static_cast<uint32_t>(addresses_.size()); }
  const dp::NetAddr& address_of(uint32_t host) const { return addresses_[host]; }

 private:
  struct AddrHash {
    size_t operator()(const dp::NetAddr& a) const { return a.hash(); }
  };
  // The host of `a` at `now`, given out now if new; false when every host is taken and
  // none is reclaimable.
  bool host_of(const dp::NetAddr& a, Time now, uint32_t& host);
  // Whether `host` may go to a new address at `now`: idle for host_idle_, and its last
  // packet (sent or sent to it at last_active_) delivered or lost by a time at which
  // collect() then emptied every ring.
  bool reclaimable(uint32_t host, Time now) const;

  Fabric fabric_;
  std::vector<dp::NetAddr> addresses_;  // by host
  std::vector<Time> last_active_;       // by host: its last datagram, sent or sent to it
  Duration host_idle_;
  // The latest time up to which every packet that had entered was delivered into a
  // ring (or lost) and every ring was then emptied by collect(); Time{-1}: none yet.
  Time drained_until_{-1};
  // Set up before any packet flows (a host's first datagram), never on the per-packet
  // path after that.
  std::unordered_map<dp::NetAddr, uint32_t, AddrHash> hosts_;
  uint32_t next_host_to_drain_ = 0;  // collect() takes hosts in turn, fairly
  DestinationCheck check_;
  RelayStats stats_;
};

}  // namespace spray::sim
