// Scenario: everything one simulation run needs (topology, switches, transport
// algorithms, traffic, failures, seed), read from JSON or set by spray-sim's options,
// and the results of running it: per-flow completion times and a summary.
//
// JSON keys (all optional; defaults as in the structs):
//   {"topology": {"kind": "fat_tree", "k": 16, "tiers": 3, "oversubscription": 1,
//                 "hosts": 16, "hosts_per_leaf": 16, "spines": 4,
//                 "host_gbps": 400, "fabric_gbps": 400, "link_delay_ns": 500},
//    "switch": {"buffer_kb": 512, "ecn_min_kb": 64, "ecn_max_kb": 256, "trimming": true},
//    "mtu": 4096, "cc": "nscc", "paths": "reps", "entropies": 64, "reps_cache": 32,
//    "max_pdcs": 1024,
//    "recovery": {"reorder_window_rtts": 1.25, "min_rto_rtts": 8},
//    "traffic": {"pattern": "permutation", "flow_bytes": 2097152, "incast_senders": 15,
//                "incast_target": 0, "pairs": 0},
//    "failures": [{"at_us": 50, "tier": 2, "links": 1, "rate": 0, "until_us": 150}],
//    "seed": 1, "limit_ms": 100}
// A failure changes `links` links of switch tier `tier` (1: edge-aggregation or
// leaf-spine; 2: aggregation-core), both directions, to `rate` of their speed
// (0: down) at `at_us`, and back to full rate at `until_us` if given (recovery);
// "links" picks the first ones of the tier in a seeded order, the same order for every
// failure of that tier. A failure that recovers is left out of "dead path used".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nic_sim/des/network.h"
#include "nic_sim/des/topology.h"
#include "nic_sim/des/traffic.h"

namespace spray::des {

struct FailureSpec {
  Duration at{};
  uint8_t tier = 2;
  uint32_t links = 1;
  double rate = 0;
  std::optional<Duration> until;  // recovery: the links are back at full rate then
};

struct Scenario {
  // 64 entropy values, as UET's own simulations use; a PDS window of 512 packets (2 MiB
  // at 4 KiB, ~8 bandwidth-delay products at 400 Gbit/s). 256 fit in less memory but a
  // packet stranded on a degraded link then stalls the sender on the PSN window before
  // RACK has resent it (k=16 fat-tree, 8 core links at 10 %: REPS p99 1.81x ideal with
  // 256, 1.34x with 512).
  Scenario() {
    network.pds.entropy_count = 64;
    network.pds.window_packets = 512;
  }

  TopologyConfig topology{};
  NetworkConfig network{};
  TrafficConfig traffic{};
  std::vector<FailureSpec> failures;
  Duration limit = Duration::milliseconds(100);

  // Throws std::invalid_argument naming the bad key.
  static Scenario from_json(const std::string& text);
};

struct FlowResult {
  uint32_t src, dst;
  uint64_t bytes;
  Duration start, fct, ideal;
  bool completed;
};

struct Summary {
  std::string paths, cc, topology;
  uint32_t flows = 0, completed = 0;
  double mean_slowdown = 0, p50_slowdown = 0, p99_slowdown = 0, max_slowdown = 0;  // FCT/ideal
  double min_slowdown = 0;
  double goodput_fraction = 0;  // mean over flows of (bytes / FCT) / host line rate
  Duration makespan{};          // last completion
  NetworkStats stats{};
  // Failures: virtual time from the first failure to the last data packet sent into a
  // failed link (how long senders kept using the dead path); absent without failures.
  std::optional<Duration> dead_path_use;
  double wall_seconds = 0;
  double events_per_second = 0;
  size_t model_memory_bytes = 0;
  size_t peak_rss_bytes = 0;
};

struct RunResult {
  Summary summary;
  std::vector<FlowResult> flows;
  std::vector<Network::QueueSample> queue_samples;
  // (time in us, delivered goodput as a fraction of the receiving hosts' line rate) per
  // 10 us of virtual time.
  std::vector<std::pair<double, double>> goodput_over_time;
};

// Runs the scenario. `progress(done, total, now)` is called every few hundred
// microseconds of virtual time when given.
RunResult run_scenario(const Scenario& s,
                       const std::function<void(uint32_t, uint32_t, Time)>& progress = {},
                       const std::vector<uint32_t>& watch_ports = {});

std::string summary_json(const Summary& s);

}  // namespace spray::des
