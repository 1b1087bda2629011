#include "nic_sim/des/scenario.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "transport/base/rng.h"

namespace spray::des {
namespace {

using nlohmann::json;

// Reads `key` of `j` into `out` if present; a wrong type is an error naming the key.
template <typename T>
void read(const json& j, const char* key, T& out) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(fmt::format("scenario: '{}' has the wrong type", key));
  }
}

// Reads `key`, in KiB, into a byte count if present.
void read_kib(const json& j, const char* key, uint32_t& bytes) {
  uint32_t kib = bytes / 1024;
  read(j, key, kib);
  bytes = kib * 1024;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

Scenario Scenario::from_json(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::invalid_argument("scenario: not a JSON object");
  Scenario s;
  if (const auto t = j.find("topology"); t != j.end()) {
    read(*t, "kind", s.topology.kind);
    read(*t, "k", s.topology.k);
    read(*t, "tiers", s.topology.tiers);
    read(*t, "oversubscription", s.topology.oversubscription);
    read(*t, "hosts", s.topology.hosts);
    read(*t, "hosts_per_leaf", s.topology.hosts_per_leaf);
    read(*t, "spines", s.topology.spines);
    read(*t, "host_gbps", s.topology.host_gbps);
    read(*t, "fabric_gbps", s.topology.fabric_gbps);
    int64_t delay_ns = s.topology.link_delay.ps / 1000;
    read(*t, "link_delay_ns", delay_ns);
    s.topology.link_delay = Duration::nanoseconds(delay_ns);
  }
  if (const auto w = j.find("switch"); w != j.end()) {
    read_kib(*w, "buffer_kb", s.network.switches.buffer_bytes);
    read_kib(*w, "ecn_min_kb", s.network.switches.ecn_min_bytes);
    read_kib(*w, "ecn_max_kb", s.network.switches.ecn_max_bytes);
    read(*w, "trimming", s.network.switches.trimming);
  }
  read(j, "mtu", s.network.mtu_bytes);
  read(j, "cc", s.network.pds.cc_name);
  read(j, "paths", s.network.pds.path_name);
  read(j, "entropies", s.network.pds.entropy_count);
  read(j, "reps_cache", s.network.pds.reps_cache);
  read(j, "max_pdcs", s.network.pds.max_pdcs);
  if (s.network.pds.max_pdcs == 0 || s.network.pds.max_pdcs > 65535) {
    throw std::invalid_argument("scenario: max_pdcs must be 1..65535");
  }
  read(j, "seed", s.network.seed);
  if (const auto r = j.find("recovery"); r != j.end()) {
    read(*r, "reorder_window_rtts", s.network.reorder_window_rtts);
    read(*r, "min_rto_rtts", s.network.min_rto_rtts);
    if (s.network.reorder_window_rtts < 0 || s.network.min_rto_rtts <= 0) {
      throw std::invalid_argument("scenario: recovery times must be positive");
    }
  }
  if (const auto t = j.find("traffic"); t != j.end()) {
    read(*t, "pattern", s.traffic.pattern);
    read(*t, "flow_bytes", s.traffic.flow_bytes);
    read(*t, "incast_senders", s.traffic.incast_senders);
    read(*t, "incast_target", s.traffic.incast_target);
    read(*t, "pairs", s.traffic.pairs);
  }
  if (const auto f = j.find("failures"); f != j.end()) {
    if (!f->is_array()) throw std::invalid_argument("scenario: 'failures' must be an array");
    for (const json& item : *f) {
      FailureSpec spec;
      double at_us = 0;
      read(item, "at_us", at_us);
      spec.at = Duration::picoseconds(static_cast<int64_t>(at_us * 1e6));
      read(item, "tier", spec.tier);
      read(item, "links", spec.links);
      read(item, "rate", spec.rate);
      if (spec.rate < 0 || spec.rate > 1) throw std::invalid_argument("scenario: rate in [0, 1]");
      if (item.contains("until_us")) {
        double until_us = 0;
        read(item, "until_us", until_us);
        if (until_us <= at_us) throw std::invalid_argument("scenario: until_us after at_us");
        spec.until = Duration::picoseconds(static_cast<int64_t>(until_us * 1e6));
      }
      s.failures.push_back(spec);
    }
  }
  double limit_ms = s.limit.as_seconds() * 1e3;
  read(j, "limit_ms", limit_ms);
  s.limit = Duration::picoseconds(static_cast<int64_t>(limit_ms * 1e9));
  return s;
}

RunResult run_scenario(const Scenario& s,
                       const std::function<void(uint32_t, uint32_t, Time)>& progress,
                       const std::vector<uint32_t>& watch_ports) {
  const auto wall_start = std::chrono::steady_clock::now();
  const Topology topo(s.topology);
  Network net(topo, s.network, make_traffic(s.traffic, topo.hosts(), s.network.seed));
  for (uint32_t port : watch_ports) {
    if (port >= topo.links().size()) {
      throw std::invalid_argument(
          fmt::format("no port {} (the topology has {} links)", port, topo.links().size()));
    }
    net.watch_port(port, Duration::microseconds(1));
  }

  // Failures: cables (both directions) of a tier, in a seeded order per tier.
  std::vector<uint32_t> failed_ports;
  Time first_failure{INT64_MAX};
  for (const FailureSpec& f : s.failures) {
    std::vector<uint32_t> ports = topo.links_in_tier(f.tier);
    if (ports.empty() || f.links * 2 > ports.size()) {
      throw std::invalid_argument(fmt::format("failure: tier {} has {} links, {} asked for", f.tier,
                                              ports.size() / 2, f.links));
    }
    std::vector<uint32_t> cables;
    for (size_t i = 0; i < ports.size(); i += 2) cables.push_back(ports[i]);
    Rng pick(s.network.seed ^ 0xfa11);  // a fresh one per failure: the same cables first
    for (size_t i = cables.size() - 1; i > 0; --i) std::swap(cables[i], cables[pick.below(i + 1)]);
    for (uint32_t c = 0; c < f.links; ++c) {
      for (uint32_t port : {cables[c], cables[c] + 1}) {
        net.schedule({Time{} + f.at, port, f.rate});
        if (f.until) net.schedule({Time{} + *f.until, port, 1.0});
        if (f.rate == 0 && !f.until) failed_ports.push_back(port);
      }
    }
    if (f.rate == 0 && !f.until) first_failure = std::min(first_failure, Time{} + f.at);
  }

  const Time end = Time{} + s.limit;
  const Duration slice = Duration::microseconds(200);
  while (net.now() < end) {
    const bool done = net.run(std::min(slice, end - net.now()));
    if (progress) {
      uint32_t finished = 0;
      for (const Flow& f : net.flows()) finished += f.done ? 1 : 0;
      progress(finished, static_cast<uint32_t>(net.flows().size()), net.now());
    }
    if (done || net.idle()) break;
  }

  RunResult r;
  Summary& m = r.summary;
  m.paths = s.network.pds.path_name;
  m.cc = s.network.pds.cc_name;
  m.topology = topo.describe();
  m.flows = static_cast<uint32_t>(net.flows().size());
  std::vector<double> slowdowns;
  double goodput = 0;
  for (const Flow& f : net.flows()) {
    const Duration ideal = net.ideal_fct(f);
    const bool completed = f.done && f.received >= f.bytes;
    const Duration fct = completed ? f.finished - f.started : Duration{};
    r.flows.push_back({f.src, f.dst, f.bytes, f.started - Time{}, fct, ideal, completed});
    if (!completed) continue;
    ++m.completed;
    slowdowns.push_back(static_cast<double>(fct.ps) /
                        static_cast<double>(std::max<int64_t>(1, ideal.ps)));
    goodput += static_cast<double>(f.bytes) * 8 / (static_cast<double>(fct.ps) * 1e-3) /
               topo.host_gbps();  // bits per ps x 1e3 = Gbit/s
    m.makespan = std::max(m.makespan, f.finished - Time{});
  }
  if (!slowdowns.empty()) {
    double sum = 0;
    for (double v : slowdowns) sum += v;
    m.mean_slowdown = sum / static_cast<double>(slowdowns.size());
    m.p50_slowdown = percentile(slowdowns, 0.5);
    m.p99_slowdown = percentile(slowdowns, 0.99);
    m.max_slowdown = *std::max_element(slowdowns.begin(), slowdowns.end());
    m.min_slowdown = *std::min_element(slowdowns.begin(), slowdowns.end());
    m.goodput_fraction = goodput / static_cast<double>(slowdowns.size());
  }
  m.stats = net.stats();
  if (!failed_ports.empty()) {
    Duration use{};
    for (uint32_t port : failed_ports) {
      if (net.last_use(port) >= first_failure)
        use = std::max(use, net.last_use(port) - first_failure);
    }
    m.dead_path_use = use;
  }
  m.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  m.events_per_second = static_cast<double>(m.stats.events) / std::max(1e-9, m.wall_seconds);
  m.model_memory_bytes = net.memory_bytes();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  m.peak_rss_bytes = static_cast<size_t>(ru.ru_maxrss) * 1024;
  r.queue_samples = net.queue_samples();
  std::vector<bool> receives(topo.hosts());
  for (const Flow& f : net.flows()) receives[f.dst] = true;
  const auto receivers = static_cast<double>(std::count(receives.begin(), receives.end(), true));
  const Duration bin = s.network.goodput_bin;
  for (size_t i = 0; i < net.delivered_per_bin().size(); ++i) {
    const double gbps =
        static_cast<double>(net.delivered_per_bin()[i]) * 8 / (static_cast<double>(bin.ps) * 1e-3);
    r.goodput_over_time.emplace_back(bin.as_microseconds() * (static_cast<double>(i) + 0.5),
                                     gbps / (receivers * topo.host_gbps()));
  }
  return r;
}

std::string summary_json(const Summary& m) {
  json j{{"topology", m.topology},
         {"paths", m.paths},
         {"cc", m.cc},
         {"flows", m.flows},
         {"completed", m.completed},
         {"fct_over_ideal",
          {{"mean", m.mean_slowdown},
           {"p50", m.p50_slowdown},
           {"p99", m.p99_slowdown},
           {"max", m.max_slowdown},
           {"min", m.min_slowdown}}},
         {"ideal_fct_definition",
          "flow size with headers at the host line rate, plus the unloaded store-and-forward "
          "latency of one full packet over the rest of its path"},
         {"goodput_fraction_of_line_rate", m.goodput_fraction},
         {"makespan_us", m.makespan.as_microseconds()},
         {"packets_sent", m.stats.packets_sent},
         {"dropped", m.stats.dropped_full + m.stats.dropped_link_down},
         {"dropped_link_down", m.stats.dropped_link_down},
         {"trimmed", m.stats.trimmed},
         {"ecn_marked", m.stats.ecn_marked},
         {"retransmissions", m.stats.retransmits},
         {"timeouts", m.stats.timeouts},
         {"failed_flows", m.stats.failed_flows},
         {"ses_messages_received", m.stats.messages_received},
         {"ses_refused_packets", m.stats.refused_packets},
         {"ses_malformed_packets", m.stats.malformed_packets},
         {"max_queue_bytes", m.stats.max_queue_bytes},
         {"events", m.stats.events},
         {"events_per_second", m.events_per_second},
         {"wall_seconds", m.wall_seconds},
         {"model_memory_bytes", m.model_memory_bytes},
         {"peak_rss_bytes", m.peak_rss_bytes}};
  if (m.dead_path_use) j["dead_path_use_us"] = m.dead_path_use->as_microseconds();
  return j.dump(2);
}

}  // namespace spray::des
