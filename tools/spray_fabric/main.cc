// spray-fabric: a software switch fabric for real processes on one machine. Endpoints
// of the spray provider opened with FI_SPRAY_DATAPATH=fabric and FI_SPRAY_FABRIC=ADDR:PORT
// (and any FabricDatapath) send every packet through it; it carries them over the
// simulated fabric of nic_sim (host links, spine paths chosen by the entropy value,
// queues that mark ECN and trim when full) with seeded loss, duplication, corruption,
// reordering and trimming, and paths taken down on a schedule. What the kernel's own
// network cannot emulate here (no netem), CI gets from this.
//
//   spray-fabric --loss 0.02 --reorder 0.05 --trim 0.01 --seconds 120 &
//   FI_SPRAY_DATAPATH=fabric FI_SPRAY_FABRIC=127.0.0.1:4790 fi_pingpong -p spray ...
//
// Runs until SIGINT or SIGTERM, or --seconds; then prints what the fabric did (and
// writes it as JSON with --stats FILE). --port-file FILE receives "ADDR:PORT" once the
// socket is bound, for scripts that let the system pick the port (--port 0).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "nic_sim/fabric_daemon.h"

using namespace spray;

namespace {

std::atomic<bool> stop_requested{false};

void request_stop(int) {
  stop_requested.store(true);
}

// "PATH:FROM_MS" (down for good) or "PATH:FROM_MS:UNTIL_MS", nothing else.
bool parse_outage(const std::string& text, sim::PathOutage& out) {
  unsigned path = 0;
  double from = 0, until = -1;
  int used = -1;  // characters sscanf consumed: the whole text, or it is malformed
  const auto whole = [&] { return used == static_cast<int>(text.size()); };
  if (std::sscanf(text.c_str(), "%u:%lf:%lf%n", &path, &from, &until, &used) != 3 || !whole()) {
    until = -1;
    used = -1;
    if (std::sscanf(text.c_str(), "%u:%lf%n", &path, &from, &used) != 2 || !whole()) return false;
  }
  if (from < 0 || (until >= 0 && until <= from)) return false;
  out.path = path;
  out.from = Duration::microseconds(static_cast<int64_t>(from * 1000));
  out.until =
      until >= 0 ? Duration::microseconds(static_cast<int64_t>(until * 1000)) : Duration{INT64_MAX};
  return true;
}

nlohmann::json stats_json(const sim::FabricDaemon& d) {
  const sim::FabricStats& f = d.fabric_stats();
  const sim::RelayStats& r = d.relay().stats();
  nlohmann::json hosts = nlohmann::json::array();
  for (uint32_t h = 0; h < d.relay().hosts_in_use(); ++h) {
    hosts.push_back(d.relay().address_of(h).to_string());
  }
  return {
      {"datagrams_in", d.stats().datagrams_in},
      {"datagrams_out", d.stats().datagrams_out},
      {"send_failures", d.stats().send_failures},
      {"refused",
       {{"malformed", r.malformed},
        {"too_large", r.too_large},
        {"no_host_left", r.no_host_left},
        {"not_allowed", r.not_allowed},
        {"no_buffer", r.no_buffer}}},
      {"fabric",
       {{"injected", f.injected},
        {"delivered", f.delivered},
        {"lost", f.lost},
        {"duplicated", f.duplicated},
        {"corrupted_dropped", f.dropped_fcs},
        {"reordered", f.reordered},
        {"trimmed", f.trimmed},
        {"ecn_marked", f.ecn_marked},
        {"dropped_path_down", f.dropped_path_down},
        {"dropped_queue_full", f.dropped_queue_full},
        {"dropped_rx_ring", f.dropped_rx_ring},
        {"path_packets", f.path_packets}}},
      {"hosts", hosts},
      {"hosts_reclaimed", r.hosts_reclaimed},
  };
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A software switch fabric for spray endpoints on this machine"};
  sim::FabricDaemonConfig c;
  c.port = 4790;
  c.fabric.hosts = 64;
  c.fabric.mtu_bytes = 9000;
  c.fabric.nic_rx_ring = 4096;  // per host: 32 KiB of pointers each, even at --hosts 4096
  double seconds = 600, propagation_us = 1, reorder_delay_us = 20;
  double host_idle_ms = c.host_idle.as_seconds() * 1000;
  bool no_trim = false;
  std::vector<std::string> outages;
  std::string stats_path, port_file;
  app.add_option("--address", c.address, "local address to listen on");
  app.add_option("--port", c.port, "UDP port to listen on; 0 picks one")->capture_default_str();
  app.add_option("--hosts", c.fabric.hosts, "most endpoints on the fabric at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--host-idle-ms", host_idle_ms,
                 "an endpoint silent this long gives up its host to a new one when all are "
                 "taken")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400e3));
  app.add_option("--paths", c.fabric.paths, "spine paths; a packet takes path EV mod paths")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--gbps", c.fabric.host_link.gbps, "host link rate, Gbit/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--path-gbps", c.fabric.path_link.gbps, "spine path rate, Gbit/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--propagation-us", propagation_us, "propagation delay of each link, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--queue-bytes", c.fabric.path_link.capacity_bytes,
                 "buffer of each queue; a packet that does not fit is trimmed (or dropped)")
      ->capture_default_str();
  app.add_option("--ecn-bytes", c.fabric.path_link.ecn_threshold_bytes,
                 "queue depth above which packets are marked CE")
      ->capture_default_str();
  app.add_flag("--no-trim", no_trim, "drop packets that do not fit a queue instead of trimming");
  app.add_option("--mtu", c.fabric.mtu_bytes, "largest UET packet carried, bytes")
      ->capture_default_str()
      ->check(CLI::Range(64, 65000));
  app.add_option("--loss", c.fabric.faults.loss, "probability a packet vanishes")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--duplicate", c.fabric.faults.duplicate, "probability a packet arrives twice")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--corrupt", c.fabric.faults.corrupt,
                 "probability a bit flips (the receiving NIC's FCS check drops the frame)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reorder", c.fabric.faults.reorder, "probability a packet is held back")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--reorder-delay-us", reorder_delay_us, "longest hold of a reordered packet, us")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--trim", c.fabric.faults.trim, "probability a switch trims a packet anyway")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", c.fabric.seed, "seed of the fault generator")->capture_default_str();
  app.add_option("--path-down", outages,
                 "PATH:FROM_MS[:UNTIL_MS]: the path is down from FROM_MS after the start "
                 "(until UNTIL_MS, else for good); repeatable");
  app.add_option("--seconds", seconds, "stop after this long")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--stats", stats_path, "write what the fabric did as JSON here at exit");
  app.add_option("--port-file", port_file, "write ADDR:PORT here once listening");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is not an error; every bad option is 2
  }

  c.fabric.host_link.propagation = c.fabric.path_link.propagation =
      Duration::nanoseconds(static_cast<int64_t>(propagation_us * 1000));
  c.fabric.host_link.trim_when_full = c.fabric.path_link.trim_when_full = !no_trim;
  c.fabric.host_link.capacity_bytes = c.fabric.path_link.capacity_bytes;
  c.fabric.host_link.ecn_threshold_bytes = c.fabric.path_link.ecn_threshold_bytes;
  c.fabric.faults.reorder_delay =
      Duration::nanoseconds(static_cast<int64_t>(reorder_delay_us * 1000));
  c.host_idle = Duration::microseconds(static_cast<int64_t>(host_idle_ms * 1000));
  for (const std::string& text : outages) {
    sim::PathOutage o;
    if (!parse_outage(text, o)) {
      fmt::print(stderr, "spray-fabric: --path-down '{}' is not PATH:FROM_MS[:UNTIL_MS]\n", text);
      return 2;
    }
    c.outages.push_back(o);
  }

  std::string error;
  auto daemon = sim::FabricDaemon::open(c, error);
  if (!daemon) {
    fmt::print(stderr, "spray-fabric: {}\n", error);
    return 1;
  }
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const std::string where = daemon->address().to_string();
  if (!port_file.empty()) {
    const std::string partial = port_file + ".partial";  // renamed: readers see it whole
    std::ofstream(partial) << where << "\n";
    std::rename(partial.c_str(), port_file.c_str());
  }
  fmt::print("spray-fabric: listening on {} ({} hosts, {} paths)\n", where, c.fabric.hosts,
             c.fabric.paths);
  std::fflush(stdout);

  daemon->run(stop_requested, Duration::microseconds(static_cast<int64_t>(seconds * 1e6)));

  const sim::FabricStats& f = daemon->fabric_stats();
  fmt::print(
      "spray-fabric: {} hosts ({} reclaimed); packets in {} out {}; lost {} duplicated {} "
      "corrupted {} reordered {} trimmed {} ECN {}; dropped with a path down {}, queue full {}; "
      "refused {}\n",
      daemon->relay().hosts_in_use(), daemon->relay().stats().hosts_reclaimed,
      daemon->stats().datagrams_in, daemon->stats().datagrams_out, f.lost, f.duplicated,
      f.dropped_fcs, f.reordered, f.trimmed, f.ecn_marked, f.dropped_path_down,
      f.dropped_queue_full, daemon->relay().stats().refused());
  if (!stats_path.empty()) std::ofstream(stats_path) << stats_json(*daemon).dump(2) << "\n";
  return 0;
}
