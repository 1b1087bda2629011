// spray-dp-bench: packets/s and Gbit/s of a datapath, as a ratio to a plain kernel-UDP
// blast (sendmmsg/recvmmsg on two sockets, no transport) measured in the same run.
//
// Both sides run on one thread, alternating a transmit burst and draining receives, so
// the figure is what one core moves through the kernel with each method. Datapaths
// today: "udp" (Spray's kernel UDP datapath, packets sprayed over its source ports).
//
// With --pingpong it instead measures the kernel-UDP ceiling of a message ping-pong
// between two processes (see plain_udp_pingpong.h): what fi_pingpong over a transport
// on kernel UDP could reach at best. With --stream, the kernel's ceilings for a one-way
// stream of messages, plain TCP beside plain UDP (see plain_stream.h). With
// --tcp-allreduce, a ring all-reduce between processes over bare loopback TCP (see
// plain_tcp_allreduce.h).
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstring>

#include "tools/spray_dp_bench/plain_stream.h"
#include "tools/spray_dp_bench/plain_tcp_allreduce.h"
#include "tools/spray_dp_bench/plain_udp_pingpong.h"
#include "transport/datapath/dpdk/dpdk_datapath.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace {

using namespace spray;
using Clock = std::chrono::steady_clock;

struct Result {
  double packets_per_second = 0;
  double gbps = 0;
  uint64_t received = 0;
};

constexpr size_t kBurst = 32;

// The baseline: two plain UDP sockets on loopback, batched both ways, nothing else.
Result plain_udp_blast(uint32_t payload, double seconds) {
  const int tx = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  const int rx = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  const int size = 4 << 20;
  ::setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  ::setsockopt(tx, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(rx, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(rx, reinterpret_cast<sockaddr*>(&addr), &len);
  std::vector<uint8_t> out(payload, 0x5a), in(kBurst * 65536);
  std::array<mmsghdr, kBurst> smsg{}, rmsg{};
  std::array<iovec, kBurst> siov{}, riov{};
  for (size_t i = 0; i < kBurst; ++i) {
    siov[i] = {out.data(), payload};
    smsg[i].msg_hdr.msg_iov = &siov[i];
    smsg[i].msg_hdr.msg_iovlen = 1;
    smsg[i].msg_hdr.msg_name = &addr;
    smsg[i].msg_hdr.msg_namelen = sizeof(addr);
    riov[i] = {in.data() + i * 65536, 65536};
    rmsg[i].msg_hdr.msg_iov = &riov[i];
    rmsg[i].msg_hdr.msg_iovlen = 1;
  }
  Result r;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  while (Clock::now() < end) {
    ::sendmmsg(tx, smsg.data(), kBurst, 0);
    int got = 0;
    while ((got = ::recvmmsg(rx, rmsg.data(), kBurst, MSG_DONTWAIT, nullptr)) > 0) {
      r.received += static_cast<uint64_t>(got);
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  r.packets_per_second = static_cast<double>(r.received) / s;
  r.gbps = r.packets_per_second * payload * 8 / 1e9;
  ::close(tx);
  ::close(rx);
  return r;
}

// Moves bursts from datapath a to datapath b for `seconds`, sprayed over every EV.
template <class D>
Result blast(D& a, D& b, uint32_t payload, double seconds) {
  std::array<dp::PacketBuf*, kBurst> bufs{};
  Result r;
  uint16_t ev = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  while (Clock::now() < end) {
    const size_t n = a.alloc(bufs.data(), kBurst);
    for (size_t i = 0; i < n; ++i) {
      bufs[i]->len = payload;
      bufs[i]->peer = b.local_address();
      bufs[i]->entropy = ev++;
    }
    a.tx_burst(bufs.data(), n);
    size_t got = 0;
    while ((got = b.rx_burst(bufs.data(), kBurst)) > 0) {
      r.received += got;
      b.free(bufs.data(), got);
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  r.packets_per_second = static_cast<double>(r.received) / s;
  r.gbps = r.packets_per_second * payload * 8 / 1e9;
  return r;
}

[[noreturn]] void die(const std::string& error) {
  fmt::print(stderr, "spray-dp-bench: {}\n", error);
  std::exit(1);
}

// Spray's UDP datapath on loopback: bursts sprayed over the sender's source ports.
Result spray_udp(uint32_t payload, uint16_t entropy_ports, double seconds) {
  dp::UdpConfig c;
  c.entropy_ports = entropy_ports;
  c.mtu_bytes = std::max<uint32_t>(payload, 128);
  std::string error;
  auto a = dp::UdpDatapath::open(c, error);
  auto b = dp::UdpDatapath::open(c, error);
  if (!a || !b) die(error);
  return blast(*a, *b, payload, seconds);
}

// Spray's DPDK datapath between two ports of this process ("PORT_A:PORT_B"), e.g. the
// two ends of a memif or the two ends of a veth pair under net_af_packet; framed in IPv6
// (fd99::1 and fd99::2) or IPv4 (10.99.0.1 and 10.99.0.2).
Result spray_dpdk(const std::string& eal_args, const std::string& pair, uint32_t payload, bool ipv6,
                  double seconds) {
  const auto colon = pair.find(':');
  if (colon == std::string::npos) die(fmt::format("--dpdk-pair wants A:B, got '{}'", pair));
  auto config = [&](const std::string& port, int host) {
    dp::DpdkConfig c;
    c.eal_args = eal_args;
    c.port = port;
    c.address = ipv6 ? fmt::format("fd99::{}", host) : fmt::format("10.99.0.{}", host);
    c.kernel_neighbours = false;
    c.mtu_bytes = std::max<uint32_t>(payload, 256);
    return c;
  };
  std::string error;
  auto a = dp::DpdkDatapath::open(config(pair.substr(0, colon), 1), error);
  if (!a) die(error);
  auto b = dp::DpdkDatapath::open(config(pair.substr(colon + 1), 2), error);
  if (!b) die(error);
  a->neighbours().set(*dp::parse_ip_bytes(ipv6 ? "fd99::2" : "10.99.0.2"), b->mac());
  b->neighbours().set(*dp::parse_ip_bytes(ipv6 ? "fd99::1" : "10.99.0.1"), a->mac());
  if (!a->await_link(Duration::seconds(10)) || !b->await_link(Duration::seconds(10)))
    die(fmt::format("the link between {} stayed down", pair));
  return blast(*a, *b, payload, seconds);
}

// The --pingpong mode: one row per message size.
int pingpong_table(const std::vector<size_t>& sizes, uint32_t datagram, int iterations, bool json) {
  nlohmann::json all = nlohmann::json::array();
  if (!json)
    fmt::print("{:>9}  {:<44}  {:>11}  {:>10}\n", "bytes", "plain kernel UDP ping-pong (GSO/GRO)",
               "one-way us", "MB/s");
  for (size_t bytes : sizes) {
    // Small messages run many more round trips in the same time.
    const int n = bytes <= 65536 ? iterations * 10 : iterations;
    std::string error;
    const auto r = tools::plain_udp_pingpong(bytes, datagram, n, 10.0, error);
    if (!r) die(error);
    all.push_back({{"bytes", bytes},
                   {"datagram", datagram},
                   {"iterations", n},
                   {"one_way_us", r->one_way_us},
                   {"mb_per_s", r->megabytes_per_s}});
    if (!json)
      fmt::print("{:>9}  {:<44}  {:>11.2f}  {:>10.1f}\n", bytes,
                 fmt::format("{} round trips, {}-byte datagrams", n, datagram), r->one_way_us,
                 r->megabytes_per_s);
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return 0;
}

// The --stream mode: one row per message size, plain TCP and plain UDP side by side, each
// with what its sending process spent: the share of a core it kept busy and its CPU time
// per delivered megabyte. On loopback the sending core pays for most of both stacks, so a
// sender busy near 1.0 means that core is the ceiling, and the CPU time per megabyte says
// how high any one-sender transport over that stack can go.
int stream_table(const std::vector<size_t>& sizes, uint32_t datagram, double seconds, bool json) {
  nlohmann::json all = nlohmann::json::array();
  if (!json)
    fmt::print("{:>9}  {:>14}  {:>11}  {:>13}  {:>14}  {:>11}  {:>13}  {:>8}\n", "bytes",
               "plain TCP MB/s", "sender busy", "sender us/MB", "plain UDP MB/s", "sender busy",
               "sender us/MB", "UDP/TCP");
  for (size_t bytes : sizes) {
    std::string error;
    const auto tcp = tools::plain_stream(tools::StreamKind::kTcp, bytes, datagram, seconds, error);
    if (!tcp) die("TCP stream: " + error);
    const auto udp = tools::plain_stream(tools::StreamKind::kUdp, bytes, datagram, seconds, error);
    if (!udp) die("UDP stream: " + error);
    const double ratio = udp->megabytes_per_s / tcp->megabytes_per_s;
    all.push_back({{"bytes", bytes},
                   {"datagram", datagram},
                   {"tcp_mb_per_s", tcp->megabytes_per_s},
                   {"tcp_sender_busy", tcp->sender_busy},
                   {"tcp_sender_us_per_mb", tcp->sender_us_per_mb},
                   {"udp_mb_per_s", udp->megabytes_per_s},
                   {"udp_sender_busy", udp->sender_busy},
                   {"udp_sender_us_per_mb", udp->sender_us_per_mb},
                   {"udp_to_tcp", ratio}});
    if (!json)
      fmt::print(
          "{:>9}  {:>14.1f}  {:>11.2f}  {:>13.1f}  {:>14.1f}  {:>11.2f}  {:>13.1f}  {:>8.2f}\n",
          bytes, tcp->megabytes_per_s, tcp->sender_busy, tcp->sender_us_per_mb,
          udp->megabytes_per_s, udp->sender_busy, udp->sender_us_per_mb, ratio);
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return 0;
}

// The --tcp-allreduce mode: one row per size.
int allreduce_table(const std::vector<size_t>& sizes, int ranks, int iterations, bool json) {
  nlohmann::json all = nlohmann::json::array();
  if (!json)
    fmt::print("{:>9}  {:<44}  {:>10}  {:>10}\n", "bytes", "bare TCP ring all-reduce (f32 sum)",
               "mean us", "best us");
  for (size_t bytes : sizes) {
    std::string error;
    const auto r = tools::plain_tcp_allreduce(ranks, bytes, iterations, error);
    if (!r) die(error);
    all.push_back({{"bytes", bytes},
                   {"ranks", ranks},
                   {"iterations", iterations},
                   {"mean_us", r->mean_us},
                   {"best_us", r->best_us}});
    if (!json)
      fmt::print("{:>9}  {:<44}  {:>10.1f}  {:>10.1f}\n", bytes,
                 fmt::format("{} ranks, {} iterations", ranks, iterations), r->mean_us, r->best_us);
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  std::vector<uint32_t> payloads = {64, 1472, 8192};
  uint16_t entropy_ports = 8;
  std::string dpdk_args;
  std::vector<std::string> dpdk_pairs;
  bool dpdk_ipv6 = false;
  bool json = false;
  std::vector<size_t> pingpong_sizes;
  int pingpong_iterations = 2000;
  uint32_t datagram = 8972;
  CLI::App app{"spray-dp-bench: datapath packet rate vs a plain kernel-UDP blast, same run"};
  app.add_option("--seconds", seconds, "seconds per measurement");
  app.add_option("--payload", payloads, "datagram sizes in bytes");
  app.add_option("--entropy-ports", entropy_ports, "source ports the UDP datapath sprays over");
  app.add_option("--dpdk-args", dpdk_args, "EAL parameters creating the ports of --dpdk-pair");
  app.add_option("--dpdk-pair", dpdk_pairs,
                 "PORT_A:PORT_B: measure the DPDK datapath from A to B (repeatable)");
  app.add_flag("--dpdk-ipv6", dpdk_ipv6, "each --dpdk-pair framed in IPv6 as well");
  app.add_flag("--json", json, "print JSON");
  app.add_option("--pingpong", pingpong_sizes,
                 "message sizes in bytes: measure only the plain kernel-UDP ping-pong ceiling");
  app.add_option("--pingpong-iterations", pingpong_iterations, "round trips per size")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--datagram", datagram, "ping-pong and stream: UDP payload bytes per datagram")
      ->check(CLI::Range(1, 65507));
  std::vector<size_t> stream_sizes;
  app.add_option("--stream", stream_sizes,
                 "message sizes in bytes: measure only the kernel's one-way stream ceilings, "
                 "plain TCP and plain UDP (--seconds each)")
      ->check(CLI::Range(size_t{1}, size_t{4} << 20));
  std::vector<size_t> allreduce_sizes;
  int ranks = 4, allreduce_iterations = 20;
  app.add_option("--tcp-allreduce", allreduce_sizes,
                 "sizes in bytes (multiples of 4): measure only a ring all-reduce between "
                 "processes over bare loopback TCP")
      ->check(CLI::Range(size_t{4}, size_t{1} << 30));
  app.add_option("--ranks", ranks, "tcp-allreduce: processes")->check(CLI::Range(2, 64));
  app.add_option("--allreduce-iterations", allreduce_iterations,
                 "tcp-allreduce: timed all-reduces per size")
      ->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  if (!pingpong_sizes.empty())
    return pingpong_table(pingpong_sizes, datagram, pingpong_iterations, json);
  if (!stream_sizes.empty()) return stream_table(stream_sizes, datagram, seconds, json);
  if (!allreduce_sizes.empty())
    return allreduce_table(allreduce_sizes, ranks, allreduce_iterations, json);
  nlohmann::json all = nlohmann::json::array();
  if (!json)
    fmt::print("{:>6}  {:<46}  {:>12}  {:>8}  {:>14}\n", "bytes", "datapath", "pkt/s", "Gbit/s",
               "ratio to plain");
  auto row = [&](uint32_t p, const std::string& name, const Result& r, const Result& base) {
    const double ratio = r.packets_per_second / base.packets_per_second;
    all.push_back({{"payload", p},
                   {"datapath", name},
                   {"pps", r.packets_per_second},
                   {"gbps", r.gbps},
                   {"ratio_to_plain_udp", ratio}});
    if (!json)
      fmt::print("{:>6}  {:<46}  {:>12.0f}  {:>8.2f}  {:>14.2f}\n", p, name, r.packets_per_second,
                 r.gbps, ratio);
  };
  for (uint32_t p : payloads) {
    const Result base = plain_udp_blast(p, seconds);
    row(p, "plain kernel UDP (baseline)", base, base);
    row(p, "spray udp (loopback)", spray_udp(p, entropy_ports, seconds), base);
    for (const auto& pair : dpdk_pairs) {
      if (p > 1472) continue;  // Ethernet MTU on these ports
      row(p, "spray dpdk " + pair, spray_dpdk(dpdk_args, pair, p, false, seconds), base);
      if (dpdk_ipv6 && p <= 1452)
        row(p, "spray dpdk " + pair + " IPv6", spray_dpdk(dpdk_args, pair, p, true, seconds), base);
    }
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return 0;
}
