// Traffic patterns for the simulator: which flows run, between whom, how large, and
// which wait for which (collectives proceed in steps: a step starts when the data of
// the previous one has arrived).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nic_sim/des/network.h"

namespace spray::des {

struct TrafficConfig {
  // permutation: every host sends to one other, every host receives from one (a random
  //   derangement); incast: `incast_senders` hosts send to host `incast_target`;
  //   all_to_all: every host to every other at once; random_pairs: `pairs` flows
  //   between random distinct hosts; ring_allreduce: 2(P-1) steps of a ring, each
  //   flow_bytes / P; all_to_all_steps: P-1 steps, host i to i+s in step s.
  std::string pattern = "permutation";
  uint64_t flow_bytes = 2 << 20;  // per flow (ring_allreduce: the whole buffer)
  uint32_t incast_senders = 15;
  uint32_t incast_target = 0;
  uint32_t pairs = 0;  // random_pairs; 0: as many as hosts
};

// Throws std::invalid_argument naming the problem (unknown pattern, too few hosts).
std::vector<Flow> make_traffic(const TrafficConfig& config, uint32_t hosts, uint64_t seed);

}  // namespace spray::des
