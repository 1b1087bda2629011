#include "nic_sim/des/topology.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace spray::des {

Topology::Topology(const TopologyConfig& config) : cfg_(config) {
  if (cfg_.host_gbps <= 0 || cfg_.fabric_gbps <= 0) {
    throw std::invalid_argument("link rates must be positive");
  }
  if (cfg_.kind == "fat_tree") {
    build_fat_tree();
  } else if (cfg_.kind == "leaf_spine") {
    build_leaf_spine();
  } else if (cfg_.kind == "dumbbell") {
    build_dumbbell();
  } else {
    throw std::invalid_argument(
        fmt::format("unknown topology '{}' (fat_tree, leaf_spine, dumbbell)", cfg_.kind));
  }
}

uint32_t Topology::add_switch(uint8_t level) {
  Node n;
  n.level = level;
  nodes_.push_back(std::move(n));
  return static_cast<uint32_t>(nodes_.size() - 1);
}

uint32_t Topology::connect(uint32_t lower, uint32_t upper, double gbps, uint8_t tier) {
  const auto up = static_cast<uint32_t>(links_.size());
  links_.push_back(Link{lower, upper, gbps, cfg_.link_delay, tier});
  links_.push_back(Link{upper, lower, gbps, cfg_.link_delay, tier});
  nodes_[lower].up_ports.push_back(up);
  return up;
}

void Topology::build_fat_tree() {
  const uint32_t k = cfg_.k;
  if (k < 2 || k % 2 != 0) throw std::invalid_argument("fat_tree: k must be even and >= 2");
  if (cfg_.tiers != 2 && cfg_.tiers != 3) throw std::invalid_argument("fat_tree: tiers is 2 or 3");
  if (cfg_.oversubscription < 1) throw std::invalid_argument("fat_tree: oversubscription >= 1");
  const uint32_t half = k / 2, per_edge = half * cfg_.oversubscription;
  // Three tiers: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores. Two
  // tiers: k leaves under k/2 spines.
  const uint32_t pods = cfg_.tiers == 3 ? k : 1;
  const uint32_t edges_per_pod = cfg_.tiers == 3 ? half : k;
  hosts_ = pods * edges_per_pod * per_edge;
  nodes_.assign(hosts_, Node{});
  std::vector<uint32_t> edges, aggs, cores;
  for (uint32_t e = 0; e < pods * edges_per_pod; ++e) edges.push_back(add_switch(1));
  for (uint32_t a = 0; a < pods * half; ++a) aggs.push_back(add_switch(2));
  if (cfg_.tiers == 3) {
    for (uint32_t c = 0; c < half * half; ++c) cores.push_back(add_switch(3));
  }
  for (uint32_t e = 0; e < edges.size(); ++e) {
    for (uint32_t h = e * per_edge; h < (e + 1) * per_edge; ++h) {
      const uint32_t up = connect(h, edges[e], cfg_.host_gbps, 0);
      nodes_[edges[e]].down_routes.push_back({h, h + 1, up + 1});
    }
  }
  for (uint32_t p = 0; p < pods; ++p) {
    for (uint32_t e = p * edges_per_pod; e < (p + 1) * edges_per_pod; ++e) {
      for (uint32_t a = p * half; a < (p + 1) * half; ++a) {
        const uint32_t up = connect(edges[e], aggs[a], cfg_.fabric_gbps, 1);
        nodes_[aggs[a]].down_routes.push_back({e * per_edge, (e + 1) * per_edge, up + 1});
      }
    }
  }
  if (cfg_.tiers == 3) {
    const uint32_t pod_hosts = edges_per_pod * per_edge;
    for (uint32_t p = 0; p < pods; ++p) {
      for (uint32_t j = 0; j < half; ++j) {
        for (uint32_t i = 0; i < half; ++i) {
          const uint32_t core = cores[j * half + i];
          const uint32_t up = connect(aggs[p * half + j], core, cfg_.fabric_gbps, 2);
          nodes_[core].down_routes.push_back({p * pod_hosts, (p + 1) * pod_hosts, up + 1});
        }
      }
    }
  }
}

void Topology::build_leaf_spine() {
  if (cfg_.hosts_per_leaf == 0 || cfg_.hosts == 0 || cfg_.hosts % cfg_.hosts_per_leaf != 0 ||
      cfg_.spines == 0) {
    throw std::invalid_argument(
        "leaf_spine: hosts must be a positive multiple of hosts_per_leaf, spines >= 1");
  }
  hosts_ = cfg_.hosts;
  nodes_.assign(hosts_, Node{});
  const uint32_t leaves = hosts_ / cfg_.hosts_per_leaf;
  std::vector<uint32_t> leaf(leaves), spine(cfg_.spines);
  for (auto& l : leaf) l = add_switch(1);
  for (auto& s : spine) s = add_switch(2);
  for (uint32_t l = 0; l < leaves; ++l) {
    const uint32_t first = l * cfg_.hosts_per_leaf;
    for (uint32_t h = first; h < first + cfg_.hosts_per_leaf; ++h) {
      const uint32_t up = connect(h, leaf[l], cfg_.host_gbps, 0);
      nodes_[leaf[l]].down_routes.push_back({h, h + 1, up + 1});
    }
    for (uint32_t s : spine) {
      const uint32_t up = connect(leaf[l], s, cfg_.fabric_gbps, 1);
      nodes_[s].down_routes.push_back({first, first + cfg_.hosts_per_leaf, up + 1});
    }
  }
}

void Topology::build_dumbbell() {
  if (cfg_.hosts < 2 || cfg_.hosts % 2 != 0) {
    throw std::invalid_argument("dumbbell: hosts must be even and >= 2 (half on each side)");
  }
  hosts_ = cfg_.hosts;
  nodes_.assign(hosts_, Node{});
  const uint32_t left = add_switch(1), right = add_switch(1), side = hosts_ / 2;
  for (uint32_t h = 0; h < hosts_; ++h) {
    const uint32_t sw = h < side ? left : right;
    const uint32_t up = connect(h, sw, cfg_.host_gbps, 0);
    nodes_[sw].down_routes.push_back({h, h + 1, up + 1});
  }
  // The bottleneck: each switch reaches the other side through its one "up" port.
  const uint32_t across = connect(left, right, cfg_.fabric_gbps, 1);
  nodes_[right].up_ports.push_back(across + 1);
}

const DownRoute* Topology::down_route(uint32_t node, uint32_t dst) const {
  const auto& routes = nodes_[node].down_routes;
  auto it = std::upper_bound(routes.begin(), routes.end(), dst,
                             [](uint32_t d, const DownRoute& r) { return d < r.first; });
  if (it == routes.begin()) return nullptr;
  --it;
  return dst < it->last ? &*it : nullptr;
}

uint32_t Topology::route(uint32_t node, uint32_t dst, uint64_t hash) const {
  if (const DownRoute* r = down_route(node, dst)) return r->port;
  const auto& ups = nodes_[node].up_ports;
  return ups[hash % ups.size()];
}

uint64_t Topology::path_count(uint32_t src, uint32_t dst) const {
  // Walk down-first: a node routes down when it can, else fans out over its up ports.
  auto count = [&](auto& self, uint32_t node) -> uint64_t {
    if (node == dst) return 1;
    if (const DownRoute* r = down_route(node, dst)) return self(self, links_[r->port].to);
    uint64_t n = 0;
    for (uint32_t port : nodes_[node].up_ports) n += self(self, links_[port].to);
    return n;
  };
  return src == dst ? 0 : count(count, src);
}

std::vector<uint32_t> Topology::links_in_tier(uint8_t tier) const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < links_.size(); ++i) {
    if (links_[i].tier == tier) out.push_back(i);
  }
  return out;
}

Duration Topology::unloaded_latency(uint32_t src, uint32_t dst, uint32_t bytes) const {
  Duration total{};
  for (uint32_t node = src; node != dst;) {
    const Link& l = links_[route(node, dst, 0)];
    total += serialization_time(bytes, l.gbps) + l.propagation;
    node = l.to;
  }
  return total;
}

std::string Topology::describe() const {
  if (cfg_.kind == "fat_tree") {
    return fmt::format("{}-tier fat-tree k={} ({} hosts, {} switches, oversubscription {}:1)",
                       cfg_.tiers, cfg_.k, hosts_, switches(), cfg_.oversubscription);
  }
  if (cfg_.kind == "leaf_spine") {
    return fmt::format("leaf-spine: {} hosts, {} per leaf, {} spines", hosts_, cfg_.hosts_per_leaf,
                       cfg_.spines);
  }
  return fmt::format("dumbbell: {} hosts a side", hosts_ / 2);
}

}  // namespace spray::des
