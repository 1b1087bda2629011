#include "nic_sim/des/traffic.h"

#include <stdexcept>

#include <fmt/format.h>

#include "transport/base/rng.h"

namespace spray::des {
namespace {

Flow flow(uint32_t src, uint32_t dst, uint64_t bytes) {
  Flow f;
  f.src = src;
  f.dst = dst;
  f.bytes = bytes;
  return f;
}

// Flow `later` starts once flow `earlier` has arrived.
void after(std::vector<Flow>& flows, size_t earlier, size_t later) {
  flows[earlier].dependents.push_back(static_cast<uint32_t>(later));
  ++flows[later].waits_for;
}

}  // namespace

std::vector<Flow> make_traffic(const TrafficConfig& c, uint32_t hosts, uint64_t seed) {
  if (hosts < 2) throw std::invalid_argument("traffic needs at least 2 hosts");
  Rng rng(seed);
  std::vector<Flow> flows;
  if (c.pattern == "permutation") {
    // Sattolo's shuffle: a single cycle, so no host sends to itself.
    std::vector<uint32_t> to(hosts);
    for (uint32_t i = 0; i < hosts; ++i) to[i] = i;
    for (uint32_t i = hosts - 1; i > 0; --i) std::swap(to[i], to[rng.below(i)]);
    for (uint32_t i = 0; i < hosts; ++i) flows.push_back(flow(i, to[i], c.flow_bytes));
  } else if (c.pattern == "incast") {
    if (c.incast_target >= hosts || c.incast_senders == 0 || c.incast_senders >= hosts) {
      throw std::invalid_argument(
          fmt::format("incast: {} senders to host {} need more than {} hosts", c.incast_senders,
                      c.incast_target, hosts));
    }
    for (uint32_t h = 0, n = 0; n < c.incast_senders; ++h) {
      if (h == c.incast_target) continue;
      flows.push_back(flow(h, c.incast_target, c.flow_bytes));
      ++n;
    }
  } else if (c.pattern == "all_to_all") {
    for (uint32_t s = 0; s < hosts; ++s) {
      for (uint32_t d = 0; d < hosts; ++d) {
        if (s != d) flows.push_back(flow(s, d, c.flow_bytes));
      }
    }
  } else if (c.pattern == "random_pairs") {
    const uint32_t n = c.pairs ? c.pairs : hosts;
    for (uint32_t i = 0; i < n; ++i) {
      const auto s = static_cast<uint32_t>(rng.below(hosts));
      auto d = static_cast<uint32_t>(rng.below(hosts - 1));
      if (d >= s) ++d;
      flows.push_back(flow(s, d, c.flow_bytes));
    }
  } else if (c.pattern == "ring_allreduce") {
    // Step s: host i sends a chunk to i + 1; it forwards what it got from i - 1 in s - 1.
    const uint64_t chunk = std::max<uint64_t>(1, c.flow_bytes / hosts);
    const uint32_t steps = 2 * (hosts - 1);
    for (uint32_t s = 0; s < steps; ++s) {
      for (uint32_t i = 0; i < hosts; ++i) {
        flows.push_back(flow(i, (i + 1) % hosts, chunk));
        if (s > 0) after(flows, size_t{s - 1} * hosts + (i + hosts - 1) % hosts, flows.size() - 1);
      }
    }
  } else if (c.pattern == "all_to_all_steps") {
    // Step s (1..P-1): host i sends to i + s once the data of step s - 1 reached it.
    for (uint32_t s = 1; s < hosts; ++s) {
      for (uint32_t i = 0; i < hosts; ++i) {
        flows.push_back(flow(i, (i + s) % hosts, c.flow_bytes));
        if (s > 1) {
          const uint32_t sender_to_me = (i + hosts - (s - 1)) % hosts;
          after(flows, size_t{s - 2} * hosts + sender_to_me, flows.size() - 1);
        }
      }
    }
  } else {
    throw std::invalid_argument(
        fmt::format("unknown traffic pattern '{}' (permutation, incast, all_to_all, random_pairs, "
                    "ring_allreduce, all_to_all_steps)",
                    c.pattern));
  }
  return flows;
}

}  // namespace spray::des
