// spray-endpoint: one Spray endpoint in its own process, over kernel UDP or DPDK, as a
// server or a client.
//
//   spray-endpoint server --bind 10.9.0.2:4800 --messages 200 --bytes 1048576
//   spray-endpoint client --bind 10.9.0.1 --connect 10.9.0.2:4800 --messages 200
//   spray-endpoint server --datapath dpdk --bind 10.77.0.1:4800
//       --dpdk-args "--no-huge -m 512 --in-memory --vdev=net_af_packet0,iface=veth0"
//
// The client sends tagged messages whose bytes are a function of (message, offset); the
// server posts a receive per message, checks every byte and exits 0 only if all arrived
// intact. --pingpong measures latency instead. Both print a JSON summary (datapath and
// transport counters). Used by the network-namespace tests and by hand.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "tools/spray_endpoint/roles.h"
#include "transport/datapath/dpdk/dpdk_datapath.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace {

using namespace spray;
using tools::EndpointRoles;
using tools::Options;

nlohmann::json udp_stats(const dp::UdpDatapath& d) {
  const auto& s = d.stats();
  return {{"tx_packets", s.tx_packets},
          {"tx_dropped", s.tx_dropped},
          {"tx_syscalls", s.tx_syscalls},
          {"tx_gso_messages", s.tx_gso_messages},
          {"rx_gro_messages", s.rx_gro_messages},
          {"rx_packets", s.rx_packets},
          {"rx_ecn_ce", s.rx_ecn_ce}};
}

nlohmann::json dpdk_stats(const dp::DpdkDatapath& d) {
  const auto& s = d.stats();
  return {{"tx_packets", s.tx_packets},
          {"tx_dropped", s.tx_dropped},
          {"tx_no_neighbour", s.tx_no_neighbour},
          {"rx_packets", s.rx_packets},
          {"rx_not_for_us", s.rx_not_for_us},
          {"rx_bad_checksum", s.rx_bad_checksum},
          {"rx_malformed", s.rx_malformed},
          {"rx_ecn_ce", s.rx_ecn_ce},
          {"arp_requests_sent", s.arp_requests_sent},
          {"arp_replies_sent", s.arp_replies_sent},
          {"nd_solicitations_sent", s.nd_solicitations_sent},
          {"nd_advertisements_sent", s.nd_advertisements_sent},
          {"nd_advertisements_ignored", s.nd_advertisements_ignored},
          {"mld_reports_sent", s.mld_reports_sent},
          {"mldv1_reports_sent", s.mldv1_reports_sent},
          {"mld_queries_received", s.mld_queries_received},
          {"checksum_offload", d.checksum_offload()}};
}

template <class D>
int play(const Options& o, D& d, nlohmann::json (*stats)(const D&), bool is_client,
         const std::optional<dp::NetAddr>& target) {
  EndpointRoles<D> roles(o, d, stats);
  if (o.pingpong) return roles.pingpong(is_client ? &*target : nullptr);
  return is_client ? roles.client(*target) : roles.server();
}

// The address to bind: server "IP:PORT"; client "IP" (UDP picks a port; DPDK uses 4800).
std::optional<dp::NetAddr> local_address(const Options& o, bool is_client) {
  if (auto a = dp::parse_ip_port(o.bind)) return a;
  if (is_client) return dp::parse_ip(o.bind, o.datapath == "dpdk" ? 4800 : 0);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("FI_SPRAY_DPDK_ARGS")) o.dpdk_args = env;
  CLI::App app{"spray-endpoint: a Spray endpoint over kernel UDP or DPDK"};
  app.require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--datapath", o.datapath, "udp | dpdk")->check(CLI::IsMember({"udp", "dpdk"}));
    c->add_option("--messages", o.messages, "messages to transfer");
    c->add_option("--bytes", o.bytes, "bytes per message")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
    c->add_option("--window", o.window, "messages in flight")->check(CLI::Range(1, 1024));
    c->add_option("--entropy-ports", o.entropy_ports,
                  "UDP source ports per endpoint (power of two)");
    c->add_option("--mtu", o.mtu,
                  "UET bytes per datagram (default: what a 1500-byte IP packet holds, 1472 or "
                  "1452 over IPv6)");
    c->add_option("--path-selection", o.path_selection,
                  "reps | oblivious | ecmp | ecmp_repath | bitmap");
    c->add_option("--timeout", o.timeout_s, "give up after this many seconds");
    c->add_flag("--pingpong", o.pingpong, "latency mode: one message at a time, echoed");
    c->add_flag("!--no-gso", o.gso, "UDP: send every packet as its own datagram");
    c->add_flag("!--no-gro", o.gro, "UDP: receive every datagram on its own");
    c->add_option("--interface", o.interface,
                  "UDP: bind the sockets to this network device (SO_BINDTODEVICE)");
    c->add_option("--socket-buffer", o.socket_buffer_bytes,
                  "UDP: kernel receive and send buffer of each socket, bytes")
        ->check(CLI::Range(uint32_t{4096}, uint32_t{1} << 30));
    c->add_option("--line-rate-gbps", o.line_rate_gbps, "link rate congestion control assumes");
    c->add_option("--base-rtt-us", o.base_rtt_us, "unloaded round trip congestion control assumes");
    c->add_option("--dpdk-args", o.dpdk_args, "EAL parameters (default: $FI_SPRAY_DPDK_ARGS)");
    c->add_option("--dpdk-port", o.dpdk_port, "DPDK port name (default: the only port)");
    c->add_option("--neighbour", o.neighbours, "IP=MAC, for DPDK (repeatable)");
  };
  auto* srv = app.add_subcommand("server", "receive and check messages");
  srv->add_option("--bind", o.bind,
                  "ADDRESS:PORT to listen on (port a multiple of --entropy-ports)")
      ->required();
  common(srv);
  auto* cli = app.add_subcommand("client", "send messages to a server");
  cli->add_option("--bind", o.bind, "local ADDRESS[:PORT] to send from")->required();
  cli->add_option("--connect", o.connect, "server ADDRESS:PORT")->required();
  common(cli);
  CLI11_PARSE(app, argc, argv);

  const bool is_client = cli->parsed();
  const auto local = local_address(o, is_client);
  const auto target = is_client ? dp::parse_ip_port(o.connect) : std::nullopt;
  if (!local || (is_client && !target)) {
    fmt::print(stderr, "spray-endpoint: bad --bind '{}' or --connect '{}'\n", o.bind, o.connect);
    return 2;
  }
  std::string error;
  const bool ipv6 = local->family == dp::NetAddr::Family::kIpv6;
  const uint32_t mtu = o.mtu ? o.mtu : dp::standard_udp_payload_bytes(ipv6);
  if (o.datapath == "dpdk") {
    dp::DpdkConfig c;
    c.eal_args = o.dpdk_args;
    c.port = o.dpdk_port;
    c.address = dp::ip_to_string(*local);
    c.udp_port = local->port;
    c.entropy_ports = o.entropy_ports;
    c.mtu_bytes = mtu;
    c.neighbours = o.neighbours;
    auto d = dp::DpdkDatapath::open(c, error);
    if (!d) {
      fmt::print(stderr, "spray-endpoint: {}\n", error);
      return 2;
    }
    return play<dp::DpdkDatapath>(o, *d, dpdk_stats, is_client, target);
  }
  dp::UdpConfig c;
  c.address = dp::ip_to_string(*local);
  c.port = local->port;
  c.entropy_ports = o.entropy_ports;
  c.mtu_bytes = mtu;
  c.gso = o.gso;
  c.gro = o.gro;
  c.interface = o.interface;
  c.socket_buffer_bytes = o.socket_buffer_bytes;
  auto d = dp::UdpDatapath::open(c, error);
  if (!d) {
    fmt::print(stderr, "spray-endpoint: {}\n", error);
    return 2;
  }
  if (const auto got = d->socket_buffers(); got.receive_bytes < c.socket_buffer_bytes) {
    fmt::print(stderr,
               "spray-endpoint: asked for {} bytes of socket buffer, the kernel granted {} "
               "(net.core.rmem_max; CAP_NET_ADMIN lifts it)\n",
               c.socket_buffer_bytes, got.receive_bytes);
  }
  return play<dp::UdpDatapath>(o, *d, udp_stats, is_client, target);
}
