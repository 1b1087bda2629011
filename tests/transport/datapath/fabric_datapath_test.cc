// FabricDatapath through a real FabricDaemon (spray-fabric's body) on a thread of this
// process: packets cross real sockets and a fabric that loses, duplicates, corrupts,
// reorders and trims them, and whole transfers still arrive intact.
#include "transport/datapath/fabric/fabric_datapath.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "nic_sim/fabric_daemon.h"
#include "tests/support/packet_burst.h"
#include "tests/support/real_time_transfer.h"
#include "transport/datapath/fabric/relay_header.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/engine/real_time_config.h"

namespace spray::dp {
namespace {

// A FabricDaemon relaying on its own thread until destroyed.
struct RunningFabric {
  explicit RunningFabric(const sim::FabricDaemonConfig& config) {
    std::string error;
    daemon = sim::FabricDaemon::open(config, error);
    EXPECT_TRUE(daemon) << error;
    if (daemon) thread = std::thread([this] { daemon->run(stop, Duration::seconds(120)); });
  }
  ~RunningFabric() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  std::string address() const { return daemon->address().to_string(); }

  std::unique_ptr<sim::FabricDaemon> daemon;
  std::atomic<bool> stop{false};
  std::thread thread;
};

sim::FabricDaemonConfig quiet_fabric() {
  sim::FabricDaemonConfig c;
  c.fabric.hosts = 8;
  c.fabric.mtu_bytes = 4096;
  return c;
}

std::unique_ptr<FabricDatapath> open_ok(const std::string& fabric) {
  FabricDatapathConfig c;
  c.fabric = fabric;
  std::string error;
  auto d = FabricDatapath::open(c, error);
  EXPECT_TRUE(d) << error;
  return d;
}

TEST(FabricDatapath, open__refuses_what_cannot_work_and_says_why) {
  std::string error;
  FabricDatapathConfig c;
  c.fabric = "127.0.0.1";  // no port
  EXPECT_FALSE(FabricDatapath::open(c, error));
  EXPECT_NE(error.find("ADDRESS:PORT"), std::string::npos) << error;
  c.fabric = "[::1]:4790";
  EXPECT_FALSE(FabricDatapath::open(c, error));
  EXPECT_NE(error.find("IP version"), std::string::npos) << error;
  c.fabric = "127.0.0.1:4790";
  c.address = "192.0.2.1";  // TEST-NET: not this host's
  EXPECT_FALSE(FabricDatapath::open(c, error));
  EXPECT_NE(error.find("192.0.2.1"), std::string::npos) << error;
  c.address = "127.0.0.1";
  c.mtu_bytes = 10;
  EXPECT_FALSE(FabricDatapath::open(c, error));
  EXPECT_NE(error.find("mtu"), std::string::npos) << error;
}

TEST(FabricDatapath, a_burst_crosses_the_fabric_with_its_source_and_entropy) {
  RunningFabric fabric(quiet_fabric());
  ASSERT_TRUE(fabric.daemon);
  auto a = open_ok(fabric.address()), b = open_ok(fabric.address());
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 16> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 700));
  EXPECT_EQ(a->tx_burst(out.data(), out.size()), out.size());
  const auto got = test::receive(*b, out.size());
  ASSERT_EQ(got.size(), out.size());
  for (PacketBuf* p : got) {
    EXPECT_EQ(p->peer, a->local_address());
    EXPECT_EQ(p->len, 700u);
    EXPECT_EQ(p->data[0], p->data[699]);
    EXPECT_EQ(p->data[0] % 16, p->entropy) << "packet i went on EV i";
    EXPECT_EQ(p->flags, 0);
  }
  b->free(const_cast<PacketBuf**>(got.data()), got.size());
  EXPECT_EQ(fabric.daemon->fabric_stats().path_packets, (std::vector<uint64_t>{4, 4, 4, 4}));
}

// What the fabric did to a packet travels with it: trimmed to its headers, or marked CE
// by a queue above its ECN threshold.
TEST(FabricDatapath, trims_and_congestion_marks_reach_the_receiver) {
  sim::FabricDaemonConfig c = quiet_fabric();
  c.fabric.faults.trim = 1.0;
  c.fabric.host_link.ecn_threshold_bytes = 0;  // any backlog marks
  // 8 ms a packet on the sender's link: however the daemon's receives split the burst,
  // the packets behind the first find it still there.
  c.fabric.host_link.gbps = 0.001;
  RunningFabric fabric(c);
  ASSERT_TRUE(fabric.daemon);
  auto a = open_ok(fabric.address()), b = open_ok(fabric.address());
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 16> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 1000));
  a->tx_burst(out.data(), out.size());
  const auto got = test::receive(*b, out.size());
  ASSERT_EQ(got.size(), out.size());
  size_t marked = 0;
  for (PacketBuf* p : got) {
    EXPECT_EQ(p->len, sim::kTrimmedBytes);
    EXPECT_TRUE(p->flags & PacketBuf::kTrimmed);
    if (p->flags & PacketBuf::kEcnCe) ++marked;
  }
  EXPECT_GT(marked, 0u) << "a burst of 16 queues behind its first packet";
  b->free(const_cast<PacketBuf**>(got.data()), got.size());
}

// IPv6 throughout: the daemon, the endpoints and the addresses in the relay headers.
TEST(FabricDatapath, works_over_ipv6) {
  sim::FabricDaemonConfig c = quiet_fabric();
  c.address = "::1";
  RunningFabric fabric(c);
  ASSERT_TRUE(fabric.daemon);
  FabricDatapathConfig dc;
  dc.fabric = "[::1]:" + std::to_string(fabric.daemon->address().port);
  dc.address = "::1";
  std::string error;
  auto a = FabricDatapath::open(dc, error), b = FabricDatapath::open(dc, error);
  ASSERT_TRUE(a && b) << error;
  std::array<PacketBuf*, 4> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 300));
  a->tx_burst(out.data(), out.size());
  const auto got = test::receive(*b, out.size());
  ASSERT_EQ(got.size(), out.size());
  for (PacketBuf* p : got) EXPECT_EQ(p->peer, a->local_address());
  b->free(const_cast<PacketBuf**>(got.data()), got.size());
}

// Only the daemon speaks for the fabric: a datagram from anyone else, however well
// formed, is dropped and counted.
TEST(FabricDatapath, a_datagram_from_anyone_but_the_fabric_is_dropped) {
  RunningFabric fabric(quiet_fabric());
  ASSERT_TRUE(fabric.daemon);
  auto b = open_ok(fabric.address());
  ASSERT_TRUE(b);
  const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  std::array<uint8_t, kRelayHeaderBytes + 10> forged{};
  encode_relay_header({fabric.daemon->address(), 0, 0}, forged.data());
  sockaddr_storage to;
  const socklen_t len = to_sockaddr(b->local_address(), to);
  ASSERT_EQ(::sendto(s, forged.data(), forged.size(), 0, reinterpret_cast<sockaddr*>(&to), len),
            static_cast<ssize_t>(forged.size()));
  ::close(s);
  EXPECT_TRUE(b->wait(Duration::seconds(5)));
  std::array<PacketBuf*, 4> in{};
  EXPECT_EQ(b->rx_burst(in.data(), in.size()), 0u);
  EXPECT_EQ(b->stats().rx_not_from_fabric, 1u);
}

// The daemon sends only to this host's own addresses: a packet for another machine is
// refused at its door, so no local process can make it a reflector.
TEST(FabricDatapath, the_fabric_refuses_to_deliver_off_this_host) {
  RunningFabric fabric(quiet_fabric());
  ASSERT_TRUE(fabric.daemon);
  auto a = open_ok(fabric.address());
  ASSERT_TRUE(a);
  std::array<PacketBuf*, 1> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), *parse_ip("192.0.2.1", 4800), 100));
  a->tx_burst(out.data(), out.size());
  const Time deadline = monotonic_now() + Duration::seconds(10);
  while (fabric.daemon->relay().stats().not_allowed == 0 && monotonic_now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(fabric.daemon->relay().stats().not_allowed, 1u);
  EXPECT_EQ(fabric.daemon->relay().stats().taken, 0u);
}

// A long-running spray-fabric outlives its endpoints: once every host is taken, those of
// endpoints gone quiet go to new ones (here a 2-host fabric carries a second pair).
TEST(FabricDatapath, endpoints_that_went_away_leave_their_hosts_to_new_ones) {
  sim::FabricDaemonConfig c = quiet_fabric();
  c.fabric.hosts = 2;
  c.host_idle = Duration::milliseconds(20);
  RunningFabric fabric(c);
  ASSERT_TRUE(fabric.daemon);
  // One burst from a new `a` to a new `b`; true when all of it arrives from `a`.
  const auto burst_crosses = [&] {
    auto a = open_ok(fabric.address()), b = open_ok(fabric.address());
    if (!a || !b) return false;
    std::array<PacketBuf*, 8> out{};
    if (!test::make_burst(*a, std::span(out), b->local_address(), 300)) return false;
    a->tx_burst(out.data(), out.size());
    const auto got = test::receive(*b, out.size());
    bool from_a = true;
    for (PacketBuf* p : got) from_a = from_a && p->peer == a->local_address();
    b->free(const_cast<PacketBuf**>(got.data()), got.size());
    return got.size() == out.size() && from_a;
  };
  ASSERT_TRUE(burst_crosses());
  EXPECT_EQ(fabric.daemon->relay().stats().hosts_reclaimed, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // both hosts idle 20 ms
  EXPECT_TRUE(burst_crosses()) << "a full fabric refused the second pair";
  EXPECT_EQ(fabric.daemon->relay().stats().hosts_reclaimed, 2u);
  EXPECT_EQ(fabric.daemon->relay().stats().no_host_left, 0u);
}

// Two engines through a fabric that does everything a bad network does at once, and a
// path that goes down for good mid-run: every message arrives whole. The fabric's
// counters show each fault really happened.
TEST(FabricDatapath, transfers_arrive_intact_through_every_fault_at_once) {
  sim::FabricDaemonConfig c = quiet_fabric();
  c.fabric.faults.loss = 0.02;
  c.fabric.faults.duplicate = 0.02;
  c.fabric.faults.corrupt = 0.01;
  c.fabric.faults.reorder = 0.05;
  c.fabric.faults.reorder_delay = Duration::microseconds(300);
  c.fabric.faults.trim = 0.02;
  c.fabric.seed = 7;
  c.outages.push_back({.path = 2, .from = Duration::milliseconds(20), .until = {INT64_MAX}});
  RunningFabric fabric(c);
  ASSERT_TRUE(fabric.daemon);
  auto a = open_ok(fabric.address()), b = open_ok(fabric.address());
  ASSERT_TRUE(a && b);
  engine::EngineConfig e = engine::real_time_engine_config();
  e.pds.cc.base_rtt = Duration::microseconds(75);
  e.pds.max_retries = 64;  // 2 % loss and a dead path: give PDS room, the test has a deadline
  test::transfer_in_real_time(*a, *b, {1, 4000, 65536, 300'000, 1 << 20, 3'000'001}, e,
                              Duration::seconds(60));
  const sim::FabricStats& s = fabric.daemon->fabric_stats();
  EXPECT_GT(s.lost, 0u);
  EXPECT_GT(s.duplicated, 0u);
  EXPECT_GT(s.dropped_fcs, 0u);
  EXPECT_GT(s.reordered, 0u);
  EXPECT_GT(s.trimmed, 0u);
  EXPECT_GT(s.dropped_path_down, 0u);
  EXPECT_EQ(fabric.daemon->relay().stats().malformed, 0u);
}

}  // namespace
}  // namespace spray::dp
