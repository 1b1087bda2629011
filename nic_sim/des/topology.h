// Topology: hosts and switches joined by one-directional links, built as up/down trees
// (fat-trees, leaf-spine, a dumbbell), with the routing every node needs.
//
// Numbering: hosts are nodes 0 .. hosts-1, switches follow. Every link runs one way and
// has one output port at its source node, so a port is named by its link's index. Each
// switch routes a packet down when the destination lies below it — the hosts below one
// down port are a contiguous range — and otherwise up, over every up port by ECMP on
// (source, destination, entropy value, switch). A host has one up port: its NIC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/base/time.h"

namespace spray::des {

struct Link {
  uint32_t from = 0;  // node
  uint32_t to = 0;    // node
  double gbps = 0;
  Duration propagation{};
  uint8_t tier = 0;  // 0: host-switch; 1: the next layer up; 2: the one above
};

// Hosts [first, last) are reached through `port`.
struct DownRoute {
  uint32_t first = 0;
  uint32_t last = 0;
  uint32_t port = 0;
};

struct Node {
  uint8_t level = 0;  // 0 host, 1 edge/leaf, 2 aggregation/spine, 3 core
  std::vector<uint32_t> up_ports;
  std::vector<DownRoute> down_routes;  // sorted by `first`
};

struct TopologyConfig {
  std::string kind = "fat_tree";  // fat_tree | leaf_spine | dumbbell
  uint32_t k = 4;                 // fat_tree: switch radix (even)
  uint32_t tiers = 3;             // fat_tree: 2 or 3
  // fat_tree: hosts per edge switch = oversubscription x k/2 (k/2 up ports).
  uint32_t oversubscription = 1;
  uint32_t hosts = 16;           // leaf_spine and dumbbell (hosts per side x 2)
  uint32_t hosts_per_leaf = 16;  // leaf_spine
  uint32_t spines = 4;           // leaf_spine
  double host_gbps = 400;
  double fabric_gbps = 400;  // switch-to-switch links (the dumbbell's bottleneck)
  Duration link_delay = Duration::nanoseconds(500);  // propagation of every link
};

class Topology {
 public:
  // Builds the topology; throws std::invalid_argument with a reason for bad parameters.
  explicit Topology(const TopologyConfig& config);

  uint32_t hosts() const { return hosts_; }
  uint32_t nodes() const { return static_cast<uint32_t>(nodes_.size()); }
  uint32_t switches() const { return nodes() - hosts_; }
  const Node& node(uint32_t n) const { return nodes_[n]; }
  const std::vector<Link>& links() const { return links_; }
  const Link& link(uint32_t port) const { return links_[port]; }
  const TopologyConfig& config() const { return cfg_; }
  std::string describe() const;

  // The output port `node` uses for a packet to `dst`; `hash` picks among up ports.
  uint32_t route(uint32_t node, uint32_t dst, uint64_t hash) const;
  // Equal-cost paths between two hosts (the product of the up-port choices).
  uint64_t path_count(uint32_t src, uint32_t dst) const;
  // Ports of the links between switch levels `tier` and `tier + 1` (tier 1: edge to
  // aggregation; tier 2: aggregation to core), in both directions.
  std::vector<uint32_t> links_in_tier(uint8_t tier) const;
  // Unloaded one-way latency of the path src -> dst for a packet of `bytes`
  // (store-and-forward: serialisation at every hop plus propagation).
  Duration unloaded_latency(uint32_t src, uint32_t dst, uint32_t bytes) const;
  // The port of the link from a host's switch down to the host.
  uint32_t host_downlink(uint32_t host) const { return nodes_[host].up_ports[0] + 1; }
  // The host link rate (what a flow can reach at best).
  double host_gbps() const { return cfg_.host_gbps; }

 private:
  uint32_t add_switch(uint8_t level);
  // A link each way between a lower and an upper node; returns the up link's port.
  uint32_t connect(uint32_t lower, uint32_t upper, double gbps, uint8_t tier);
  void build_fat_tree();
  void build_leaf_spine();
  void build_dumbbell();
  const DownRoute* down_route(uint32_t node, uint32_t dst) const;

  TopologyConfig cfg_;
  uint32_t hosts_ = 0;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
};

}  // namespace spray::des
