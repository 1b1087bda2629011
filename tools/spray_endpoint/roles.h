// What a spray-endpoint process does, for any datapath D: serve (receive and check
// messages), send them as a client, or ping-pong for latency. Templated on the datapath
// because the engine is (DESIGN.md decision 4).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/common/byte_pattern.h"
#include "transport/datapath/clock.h"
#include "transport/datapath/udp/udp_datapath.h"
#include "transport/engine/engine.h"
#include "transport/engine/real_time_config.h"

namespace spray::tools {

struct Options {
  std::string datapath = "udp";  // udp | dpdk
  std::string bind;
  std::string connect;
  uint32_t messages = 100;
  uint64_t bytes = 1 << 20;
  uint32_t window = 16;  // messages in flight at the client
  uint16_t entropy_ports = 8;
  uint32_t mtu = 0;  // UET bytes per datagram; 0: a 1500-byte IP packet's (1472, IPv6 1452)
  std::string path_selection = "reps";
  double timeout_s = 60;
  bool pingpong = false;  // latency: one message in flight, echoed back
  bool gso = true;        // UDP only: segmentation offload for runs of packets
  bool gro = true;        // UDP only: receive offload
  std::string interface;  // UDP only: the device the sockets are bound to; empty: none
  // UDP only: each socket's kernel receive and send buffer.
  uint32_t socket_buffer_bytes = dp::UdpConfig{}.socket_buffer_bytes;
  double line_rate_gbps = 10;  // what congestion control assumes the link carries
  double base_rtt_us = 100;    // congestion control's unloaded round trip
  // DPDK only.
  std::string dpdk_args;
  std::string dpdk_port;
  std::vector<std::string> neighbours;
};

inline engine::EngineConfig engine_config(const Options& o) {
  engine::EngineConfig e = engine::real_time_engine_config();
  e.pds.path_name = o.path_selection;
  e.pds.entropy_count = o.entropy_ports;
  e.pds.cc.base_rtt = Duration::nanoseconds(static_cast<int64_t>(o.base_rtt_us * 1000));
  e.pds.cc.line_rate_gbps = o.line_rate_gbps;
  return e;
}

template <class D>
class EndpointRoles {
 public:
  // `datapath_stats` renders the datapath's counters (each datapath has its own).
  EndpointRoles(const Options& o, D& d, nlohmann::json (*datapath_stats)(const D&))
      : o_(o), d_(d), e_(d, engine_config(o)), datapath_stats_(datapath_stats) {}

  int server();
  int client(const dp::NetAddr& target);
  int pingpong(const dp::NetAddr* target);  // target: the client's server; null on the server

 private:
  // Drives the engine until done() or the deadline: spins while there is work, then
  // blocks in the datapath's wait() so an idle process does not burn a core.
  template <class Done>
  bool run(Done&& done, double timeout_s) {
    const Time deadline =
        dp::monotonic_now() + Duration::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    Time last_work = dp::monotonic_now();
    while (!done()) {
      const Time now = dp::monotonic_now();
      if (now > deadline) return false;
      if (e_.progress(now) > 0) {
        last_work = now;
      } else if (now - last_work > Duration::microseconds(50)) {
        d_.wait(Duration::milliseconds(1));  // timers still run at least every millisecond
      }
    }
    return true;
  }

  nlohmann::json summary() {
    const auto& p = e_.pds().stats();
    const auto& s = e_.ses().stats();
    return {{"data_packets", p.tx_packets},
            {"retransmissions", p.retransmits},
            {"rack_retransmissions", p.rack_retransmits},
            {"timeout_retransmissions", p.timeout_retransmits},
            {"timeouts", p.timeouts},
            {"rx_packets", p.rx_packets},
            {"rx_duplicates", p.rx_duplicates},
            {"acks_received", p.acks_received},
            {"acks_on_trigger_ev", p.acks_on_trigger_ev},
            {"rx_ecn_marked", p.rx_ecn_marked},
            {"ecn_acks_received", p.ecn_acks_received},
            {"pdcs_failed", p.pdcs_failed},
            {"pdcs_forgotten", p.pdcs_forgotten},
            {"pdcs_reopened", p.pdcs_reopened},
            {"receives_abandoned", s.receives_abandoned},
            {"missing_ids_passed_over", s.missing_ids_passed_over},
            {"writes_abandoned", s.writes_abandoned},
            {"peers_restarted", s.peers_restarted},
            {"requests_of_a_retired_incarnation", s.requests_of_a_retired_incarnation},
            {"requests_to_an_earlier_incarnation", s.requests_to_an_earlier_incarnation},
            {"hellos_sent", s.hellos_sent},
            {o_.datapath, datapath_stats_(d_)}};
  }

  const Options& o_;
  D& d_;
  engine::Engine<D> e_;
  nlohmann::json (*datapath_stats_)(const D&);
};

template <class D>
int EndpointRoles<D>::server() {
  uint32_t received = 0, intact = 0, posted = 0;
  // Receives are reused: a window of them at a time, each checked on completion.
  std::vector<std::vector<uint8_t>> bufs(o_.window, std::vector<uint8_t>(o_.bytes));
  auto post = [&](uint32_t slot) {
    ses::RecvSpec r{bufs[slot].data(), o_.bytes, slot};
    if (e_.post_recv(r) == Status::kOk) ++posted;
  };
  for (uint32_t s = 0; s < std::min(o_.window, o_.messages); ++s) post(s);
  const bool ok = run(
      [&] {
        ses::Completion c;
        while (e_.poll_completion(c)) {
          if (c.op != ses::OpKind::kRecv) continue;
          ++received;
          const auto msg = c.data;  // the client puts the message number in immediate data
          intact += c.status == Status::kOk && c.length == o_.bytes &&
                    pattern_mismatches(bufs[c.context], msg) == 0;
          if (posted < o_.messages) post(static_cast<uint32_t>(c.context));
        }
        return received >= o_.messages;
      },
      o_.timeout_s);
  // Linger briefly so the last ACKs reach the client.
  run([] { return false; }, 0.2);
  const bool all_good = ok && intact == o_.messages;
  nlohmann::json j = {{"role", "server"},
                      {"ok", all_good},
                      {"received", received},
                      {"intact", intact},
                      {"engine", summary()}};
  fmt::print("{}\n", j.dump());
  return all_good ? 0 : 1;
}

template <class D>
int EndpointRoles<D>::client(const dp::NetAddr& target) {
  const auto peer = e_.add_peer(target);
  std::vector<std::vector<uint8_t>> bufs(o_.window, std::vector<uint8_t>(o_.bytes));
  uint32_t next = 0, done = 0, failed = 0;
  auto send = [&](uint32_t slot) {
    fill_pattern(bufs[slot], next);
    ses::SendSpec s{.has_data = true, .data = next};
    if (e_.send(peer, bufs[slot].data(), o_.bytes, slot, s) == Status::kOk) ++next;
  };
  const Time start = dp::monotonic_now();
  for (uint32_t s = 0; s < std::min(o_.window, o_.messages); ++s) send(s);
  const bool ok = run(
      [&] {
        ses::Completion c;
        while (e_.poll_completion(c)) {
          ++done;
          if (c.status != Status::kOk) {
            ++failed;
            fmt::print(stderr, "spray-endpoint: send failed: {}\n", to_string(c.status));
          }
          if (next < o_.messages) send(static_cast<uint32_t>(c.context));
        }
        return done >= o_.messages;
      },
      o_.timeout_s);
  const double seconds = (dp::monotonic_now() - start).as_seconds();
  const double gbps = static_cast<double>(o_.bytes) * done * 8 / seconds / 1e9;
  const bool all_good = ok && failed == 0;
  nlohmann::json j = {{"role", "client"},   {"ok", all_good},     {"sent", done},
                      {"failed", failed},   {"seconds", seconds}, {"gbps", gbps},
                      {"engine", summary()}};
  fmt::print("{}\n", j.dump());
  return all_good ? 0 : 1;
}

// Ping-pong: the client sends `bytes`, the server sends the same back, `messages`
// times; the client reports half the mean round trip as one-way latency.
template <class D>
int EndpointRoles<D>::pingpong(const dp::NetAddr* target) {
  const bool is_client = target != nullptr;
  std::vector<uint8_t> out(o_.bytes, 1), in(o_.bytes);
  pds::PeerIndex peer = is_client ? e_.add_peer(*target) : pds::kNoPeer;
  // The client counts echoes; the first round is a warm-up. The server echoes every
  // ping, and after the last one waits only for that echo to be acknowledged.
  uint32_t rounds = 0;
  const uint32_t total = o_.messages + 1;
  bool recv_done = false, send_done = !is_client, last_echo_sent = false;
  auto post = [&] { e_.post_recv({in.data(), o_.bytes, 1}); };
  auto send = [&] { e_.send(peer, out.data(), o_.bytes, 2); };
  post();
  if (is_client) send();
  Time start{};
  const bool ok = run(
      [&] {
        ses::Completion c;
        while (e_.poll_completion(c)) {
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
      o_.timeout_s);
  if (is_client) {
    const double rtt_us = (dp::monotonic_now() - start).as_microseconds() / o_.messages;
    nlohmann::json j = {{"role", "client"},
                        {"ok", ok},
                        {"bytes", o_.bytes},
                        {"iterations", o_.messages},
                        {"one_way_latency_us", rtt_us / 2}};
    fmt::print("{}\n", j.dump());
  }
  return ok ? 0 : 1;
}

}  // namespace spray::tools
