// spray-udp: a Spray endpoint over kernel UDP, as a server or a client process.
//
//   spray-udp server --bind 10.9.0.2:4800 --messages 200 --bytes 1048576
//   spray-udp client --bind 10.9.0.1 --connect 10.9.0.2:4800 --messages 200 --bytes 1048576
//
// The client sends tagged messages whose bytes are a function of (message, offset); the
// server posts a receive per message, checks every byte and exits 0 only if all arrived
// intact. Both print a JSON summary (datapath and transport counters). Used by the
// network-namespace multipath tests and by hand.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <vector>

#include "transport/datapath/clock.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"
#include "transport/engine/engine.h"

namespace {

using namespace spray;
using Engine = engine::Engine<dp::UdpDatapath>;

uint8_t pattern(uint64_t msg, uint64_t i) {
  return static_cast<uint8_t>(msg * 31 + i * 7 + (i >> 11));
}

struct Options {
  std::string bind;
  std::string connect;
  uint32_t messages = 100;
  uint64_t bytes = 1 << 20;
  uint32_t window = 16;  // messages in flight at the client
  uint16_t entropy_ports = 8;
  uint32_t mtu = 1472;
  std::string path_selection = "reps";
  double timeout_s = 60;
  bool pingpong = false;  // latency: one message in flight, echoed back
};

// Drives the engine until done() or the deadline: spins while there is work, then
// blocks in the socket's poll so an idle process does not burn a core.
template <class Done>
bool run(Engine& e, dp::UdpDatapath& d, Done&& done, double timeout_s) {
  const Time deadline =
      dp::monotonic_now() + Duration::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  Time last_work = dp::monotonic_now();
  while (!done()) {
    const Time now = dp::monotonic_now();
    if (now > deadline) return false;
    if (e.progress(now) > 0) {
      last_work = now;
    } else if (now - last_work > Duration::microseconds(50)) {
      d.wait(Duration::milliseconds(1));  // timers still run at least every millisecond
    }
  }
  return true;
}

nlohmann::json summary(Engine& e, dp::UdpDatapath& d) {
  const auto& p = e.pds().stats();
  const auto& u = d.stats();
  return {{"data_packets", p.tx_packets},
          {"retransmissions", p.retransmits},
          {"timeouts", p.timeouts},
          {"rx_packets", p.rx_packets},
          {"rx_duplicates", p.rx_duplicates},
          {"pdcs_failed", p.pdcs_failed},
          {"udp",
           {{"tx_packets", u.tx_packets},
            {"tx_dropped", u.tx_dropped},
            {"tx_syscalls", u.tx_syscalls},
            {"rx_packets", u.rx_packets}}}};
}

std::unique_ptr<dp::UdpDatapath> open_datapath(const Options& o, const dp::NetAddr& addr) {
  dp::UdpConfig c;
  c.address = addr.to_string().substr(0, addr.to_string().rfind(':'));
  if (addr.family == dp::NetAddr::Family::kIpv6)
    c.address = c.address.substr(1, c.address.size() - 2);
  c.port = addr.port;
  c.entropy_ports = o.entropy_ports;
  c.mtu_bytes = o.mtu;
  std::string error;
  auto d = dp::UdpDatapath::open(c, error);
  if (!d) fmt::print(stderr, "spray-udp: {}\n", error);
  return d;
}

engine::EngineConfig engine_config(const Options& o) {
  engine::EngineConfig e;
  e.pds.path_name = o.path_selection;
  e.pds.entropy_count = o.entropy_ports;
  e.pds.cc.base_rtt = Duration::microseconds(100);
  e.pds.cc.line_rate_gbps = 10;
  e.pds.initial_rto = Duration::milliseconds(2);
  e.pds.max_rto = Duration::milliseconds(100);
  e.pds.reorder_window = Duration::microseconds(500);
  return e;
}

// Ping-pong: the client sends `bytes`, the server sends the same back, `messages`
// times; the client reports half the mean round trip as one-way latency.
int pingpong(const Options& o, bool is_client) {
  const auto target = dp::parse_ip_port(o.connect);
  const auto local = is_client ? dp::parse_ip(o.bind) : dp::parse_ip_port(o.bind);
  if (!local || (is_client && !target)) {
    fmt::print(stderr, "spray-udp: bad --bind/--connect\n");
    return 2;
  }
  auto d = open_datapath(o, *local);
  if (!d) return 2;
  Engine e(*d, engine_config(o));
  std::vector<uint8_t> out(o.bytes, 1), in(o.bytes);
  pds::PeerIndex peer = is_client ? e.add_peer(*target) : pds::kNoPeer;
  // The client counts echoes; the first round is a warm-up. The server echoes every
  // ping, and after the last one waits only for that echo to be acknowledged.
  uint32_t rounds = 0;
  const uint32_t total = o.messages + 1;
  bool recv_done = false, send_done = !is_client, last_echo_sent = false;
  auto post = [&] { e.post_recv({in.data(), o.bytes, 1}); };
  auto send = [&] { e.send(peer, out.data(), o.bytes, 2); };
  post();
  if (is_client) send();
  Time start{};
  const bool ok = run(
      e, *d,
      [&] {
        ses::Completion c;
        while (e.poll_completion(c)) {
          if (c.op == ses::OpKind::kRecv) {
            recv_done = true;
            peer = c.peer;
          } else {
            send_done = true;
          }
        }
        if (last_echo_sent) return send_done;
        if (!recv_done || !send_done) return false;
        recv_done = false;
        send_done = false;
        ++rounds;
        if (is_client) {
          if (rounds == 1) start = dp::monotonic_now();
          if (rounds == total) return true;
          post();
          send();
          return false;
        }
        send();  // the echo
        if (rounds == total) {
          last_echo_sent = true;
        } else {
          post();
        }
        return false;
      },
      o.timeout_s);
  if (is_client) {
    const double rtt_us = (dp::monotonic_now() - start).as_microseconds() / o.messages;
    nlohmann::json j = {{"role", "client"},
                        {"ok", ok},
                        {"bytes", o.bytes},
                        {"iterations", o.messages},
                        {"one_way_latency_us", rtt_us / 2}};
    fmt::print("{}\n", j.dump());
  }
  return ok ? 0 : 1;
}

int server(const Options& o) {
  const auto addr = dp::parse_ip_port(o.bind);
  if (!addr) {
    fmt::print(stderr, "spray-udp: --bind needs ADDRESS:PORT, got '{}'\n", o.bind);
    return 2;
  }
  auto d = open_datapath(o, *addr);
  if (!d) return 2;
  Engine e(*d, engine_config(o));
  std::vector<uint8_t> buf(o.bytes);
  uint32_t received = 0, intact = 0, posted = 0;
  // Receives are reused: a window of them at a time, each checked on completion.
  std::vector<std::vector<uint8_t>> bufs(o.window, std::vector<uint8_t>(o.bytes));
  auto post = [&](uint32_t slot) {
    ses::RecvSpec r{bufs[slot].data(), o.bytes, slot};
    if (e.post_recv(r) == Status::kOk) ++posted;
  };
  for (uint32_t s = 0; s < std::min(o.window, o.messages); ++s) post(s);
  const bool ok = run(
      e, *d,
      [&] {
        ses::Completion c;
        while (e.poll_completion(c)) {
          if (c.op != ses::OpKind::kRecv) continue;
          ++received;
          const auto msg = c.data;  // the client puts the message number in immediate data
          bool good = c.status == Status::kOk && c.length == o.bytes;
          for (uint64_t i = 0; good && i < o.bytes; ++i)
            good = bufs[c.context][i] == pattern(msg, i);
          intact += good;
          if (posted < o.messages) post(static_cast<uint32_t>(c.context));
        }
        return received >= o.messages;
      },
      o.timeout_s);
  // Linger briefly so the last ACKs reach the client.
  run(
      e, *d, [] { return false; }, 0.2);
  nlohmann::json j = {{"role", "server"},
                      {"ok", ok && intact == o.messages},
                      {"received", received},
                      {"intact", intact},
                      {"engine", summary(e, *d)}};
  fmt::print("{}\n", j.dump());
  return ok && intact == o.messages ? 0 : 1;
}

int client(const Options& o) {
  const auto target = dp::parse_ip_port(o.connect);
  const auto local = dp::parse_ip(o.bind);
  if (!target || !local) {
    fmt::print(stderr, "spray-udp: need --bind ADDRESS and --connect ADDRESS:PORT\n");
    return 2;
  }
  auto d = open_datapath(o, *local);
  if (!d) return 2;
  Engine e(*d, engine_config(o));
  const auto peer = e.add_peer(*target);
  std::vector<std::vector<uint8_t>> bufs(o.window, std::vector<uint8_t>(o.bytes));
  uint32_t next = 0, done = 0, failed = 0;
  auto send = [&](uint32_t slot) {
    for (uint64_t i = 0; i < o.bytes; ++i) bufs[slot][i] = pattern(next, i);
    ses::SendSpec s{.has_data = true, .data = next};
    if (e.send(peer, bufs[slot].data(), o.bytes, slot, s) == Status::kOk) ++next;
  };
  const Time start = dp::monotonic_now();
  for (uint32_t s = 0; s < std::min(o.window, o.messages); ++s) send(s);
  const bool ok = run(
      e, *d,
      [&] {
        ses::Completion c;
        while (e.poll_completion(c)) {
          ++done;
          if (c.status != Status::kOk) {
            ++failed;
            fmt::print(stderr, "spray-udp: send failed: {}\n", to_string(c.status));
          }
          if (next < o.messages) send(static_cast<uint32_t>(c.context));
        }
        return done >= o.messages;
      },
      o.timeout_s);
  const double seconds = (dp::monotonic_now() - start).as_seconds();
  const double gbps = static_cast<double>(o.bytes) * done * 8 / seconds / 1e9;
  nlohmann::json j = {{"role", "client"},        {"ok", ok && failed == 0}, {"sent", done},
                      {"failed", failed},        {"seconds", seconds},      {"gbps", gbps},
                      {"engine", summary(e, *d)}};
  fmt::print("{}\n", j.dump());
  return ok && failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"spray-udp: a Spray endpoint over kernel UDP"};
  app.require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--messages", o.messages, "messages to transfer");
    c->add_option("--bytes", o.bytes, "bytes per message")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
    c->add_option("--window", o.window, "messages in flight")->check(CLI::Range(1, 1024));
    c->add_option("--entropy-ports", o.entropy_ports,
                  "UDP source ports per endpoint (power of two)");
    c->add_option("--mtu", o.mtu, "UET bytes per datagram");
    c->add_option("--path-selection", o.path_selection, "reps | oblivious | ecmp");
    c->add_option("--timeout", o.timeout_s, "give up after this many seconds");
    c->add_flag("--pingpong", o.pingpong, "latency mode: one message at a time, echoed");
  };
  auto* srv = app.add_subcommand("server", "receive and check messages");
  srv->add_option("--bind", o.bind,
                  "ADDRESS:PORT to listen on (port a multiple of --entropy-ports)")
      ->required();
  common(srv);
  auto* cli = app.add_subcommand("client", "send messages to a server");
  cli->add_option("--bind", o.bind, "local ADDRESS to send from")->required();
  cli->add_option("--connect", o.connect, "server ADDRESS:PORT")->required();
  common(cli);
  CLI11_PARSE(app, argc, argv);
  if (o.pingpong) return pingpong(o, cli->parsed());
  return srv->parsed() ? server(o) : client(o);
}
