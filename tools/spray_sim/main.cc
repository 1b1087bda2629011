// spray-sim: runs the real transport (PDS, congestion control, path selection) on a
// simulated data-centre fabric and reports flow completion times against the ideal.
//
//   spray-sim --topology fat_tree --k 8 --traffic permutation --paths ecmp,oblivious,reps
//   spray-sim --scenario incast.json --csv flows.csv --json summary.json
//
// Options override the scenario file. --paths and --cc take comma lists: every
// combination runs on the same topology, traffic and seed, one summary row each.
// Outputs: a table on stdout; --json: the summaries; --csv: one row per flow (source,
// destination, size, start, completion time, ideal time); --svg PREFIX: PREFIX-fct.svg
// (CDF of FCT / ideal per run), PREFIX-queue.svg (depth of the watched port over time;
// --watch-port, default the link into the first flow's destination) and
// PREFIX-goodput.svg; --progress: flows done as the run goes (on by default on a
// terminal).
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "nic_sim/des/scenario.h"
#include "nic_sim/des/svg_plot.h"

using namespace spray;
using namespace spray::des;

int main(int argc, char** argv) {
  CLI::App app{"Simulate the Spray transport on a data-centre fabric"};
  std::string scenario_path, csv_path, json_path, svg_prefix;
  std::vector<uint32_t> watch_ports;
  std::vector<std::string> paths_list, cc_list;
  bool progress = isatty(STDERR_FILENO) != 0;
  app.add_option("--scenario", scenario_path, "JSON scenario file (see nic_sim/des/scenario.h)");
  // Every option below is optional and overrides the scenario.
  std::optional<std::string> kind, pattern;
  std::optional<uint32_t> k, tiers, oversub, hosts, per_leaf, spines, mtu, buffer_kb, ecn_min_kb,
      ecn_max_kb, entropies, reps_cache, max_pdcs, incast_senders, pairs;
  std::optional<double> gbps, fabric_gbps, delay_ns, limit_ms;
  std::optional<uint64_t> flow_bytes, seed;
  bool no_trim = false;
  std::vector<std::string> failures;
  app.add_option("--topology", kind, "fat_tree | leaf_spine | dumbbell");
  app.add_option("--k", k, "fat_tree switch radix (even)");
  app.add_option("--tiers", tiers, "fat_tree tiers: 2 or 3");
  app.add_option("--oversubscription", oversub, "fat_tree hosts per edge = this x k/2");
  app.add_option("--hosts", hosts, "leaf_spine and dumbbell hosts");
  app.add_option("--hosts-per-leaf", per_leaf, "leaf_spine");
  app.add_option("--spines", spines, "leaf_spine");
  app.add_option("--gbps", gbps, "host link rate (Gbit/s)");
  app.add_option("--fabric-gbps", fabric_gbps, "switch-to-switch link rate (Gbit/s)");
  app.add_option("--link-delay-ns", delay_ns, "propagation delay of every link");
  app.add_option("--mtu", mtu, "wire bytes of a full packet");
  app.add_option("--buffer-kb", buffer_kb, "switch buffer per output port");
  app.add_option("--ecn-min-kb", ecn_min_kb, "queue depth where ECN marking starts");
  app.add_option("--ecn-max-kb", ecn_max_kb, "queue depth where every packet is marked");
  app.add_flag("--no-trim", no_trim, "drop instead of trimming when a queue is full");
  app.add_option("--paths", paths_list,
                 "path selection: ecmp, ecmp_repath, oblivious, reps, bitmap (comma list)")
      ->delimiter(',');
  app.add_option("--cc", cc_list, "congestion control: nscc, fixed (comma list)")->delimiter(',');
  app.add_option("--entropies", entropies, "entropy values per flow");
  app.add_option("--reps-cache", reps_cache, "REPS: good entropy values recycled, 1..32 (UET: 8)");
  app.add_option("--max-pdcs", max_pdcs,
                 "PDC table per host (default 1024); fewer than a host's peers: idle PDCs "
                 "are closed for room")
      ->check(CLI::Range(1u, 65535u));
  app.add_option("--traffic", pattern,
                 "permutation | incast | all_to_all | random_pairs | ring_allreduce | "
                 "all_to_all_steps");
  app.add_option("--flow-bytes", flow_bytes, "bytes per flow");
  app.add_option("--incast-senders", incast_senders, "incast: senders to host 0");
  app.add_option("--pairs", pairs, "random_pairs: flows");
  app.add_option("--fail", failures,
                 "AT_US:TIER:LINKS:RATE[:UNTIL_US], e.g. 50:2:1:0 (one core link down at 50 us), "
                 "0:2:8:0.1 (8 core links at 10 %) or 50:2:1:0:150 (down from 50 to 150 us)");
  app.add_option("--seed", seed, "random seed (traffic, ECMP salt, ECN, PSNs)");
  app.add_option("--limit-ms", limit_ms, "virtual time limit");
  app.add_option("--csv", csv_path, "per-flow results");
  app.add_option("--json", json_path, "summaries");
  app.add_option("--svg", svg_prefix, "write PREFIX-fct.svg, PREFIX-queue.svg, PREFIX-goodput.svg");
  app.add_option("--watch-port", watch_ports, "ports whose queue depth --svg plots");
  app.add_flag("--progress,!--no-progress", progress, "show flows done while running");
  CLI11_PARSE(app, argc, argv);

  try {
    Scenario s;
    if (!scenario_path.empty()) {
      std::ifstream in(scenario_path);
      if (!in) throw std::invalid_argument("cannot read " + scenario_path);
      std::stringstream text;
      text << in.rdbuf();
      s = Scenario::from_json(text.str());
    }
    if (kind) s.topology.kind = *kind;
    if (k) s.topology.k = *k;
    if (tiers) s.topology.tiers = *tiers;
    if (oversub) s.topology.oversubscription = *oversub;
    if (hosts) s.topology.hosts = *hosts;
    if (per_leaf) s.topology.hosts_per_leaf = *per_leaf;
    if (spines) s.topology.spines = *spines;
    if (gbps) s.topology.host_gbps = *gbps;
    if (fabric_gbps) s.topology.fabric_gbps = *fabric_gbps;
    if (delay_ns)
      s.topology.link_delay = Duration::picoseconds(static_cast<int64_t>(*delay_ns * 1e3));
    if (mtu) s.network.mtu_bytes = *mtu;
    if (buffer_kb) s.network.switches.buffer_bytes = *buffer_kb * 1024;
    if (ecn_min_kb) s.network.switches.ecn_min_bytes = *ecn_min_kb * 1024;
    if (ecn_max_kb) s.network.switches.ecn_max_bytes = *ecn_max_kb * 1024;
    if (no_trim) s.network.switches.trimming = false;
    if (entropies) s.network.pds.entropy_count = static_cast<uint16_t>(*entropies);
    if (reps_cache) s.network.pds.reps_cache = static_cast<uint16_t>(*reps_cache);
    if (max_pdcs) s.network.pds.max_pdcs = *max_pdcs;
    if (pattern) s.traffic.pattern = *pattern;
    if (flow_bytes) s.traffic.flow_bytes = *flow_bytes;
    if (incast_senders) {
      s.traffic.incast_senders = *incast_senders;
      if (!pattern) s.traffic.pattern = "incast";
    }
    if (pairs) s.traffic.pairs = *pairs;
    if (seed) s.network.seed = *seed;
    if (limit_ms) s.limit = Duration::picoseconds(static_cast<int64_t>(*limit_ms * 1e9));
    for (const std::string& f : failures) {
      FailureSpec spec;
      double at_us = 0, until_us = 0;
      unsigned tier = 0;
      const int fields = std::sscanf(f.c_str(), "%lf:%u:%u:%lf:%lf", &at_us, &tier, &spec.links,
                                     &spec.rate, &until_us);
      if (fields < 4 || (fields == 5 && until_us <= at_us)) {
        throw std::invalid_argument("--fail wants AT_US:TIER:LINKS:RATE[:UNTIL_US], got " + f);
      }
      spec.at = Duration::picoseconds(static_cast<int64_t>(at_us * 1e6));
      if (fields == 5) spec.until = Duration::picoseconds(static_cast<int64_t>(until_us * 1e6));
      spec.tier = static_cast<uint8_t>(tier);
      s.failures.push_back(spec);
    }
    if (paths_list.empty()) paths_list.push_back(s.network.pds.path_name);
    if (cc_list.empty()) cc_list.push_back(s.network.pds.cc_name);

    std::ofstream csv;
    if (!csv_path.empty()) {
      csv.open(csv_path);
      csv << "paths,cc,source,destination,size_bytes,start_us,fct_us,ideal_us,completed\n";
    }
    std::string summaries = "[";
    bool header = false;
    std::vector<PlotSeries> fct_cdf, queue_depth, goodput;
    if (!svg_prefix.empty() && watch_ports.empty()) {  // the first flow's receiving link
      const Topology topo(s.topology);
      const auto flows = make_traffic(s.traffic, topo.hosts(), s.network.seed);
      watch_ports.push_back(topo.host_downlink(flows.empty() ? 0 : flows[0].dst));
    }
    for (const std::string& cc : cc_list) {
      for (const std::string& paths : paths_list) {
        Scenario run = s;
        run.network.pds.path_name = paths;
        run.network.pds.cc_name = cc;
        auto show = [&](uint32_t done, uint32_t total, Time now) {
          fmt::print(stderr, "\r{:>10} {:>6}: {}/{} flows, {:.1f} us virtual ", paths, cc, done,
                     total, static_cast<double>(now.ps) * 1e-6);
        };
        const RunResult r =
            progress ? run_scenario(run, show, watch_ports) : run_scenario(run, {}, watch_ports);
        const std::string label = cc_list.size() > 1 ? paths + "/" + cc : paths;
        PlotSeries cdf{label, {}};
        std::vector<double> slow;
        for (const FlowResult& f : r.flows) {
          if (f.completed)
            slow.push_back(static_cast<double>(f.fct.ps) / static_cast<double>(f.ideal.ps));
        }
        std::sort(slow.begin(), slow.end());
        for (size_t i = 0; i < slow.size(); ++i) {
          cdf.points.emplace_back(slow[i],
                                  static_cast<double>(i + 1) / static_cast<double>(slow.size()));
        }
        fct_cdf.push_back(std::move(cdf));
        for (uint32_t port : watch_ports) {
          PlotSeries q{fmt::format("{} port {}", label, port), {}};
          for (const auto& sample : r.queue_samples) {
            if (sample.port == port) {
              q.points.emplace_back(static_cast<double>(sample.at.ps) * 1e-6,
                                    sample.bytes / 1024.0);
            }
          }
          queue_depth.push_back(std::move(q));
        }
        goodput.push_back({label, r.goodput_over_time});
        if (progress) fmt::print(stderr, "\n");
        const Summary& m = r.summary;
        if (!header) {
          fmt::print("# {}; {} traffic, {} B per flow, MTU {}, {} entropies, seed {}\n", m.topology,
                     s.traffic.pattern, s.traffic.flow_bytes, s.network.mtu_bytes,
                     s.network.pds.entropy_count, s.network.seed);
          fmt::print("# FCT / ideal (ideal: size with headers at line rate + unloaded latency)\n");
          fmt::print(
              "# {:>10} {:>6} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8} {:>9} {:>9} {:>8} {:>10} {:>9}\n",
              "paths", "cc", "done", "mean", "p50", "p99", "max", "goodput", "trims", "drops",
              "rtx", "events/s", "wall(s)");
          header = true;
        }
        fmt::print(
            "  {:>10} {:>6} {:>9} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.3f} {:>9} {:>9} "
            "{:>8} {:>10.3g} {:>9.2f}{}\n",
            paths, cc, fmt::format("{}/{}", m.completed, m.flows), m.mean_slowdown, m.p50_slowdown,
            m.p99_slowdown, m.max_slowdown, m.goodput_fraction, m.stats.trimmed,
            m.stats.dropped_full + m.stats.dropped_link_down, m.stats.retransmits,
            m.events_per_second, m.wall_seconds,
            m.dead_path_use ? fmt::format("  dead path used {:.1f} us after failure",
                                          m.dead_path_use->as_microseconds())
                            : "");
        std::fflush(stdout);
        if (csv.is_open()) {
          for (const FlowResult& f : r.flows) {
            csv << fmt::format("{},{},{},{},{},{:.3f},{:.3f},{:.3f},{}\n", paths, cc, f.src, f.dst,
                               f.bytes, f.start.as_microseconds(), f.fct.as_microseconds(),
                               f.ideal.as_microseconds(), f.completed ? 1 : 0);
          }
        }
        summaries += (summaries.size() > 1 ? ",\n" : "\n") + summary_json(m);
      }
    }
    if (!json_path.empty()) std::ofstream(json_path) << summaries << "\n]\n";
    if (!svg_prefix.empty()) {
      const std::string what =
          fmt::format("{} traffic on {}", s.traffic.pattern, Topology(s.topology).describe());
      std::ofstream(svg_prefix + "-fct.svg")
          << svg_line_plot("FCT CDF: " + what, "FCT / ideal", "fraction of flows", fct_cdf);
      std::ofstream(svg_prefix + "-queue.svg")
          << svg_line_plot("Queue depth: " + what, "time (us)", "queue (KiB)", queue_depth);
      std::ofstream(svg_prefix + "-goodput.svg") << svg_line_plot(
          "Goodput: " + what, "time (us)", "fraction of receivers' line rate", goodput);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "spray-sim: {}\n", e.what());
    return 2;
  }
}
