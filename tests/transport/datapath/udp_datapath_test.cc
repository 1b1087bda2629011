// The kernel UDP datapath on loopback: configuration errors, batched I/O with the
// entropy value in the source port, waiting, and whole engines transferring over it.
#include "transport/datapath/udp/udp_datapath.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "transport/datapath/clock.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

std::unique_ptr<UdpDatapath> open_ok(UdpConfig c) {
  std::string error;
  auto d = UdpDatapath::open(c, error);
  EXPECT_TRUE(d) << error;
  return d;
}

TEST(UdpDatapath, open__picks_an_aligned_base_port) {
  UdpConfig c;
  c.entropy_ports = 8;
  auto d = open_ok(c);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->local_address().port % 8, 0);
  EXPECT_EQ(d->local_address().family, NetAddr::Family::kIpv4);
}

TEST(UdpDatapath, open__reports_a_port_in_use) {
  auto first = open_ok(UdpConfig{});
  ASSERT_TRUE(first);
  UdpConfig c;
  c.port = first->local_address().port;
  std::string error;
  EXPECT_FALSE(UdpDatapath::open(c, error));
  EXPECT_NE(error.find("already in use"), std::string::npos) << error;
}

TEST(UdpDatapath, open__reports_an_address_that_is_not_local) {
  UdpConfig c;
  c.address = "192.0.2.1";  // TEST-NET-1: never assigned to this host
  std::string error;
  EXPECT_FALSE(UdpDatapath::open(c, error));
  EXPECT_NE(error.find("not an address of this host"), std::string::npos) << error;
}

TEST(UdpDatapath, open__rejects_bad_configuration) {
  std::string error;
  UdpConfig c;
  c.entropy_ports = 3;
  EXPECT_FALSE(UdpDatapath::open(c, error));
  EXPECT_NE(error.find("power of two"), std::string::npos);
  c = UdpConfig{};
  c.port = 40001;  // not a multiple of 8
  EXPECT_FALSE(UdpDatapath::open(c, error));
  EXPECT_NE(error.find("multiple"), std::string::npos);
  c = UdpConfig{};
  c.address = "not-an-address";
  EXPECT_FALSE(UdpDatapath::open(c, error));
  c = UdpConfig{};
  c.interface = "no-such-device0";
  EXPECT_FALSE(UdpDatapath::open(c, error));
  EXPECT_NE(error.find("no-such-device0"), std::string::npos);
}

TEST(UdpDatapath, burst__carries_the_entropy_value_in_the_source_port) {
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 32> out{};
  ASSERT_EQ(a->alloc(out.data(), out.size()), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i]->len = 100;
    std::fill(out[i]->data, out[i]->data + 100, static_cast<uint8_t>(i));
    out[i]->peer = b->local_address();
    out[i]->entropy = static_cast<uint16_t>(i);
  }
  a->tx_burst(out.data(), out.size());
  EXPECT_LE(a->stats().tx_syscalls, 8u);  // one sendmmsg per source port, not per packet
  ASSERT_TRUE(b->wait(Duration::milliseconds(500)));
  std::set<uint16_t> evs;
  size_t got = 0;
  std::array<PacketBuf*, 32> in{};
  for (int tries = 0; tries < 100 && got < 32; ++tries) {
    const size_t n = b->rx_burst(in.data(), in.size());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(in[i]->peer, a->local_address());  // the sender's base, whatever EV
      EXPECT_EQ(in[i]->len, 100u);
      EXPECT_EQ(in[i]->data[0] % 8, in[i]->entropy);  // sent with EV i, from port base + i%8
      evs.insert(in[i]->entropy);
    }
    b->free(in.data(), n);
    got += n;
    if (n == 0) b->wait(Duration::milliseconds(10));
  }
  EXPECT_EQ(got, 32u);
  EXPECT_EQ(evs.size(), 8u);
}

TEST(UdpDatapath, wait__times_out_when_nothing_arrives) {
  auto a = open_ok(UdpConfig{});
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->wait(Duration::milliseconds(5)));
}

// Two engines over loopback UDP, in real time.
void transfer_over(const std::string& address) {
  UdpConfig c;
  c.address = address;
  c.mtu_bytes = 8192;  // loopback carries large datagrams
  auto da = open_ok(c);
  auto db = open_ok(c);
  ASSERT_TRUE(da && db);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  engine::Engine<UdpDatapath> a(*da, ec), b(*db, ec);
  const auto to_b = a.add_peer(db->local_address());
  const std::vector<uint64_t> sizes = {0, 1, 1000, 70000, 8 << 20};
  std::vector<std::vector<uint8_t>> src(sizes.size()), dst(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    src[i].resize(sizes[i]);
    std::iota(src[i].begin(), src[i].end(), static_cast<uint8_t>(i));
    dst[i].assign(sizes[i], 0);
    ASSERT_EQ(b.post_recv({dst[i].data(), sizes[i], i}), Status::kOk);
    ASSERT_EQ(a.send(to_b, src[i].data(), sizes[i], i), Status::kOk);
  }
  size_t sent = 0, received = 0;
  const Time deadline = monotonic_now() + Duration::seconds(20);
  while ((sent < sizes.size() || received < sizes.size()) && monotonic_now() < deadline) {
    a.progress(monotonic_now());
    b.progress(monotonic_now());
    ses::Completion comp;
    while (a.poll_completion(comp)) {
      EXPECT_EQ(comp.status, Status::kOk);
      ++sent;
    }
    while (b.poll_completion(comp)) {
      EXPECT_EQ(comp.status, Status::kOk);
      EXPECT_EQ(comp.length, sizes[comp.context]);
      ++received;
    }
  }
  ASSERT_EQ(sent, sizes.size());
  ASSERT_EQ(received, sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_TRUE(src[i] == dst[i]) << sizes[i];
}

TEST(UdpEngine, transfer__over_ipv4_loopback) {
  transfer_over("127.0.0.1");
}
TEST(UdpEngine, transfer__over_ipv6_loopback) {
  transfer_over("::1");
}

TEST(SocketAddress, parse__ipv4_and_ipv6_with_ports) {
  EXPECT_EQ(parse_ip_port("10.1.2.3:4793")->to_string(), "10.1.2.3:4793");
  EXPECT_EQ(parse_ip_port("[::1]:8")->to_string(), "[0:0:0:0:0:0:0:1]:8");
  EXPECT_FALSE(parse_ip_port("10.1.2.3"));
  EXPECT_FALSE(parse_ip_port("10.1.2.3:99999"));
  EXPECT_FALSE(parse_ip_port("host:80"));
  EXPECT_FALSE(parse_ip_port("[::1]80"));
}

}  // namespace
}  // namespace spray::dp
