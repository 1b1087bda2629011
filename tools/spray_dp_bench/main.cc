// spray-dp-bench: packets/s and Gbit/s of a datapath, as a ratio to a plain kernel-UDP
// blast (sendmmsg/recvmmsg on two sockets, no transport) measured in the same run.
//
// Both sides run on one thread, alternating a transmit burst and draining receives, so
// the figure is what one core moves through the kernel with each method. Datapaths
// today: "udp" (Spray's kernel UDP datapath, packets sprayed over its source ports).
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstring>

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

// Spray's UDP datapath: bursts sprayed over the sender's source ports.
Result spray_udp(uint32_t payload, uint16_t entropy_ports, double seconds) {
  dp::UdpConfig c;
  c.entropy_ports = entropy_ports;
  c.mtu_bytes = std::max<uint32_t>(payload, 128);
  std::string error;
  auto a = dp::UdpDatapath::open(c, error);
  auto b = dp::UdpDatapath::open(c, error);
  if (!a || !b) {
    fmt::print(stderr, "spray-dp-bench: {}\n", error);
    std::exit(1);
  }
  std::array<dp::PacketBuf*, kBurst> bufs{};
  Result r;
  uint16_t ev = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  while (Clock::now() < end) {
    const size_t n = a->alloc(bufs.data(), kBurst);
    for (size_t i = 0; i < n; ++i) {
      bufs[i]->len = payload;
      bufs[i]->peer = b->local_address();
      bufs[i]->entropy = ev++;
    }
    a->tx_burst(bufs.data(), n);
    size_t got = 0;
    while ((got = b->rx_burst(bufs.data(), kBurst)) > 0) {
      r.received += got;
      b->free(bufs.data(), got);
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  r.packets_per_second = static_cast<double>(r.received) / s;
  r.gbps = r.packets_per_second * payload * 8 / 1e9;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  std::vector<uint32_t> payloads = {64, 1472, 8192};
  uint16_t entropy_ports = 8;
  bool json = false;
  CLI::App app{"spray-dp-bench: datapath packet rate vs a plain kernel-UDP blast, same run"};
  app.add_option("--seconds", seconds, "seconds per measurement");
  app.add_option("--payload", payloads, "datagram sizes in bytes");
  app.add_option("--entropy-ports", entropy_ports, "source ports the UDP datapath sprays over");
  app.add_flag("--json", json, "print JSON");
  CLI11_PARSE(app, argc, argv);
  nlohmann::json all = nlohmann::json::array();
  if (!json)
    fmt::print("{:>8}  {:>14}  {:>10}  {:>14}  {:>10}  {:>6}\n", "bytes", "plain pkt/s", "Gbit/s",
               "spray-udp pkt/s", "Gbit/s", "ratio");
  for (uint32_t p : payloads) {
    const Result base = plain_udp_blast(p, seconds);
    const Result udp = spray_udp(p, entropy_ports, seconds);
    const double ratio = udp.packets_per_second / base.packets_per_second;
    all.push_back({{"payload", p},
                   {"plain_pps", base.packets_per_second},
                   {"plain_gbps", base.gbps},
                   {"spray_udp_pps", udp.packets_per_second},
                   {"spray_udp_gbps", udp.gbps},
                   {"ratio", ratio}});
    if (!json) {
      fmt::print("{:>8}  {:>14.0f}  {:>10.2f}  {:>14.0f}  {:>10.2f}  {:>6.2f}\n", p,
                 base.packets_per_second, base.gbps, udp.packets_per_second, udp.gbps, ratio);
    }
  }
  if (json) fmt::print("{}\n", all.dump(2));
  return 0;
}
