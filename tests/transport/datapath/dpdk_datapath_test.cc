// The DPDK datapath in one process: pairs of ports joined by net_memif (a server and a
// client on one socket; one pair with memif's default buffers, one for jumbo frames), on
// --no-huge memory. Needs no NIC and no hugepages. Cross-process,
// af_packet, af_xdp and kernel-peer cases are in tests/integration/dpdk_transfers.sh.
#include "transport/datapath/dpdk/dpdk_datapath.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include <array>
#include <numeric>
#include <set>

#include "tests/support/mld_query_frame.h"
#include "tests/support/packet_burst.h"
#include "tests/support/real_time_transfer.h"
#include "transport/datapath/clock.h"
#include "transport/datapath/dpdk/ethernet_frame.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

const std::string& eal_args() {
  static const std::string args = [] {
    const std::string sock = fmt::format("/tmp/spray-dpdk-test-{}.sock", ::getpid());
    return fmt::format(
        "--no-huge -m 512 --no-shconf --no-pci --log-level=error -l 0 "
        "--vdev=net_memif0,role=server,socket={0},mac=02:00:00:00:00:01 "
        "--vdev=net_memif1,role=client,socket={0},mac=02:00:00:00:00:02 "
        "--vdev=net_memif2,role=server,socket={1},mac=02:00:00:00:00:03,bsize=9216 "
        "--vdev=net_memif3,role=client,socket={1},mac=02:00:00:00:00:04,bsize=9216",
        sock, sock + ".jumbo");
  }();
  return args;
}

// Ports 0 and 1 (default 2048-byte memif buffers) join 10.0.0.1 (MAC ...:01) and 10.0.0.2
// (...:02); ports 2 and 3 (9216-byte buffers, for jumbo frames) 10.0.1.1 (...:03) and
// 10.0.1.2 (...:04).
DpdkConfig config(int which, bool with_neighbour = true) {
  DpdkConfig c;
  c.eal_args = eal_args();
  c.port = fmt::format("net_memif{}", which);
  c.address = fmt::format("10.0.0.{}", which + 1);
  c.kernel_neighbours = false;
  if (with_neighbour)
    c.neighbours = {fmt::format("10.0.0.{}=02:00:00:00:00:0{}", 2 - which, 2 - which)};
  return c;
}

// The same memif ports 0 and 1 as fd00::1 and fd00::2.
DpdkConfig ipv6_config(int which, bool with_neighbour = true) {
  DpdkConfig c = config(which, false);
  c.address = fmt::format("fd00::{}", which + 1);
  c.mtu_bytes = 1452;  // 1500 - IPv6 - UDP
  if (with_neighbour)
    c.neighbours = {fmt::format("fd00::{}=02:00:00:00:00:0{}", 2 - which, 2 - which)};
  return c;
}

DpdkConfig jumbo_config(int which) {
  DpdkConfig c = config(which);
  c.port = fmt::format("net_memif{}", which + 2);
  c.address = fmt::format("10.0.1.{}", which + 1);
  c.neighbours = {fmt::format("10.0.1.{}=02:00:00:00:00:0{}", 2 - which, 4 - which)};
  c.mtu_bytes = 8972;  // 9014-byte frames
  return c;
}

std::unique_ptr<DpdkDatapath> open_ok(const DpdkConfig& c) {
  std::string error;
  auto d = DpdkDatapath::open(c, error);
  EXPECT_TRUE(d) << error;
  return d;
}

// Opens both ports and waits for the memif link between them.
// Both ends of the in-process memif link, torn down one end at a time: the memif PMD
// handles the peer's disconnect on DPDK's interrupt thread, and closing the second end
// while that thread still works on the first crashed inside DPDK under CPU
// oversubscription (several times in 80 runs with three busy loops on two cores).
// With `client_first_link_wait`, the client's first bursts wait for the link instead.
struct MemifPair {
  explicit MemifPair(bool with_neighbours, Duration client_first_link_wait = {})
      : MemifPair(config(0, with_neighbours),
                  with_first_link_wait(config(1, with_neighbours), client_first_link_wait)) {}
  // Any two ports of one memif link, the server end first.
  MemifPair(const DpdkConfig& server, const DpdkConfig& client)
      : a(open_ok(server)), b(open_ok(client)) {
    if (client.first_link_wait.ps > 0) return;
    EXPECT_TRUE(a && b && a->await_link(Duration::seconds(10)) &&
                b->await_link(Duration::seconds(10)))
        << "memif link did not come up";
  }
  static DpdkConfig with_first_link_wait(DpdkConfig c, Duration wait) {
    c.first_link_wait = wait;
    return c;
  }
  MemifPair(const MemifPair&) = delete;
  MemifPair& operator=(const MemifPair&) = delete;
  ~MemifPair() {
    b.reset();
    if (a) {
      const Time deadline = monotonic_now() + Duration::seconds(2);
      while (a->link_up() && monotonic_now() < deadline) a->wait(Duration::milliseconds(1));
    }
    a.reset();
  }
  std::unique_ptr<DpdkDatapath> a, b;
};

MemifPair open_pair(bool with_neighbours = true) {
  return MemifPair(with_neighbours);
}

// Receives until `want` packets arrived at `d` or a second passed; frees them.
template <class Check>
size_t receive(DpdkDatapath& d, size_t want, Check&& check) {
  std::array<PacketBuf*, 64> in{};
  size_t got = 0;
  const Time deadline = monotonic_now() + Duration::seconds(1);
  while (got < want && monotonic_now() < deadline) {
    const size_t n = d.rx_burst(in.data(), in.size());
    for (size_t i = 0; i < n; ++i) check(*in[i]);
    d.free(in.data(), n);
    got += n;
  }
  return got;
}

// One 10-byte packet from `from` to `to`.
void send_ten_bytes(DpdkDatapath& from, const NetAddr& to) {
  PacketBuf* p = nullptr;
  ASSERT_EQ(from.alloc(&p, 1), 1u);
  p->len = 10;
  p->peer = to;
  from.tx_burst(&p, 1);
}

TEST(DpdkDatapath, open__rejects_bad_configuration) {
  std::string error;
  DpdkConfig c = config(0);
  c.address = "not-an-address";
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("IPv4 or IPv6"), std::string::npos) << error;
  c.address = "ff02::1";
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("unicast"), std::string::npos) << error;
  c = ipv6_config(0);
  c.mtu_bytes = 8973;  // 9000 - IPv6 - UDP is 8952
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("256..8952"), std::string::npos) << error;
  c = config(0);
  c.entropy_ports = 6;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("power of two"), std::string::npos) << error;
  c = config(0);
  c.udp_port = 4801;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("multiple"), std::string::npos) << error;
  c = config(0);
  c.mtu_bytes = 20000;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("mtu"), std::string::npos) << error;
  c = config(0);
  c.neighbours = {"10.0.0.2"};
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("IP=MAC"), std::string::npos) << error;
  EXPECT_TRUE(open_ok(config(0))) << "a failed open must release the port";
}

TEST(DpdkDatapath, open__names_an_unknown_port_and_lists_the_real_ones) {
  DpdkConfig c = config(0);
  c.port = "net_nothing0";
  std::string error;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("net_nothing0"), std::string::npos) << error;
  EXPECT_NE(error.find("net_memif1"), std::string::npos) << error;
  c.port.clear();  // two ports exist: which one is ambiguous
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("4 DPDK ports"), std::string::npos) << error;
}

// DPDK 22.11's memif mangles a frame chained over several of its buffers, so a frame
// longer than the port's buffers is refused at open, naming the bsize that would do.
TEST(DpdkDatapath, open__refuses_frames_longer_than_the_memif_buffers) {
  DpdkConfig c = config(0);
  c.mtu_bytes = 8972;
  std::string error;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("buffers of 2048 bytes cannot hold a 9014-byte frame"), std::string::npos)
      << error;
  EXPECT_NE(error.find("bsize=9014"), std::string::npos) << error;
  c.mtu_bytes = 2048 - 42;  // the longest frame that fits
  EXPECT_TRUE(open_ok(c));
}

TEST(DpdkDatapath, open__refuses_a_second_engine_on_one_port) {
  auto a = open_ok(config(0));
  std::string error;
  EXPECT_FALSE(DpdkDatapath::open(config(0), error));
  EXPECT_NE(error.find("already driven"), std::string::npos) << error;
}

TEST(DpdkDatapath, open__refuses_other_eal_parameters) {
  auto a = open_ok(config(0));  // the EAL is up
  DpdkConfig c = config(1);
  c.eal_args = "--no-huge";
  std::string error;
  EXPECT_FALSE(DpdkDatapath::open(c, error));
  EXPECT_NE(error.find("already initialised"), std::string::npos) << error;
}

TEST(DpdkDatapath, burst__carries_the_entropy_value_in_the_source_port) {
  auto [a, b] = open_pair();
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 32> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 100));
  EXPECT_EQ(a->tx_burst(out.data(), out.size()), out.size());
  std::set<uint16_t> evs;
  const NetAddr sender = a->local_address();  // the sender's base, whatever EV
  const size_t got = receive(*b, 32, [&](const PacketBuf& p) {
    EXPECT_EQ(p.peer, sender);
    EXPECT_EQ(p.len, 100u);
    EXPECT_EQ(p.data[0] % 8, p.entropy);
    EXPECT_EQ(p.data[99], p.data[0]);
    evs.insert(p.entropy);
  });
  EXPECT_EQ(got, 32u);
  EXPECT_EQ(a->stats().tx_packets, 32u);
  EXPECT_EQ(evs.size(), 8u);
  EXPECT_EQ(b->stats().rx_bad_checksum, 0u);
}

// A burst sent right after open, before the memif link is up, waits for the link when
// first_link_wait allows (the provider's DGRAM endpoints rely on it) and arrives whole.
// Without the wait such a burst is lost.
TEST(DpdkDatapath, burst__right_after_open_waits_for_the_first_link_up) {
  MemifPair pair(/*with_neighbours=*/true, /*client_first_link_wait=*/Duration::seconds(10));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 8> out{};
  ASSERT_TRUE(test::make_burst(*b, std::span(out), a->local_address(), 64));
  EXPECT_EQ(b->tx_burst(out.data(), out.size()), out.size());
  EXPECT_TRUE(b->link_up());
  EXPECT_EQ(b->stats().link_wait_expired, 0u);
  EXPECT_EQ(receive(*a, out.size(), [](const PacketBuf& p) { EXPECT_EQ(p.len, 64u); }), out.size());
  EXPECT_EQ(b->stats().tx_dropped, 0u);
}

TEST(DpdkDatapath, arp__resolves_an_unknown_neighbour) {
  auto [a, b] = open_pair(/*with_neighbours=*/false);
  ASSERT_TRUE(a && b);
  // Named captures: clang before 16 cannot capture structured bindings implicitly.
  auto send_one = [&a = a, &b = b] { send_ten_bytes(*a, b->local_address()); };
  send_one();  // no MAC for b yet: held, ARP request broadcast
  EXPECT_EQ(a->stats().tx_no_neighbour, 1u);
  EXPECT_EQ(a->stats().arp_requests_sent, 1u);
  EXPECT_EQ(receive(*b, 1, [](const PacketBuf&) {}), 0u);  // b answers the ARP, passes nothing up
  EXPECT_EQ(b->stats().arp_replies_sent, 1u);
  ASSERT_NE(b->neighbours().find(0x0a000001), nullptr) << "b learned a from the request";
  receive(*a, 1, [](const PacketBuf&) {});  // a takes in the reply and sends what it held
  ASSERT_NE(a->neighbours().find(0x0a000002), nullptr);
  EXPECT_EQ(*a->neighbours().find(0x0a000002), b->mac());
  EXPECT_EQ(receive(*b, 1, [](const PacketBuf& p) { EXPECT_EQ(p.len, 10u); }), 1u)
      << "the held packet, not lost";
  send_one();
  EXPECT_EQ(receive(*b, 1, [](const PacketBuf& p) { EXPECT_EQ(p.len, 10u); }), 1u);
  EXPECT_EQ(a->stats().tx_packets, 2u);
  EXPECT_EQ(a->stats().tx_held_dropped, 0u);
}

// Packets to a neighbour that never answers are held a second at most, and no more than
// kMaxHeldPackets at once, the oldest dropped first; nothing leaks (ASan).
TEST(DpdkDatapath, arp__drops_what_it_held_for_a_silent_neighbour) {
  auto [a, b] = open_pair(/*with_neighbours=*/false);
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 70> out{};
  NetAddr nobody = b->local_address();
  nobody.ip[3] = 99;  // 10.0.0.99: nobody answers for it
  ASSERT_TRUE(test::make_burst(*a, std::span(out), nobody, 10));
  a->tx_burst(out.data(), out.size());
  EXPECT_EQ(a->stats().tx_no_neighbour, 70u);
  EXPECT_EQ(a->stats().arp_requests_sent, 1u);
  EXPECT_EQ(a->stats().tx_held_dropped, 6u);  // 64 held
  usleep(1'100'000);
  a->tx_burst(out.data(), 0);  // a burst looks at the held packets' age
  EXPECT_EQ(a->stats().tx_held_dropped, 70u);
  EXPECT_EQ(a->stats().tx_packets, 0u);
}

TEST(DpdkDatapath, tx__drops_unsendable_packets_and_counts_them) {
  auto [a, b] = open_pair();
  ASSERT_TRUE(a && b);
  NetAddr ipv6_peer;
  ipv6_peer.family = NetAddr::Family::kIpv6;
  send_ten_bytes(*a, ipv6_peer);
  EXPECT_EQ(a->stats().tx_bad_address, 1u);
  EXPECT_EQ(a->stats().tx_packets, 0u);
}

// IPv6: the unknown neighbour is found by neighbour discovery. a's solicitation goes to
// b's solicited-node group; b answers it (learning a from its link-layer option), and a
// takes the answer because it asked.
TEST(DpdkDatapath, neighbour_discovery__resolves_an_unknown_ipv6_neighbour) {
  MemifPair pair(ipv6_config(0, false), ipv6_config(1, false));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  auto send_one = [&a = a, &b = b] { send_ten_bytes(*a, b->local_address()); };
  send_one();  // no MAC for b yet: held, solicitation sent
  EXPECT_EQ(a->stats().tx_no_neighbour, 1u);
  EXPECT_EQ(a->stats().nd_solicitations_sent, 1u);
  EXPECT_EQ(a->stats().arp_requests_sent, 0u);
  EXPECT_EQ(receive(*b, 1, [](const PacketBuf&) {}), 0u);  // b answers, passes nothing up
  EXPECT_EQ(b->stats().nd_advertisements_sent, 1u);
  ASSERT_NE(b->neighbours().find(*parse_ip_bytes("fd00::1")), nullptr) << "b learned a";
  EXPECT_EQ(*b->neighbours().find(*parse_ip_bytes("fd00::1")), a->mac());
  receive(*a, 1, [](const PacketBuf&) {});  // a takes in the advertisement, sends the held
  ASSERT_NE(a->neighbours().find(*parse_ip_bytes("fd00::2")), nullptr);
  EXPECT_EQ(*a->neighbours().find(*parse_ip_bytes("fd00::2")), b->mac());
  const NetAddr sender = a->local_address();
  auto check = [&](const PacketBuf& p) {
    EXPECT_EQ(p.len, 10u);
    EXPECT_EQ(p.peer, sender);
    EXPECT_EQ(p.peer.family, NetAddr::Family::kIpv6);
  };
  EXPECT_EQ(receive(*b, 1, check), 1u) << "the held packet, not lost";
  send_one();
  EXPECT_EQ(receive(*b, 1, check), 1u);
  EXPECT_EQ(a->stats().rx_malformed + b->stats().rx_malformed, 0u);
  EXPECT_EQ(a->stats().rx_bad_checksum + b->stats().rx_bad_checksum, 0u);
}

// Forged neighbour discovery from the link: an advertisement nobody asked for does not
// enter the table (a host cannot point our traffic for an address at itself unasked), a
// solicitation for another address or from duplicate address detection gets no answer.
TEST(DpdkDatapath, neighbour_discovery__ignores_what_it_did_not_ask_for) {
  MemifPair pair(ipv6_config(0, false), ipv6_config(1, false));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  const IpBytes fd00_1 = *parse_ip_bytes("fd00::1");
  const IpBytes fd00_2 = *parse_ip_bytes("fd00::2");
  const IpBytes fd00_9 = *parse_ip_bytes("fd00::9");
  std::array<uint8_t, kNeighbourFrameBytes> frame{};
  const MacAddress forger{0x02, 0, 0, 0, 0, 0x66};

  write_neighbour_advertisement(frame.data(), forger, fd00_9, a->mac(), fd00_1);
  ASSERT_TRUE(b->send_frame(frame.data(), kNeighbourFrameBytes));
  EXPECT_EQ(receive(*a, 1, [](const PacketBuf&) {}), 0u);
  EXPECT_EQ(a->stats().nd_advertisements_ignored, 1u);
  EXPECT_EQ(a->neighbours().find(fd00_9), nullptr);

  write_neighbour_solicitation(frame.data(), forger, fd00_2, fd00_9);  // not a's address
  ASSERT_TRUE(b->send_frame(frame.data(), kNeighbourFrameBytes));
  receive(*a, 1, [](const PacketBuf&) {});
  EXPECT_EQ(a->stats().nd_advertisements_sent, 0u);
  // b's MLD reports (to ff02::16) are not for a either.
  EXPECT_EQ(a->stats().rx_not_for_us, 1u + b->stats().mld_reports_sent);

  // Duplicate address detection comes from ::, and one with a link-layer option (as our
  // writer puts in) is invalid.
  write_neighbour_solicitation(frame.data(), forger, IpBytes{}, fd00_1);
  NeighbourMessage m;
  EXPECT_FALSE(parse_neighbour_discovery(frame.data(), kNeighbourFrameBytes, m))
      << "a DAD solicitation with a link-layer option is invalid";
  ASSERT_TRUE(b->send_frame(frame.data(), kNeighbourFrameBytes));
  receive(*a, 1, [](const PacketBuf&) {});
  EXPECT_EQ(a->stats().nd_advertisements_sent, 0u);
  EXPECT_EQ(a->stats().rx_malformed, 1u);
  EXPECT_EQ(a->neighbours().size(), 0u);
}

// RFC 4861, 7.2.5: once a neighbour's MAC is known, an advertisement without the
// override flag (a proxy's or an anycast address's) does not replace it, and one with
// the flag does; a configured MAC is replaced by neither.
TEST(DpdkDatapath, neighbour_discovery__replaces_a_known_mac_only_when_told_to_override) {
  DpdkConfig configured = ipv6_config(0, false);
  configured.neighbours = {"fd00::7=02:00:00:00:00:77"};
  MemifPair pair(configured, ipv6_config(1, false));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  const IpBytes fd00_1 = *parse_ip_bytes("fd00::1");
  const IpBytes fd00_2 = *parse_ip_bytes("fd00::2");
  const IpBytes fd00_7 = *parse_ip_bytes("fd00::7");
  send_ten_bytes(*a, b->local_address());                  // a solicits b, b answers, a learns b
  receive(*b, 1, [](const PacketBuf&) {});                 // the solicitation: nothing passes up
  send_ten_bytes(*b, a->local_address());                  // b learnt a from the solicitation
  ASSERT_EQ(receive(*a, 1, [](const PacketBuf&) {}), 1u);  // behind the advertisement
  ASSERT_NE(a->neighbours().find(fd00_2), nullptr);
  ASSERT_EQ(*a->neighbours().find(fd00_2), b->mac());
  EXPECT_EQ(receive(*b, 1, [](const PacketBuf&) {}), 1u) << "the held packet";

  std::array<uint8_t, kNeighbourFrameBytes> frame{};
  const MacAddress moved{0x02, 0, 0, 0, 0, 0x66};
  // An advertisement, then a packet from b: once a has the packet, it has handled the
  // advertisement (memif keeps order), with no timeout waited out. a and b are captured
  // by init-capture: Clang 14 cannot capture a structured binding.
  auto advertise = [&, &a = a, &b = b](const IpBytes& target, bool override_cached) {
    write_neighbour_advertisement(frame.data(), moved, target, a->mac(), fd00_1, override_cached);
    ASSERT_TRUE(b->send_frame(frame.data(), kNeighbourFrameBytes));
    send_ten_bytes(*b, a->local_address());
    ASSERT_EQ(receive(*a, 1, [](const PacketBuf&) {}), 1u);
  };
  advertise(fd00_2, /*override_cached=*/false);
  EXPECT_EQ(*a->neighbours().find(fd00_2), b->mac()) << "replaced without the override flag";
  EXPECT_EQ(a->stats().nd_advertisements_ignored, 1u);
  advertise(fd00_2, /*override_cached=*/true);
  EXPECT_EQ(*a->neighbours().find(fd00_2), moved) << "not replaced with the override flag";
  EXPECT_EQ(a->stats().nd_advertisements_ignored, 1u);
  advertise(fd00_7, /*override_cached=*/true);
  ASSERT_NE(a->neighbours().find(fd00_7), nullptr);
  EXPECT_EQ(*a->neighbours().find(fd00_7), (MacAddress{0x02, 0, 0, 0, 0, 0x77}))
      << "a configured neighbour was replaced";
  EXPECT_EQ(a->stats().rx_malformed, 0u);
}

// Polls `d` (freeing what arrives) until `done()` or `timeout` passed; whether done.
template <class Done>
bool poll_until(DpdkDatapath& d, Done&& done, Duration timeout = Duration::seconds(1)) {
  std::array<PacketBuf*, 64> in{};
  const Time deadline = monotonic_now() + timeout;
  while (!done() && monotonic_now() < deadline) d.free(in.data(), d.rx_burst(in.data(), in.size()));
  return done();
}

// MLD: an IPv6 endpoint joins its solicited-node group twice, a second apart (RFC 3810's
// robustness), and answers a query for that group or for all groups; it ignores queries
// for other groups and ones that fail RFC 3810's checks. (What the reports say, and that
// a switch takes them, is checked by mld_frame_test and dpdk_afpacket-bridge-mld.)
TEST(DpdkDatapath, mld__joins_its_group_and_answers_queries_for_it) {
  MemifPair pair(ipv6_config(0), ipv6_config(1));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  const DpdkStats& s = b->stats();
  EXPECT_TRUE(poll_until(
      *b, [&] { return s.mld_reports_sent == 2; }, Duration::seconds(3)))
      << s.mld_reports_sent;
  const uint64_t not_for_us = s.rx_not_for_us;
  auto query = [&a = a](const test::MldQueryFrame& q) {  // by name, as above
    ASSERT_TRUE(a->send_frame(q.bytes.data(), q.length()));
  };
  query(test::MldQueryFrame(28, *parse_ip_bytes("ff02::1:ff00:9"), 0));      // another group's
  query(test::MldQueryFrame(28, {}, 0, *parse_ip_bytes("ff02::1:ff00:9")));  // not to us
  test::MldQueryFrame forged(28, {}, 0);
  forged.bytes[test::MldQueryFrame::kIpAt + 7] = 64;  // routed here: no query from our link
  forged.seal();
  query(forged);
  EXPECT_TRUE(poll_until(*b, [&] { return s.rx_not_for_us == not_for_us + 2; }));
  EXPECT_EQ(s.mld_queries_received, 1u);
  EXPECT_EQ(s.mld_reports_sent, 2u) << "answered a query for another group";

  query(test::MldQueryFrame(28, {}, 0));  // general, answer at once
  EXPECT_TRUE(poll_until(*b, [&] { return s.mld_reports_sent == 3; }));
  query(test::MldQueryFrame(24, *parse_ip_bytes("ff02::1:ff00:2"), 0,
                            *parse_ip_bytes("ff02::1:ff00:2")));  // MLDv1, for our group
  EXPECT_TRUE(poll_until(*b, [&] { return s.mld_reports_sent == 4; }));
  EXPECT_EQ(s.mldv1_reports_sent, 1u) << "an MLDv1 query is answered in MLDv1";
  query(test::MldQueryFrame(28, {}, 0));  // MLDv2 again
  EXPECT_TRUE(poll_until(*b, [&] { return s.mld_reports_sent == 5; }));
  EXPECT_EQ(s.mldv1_reports_sent, 1u);
  EXPECT_EQ(s.mld_queries_received, 4u);
  EXPECT_EQ(s.rx_malformed, 0u);
}

// Thousands of forged and mangled frames (neighbour discovery, ARP, UDP, random bytes,
// each with bytes flipped or cut short) at an IPv6 endpoint: nothing crashes, every one
// is dropped and counted or handled, the configured neighbour keeps its MAC, and the
// endpoint then carries a transfer intact.
TEST(DpdkEngine, forged_frames_leave_an_ipv6_endpoint_working) {
  MemifPair pair(ipv6_config(0, /*with_neighbour=*/true), ipv6_config(1, false));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  const IpBytes ip_a = *parse_ip_bytes("fd00::1");
  const IpBytes ip_b = *parse_ip_bytes("fd00::2");
  const MacAddress forger{0x02, 0, 0, 0, 0, 0x66};
  std::vector<std::vector<uint8_t>> bases;
  std::vector<uint8_t> frame(kNeighbourFrameBytes);
  write_neighbour_solicitation(frame.data(), forger, ip_b, ip_a);
  bases.push_back(frame);
  write_neighbour_advertisement(frame.data(), forger, ip_b, a->mac(), ip_a);  // claims b
  bases.push_back(frame);
  frame.assign(kFrame6HeaderBytes + 100, 0x5a);
  write_udp6_frame(frame.data(), {forger, a->mac(), ip_b, ip_a, 4801, 4800}, 100,
                   Checksums::kSoftware);
  bases.push_back(frame);
  frame.assign(kArpFrameBytes, 0);
  write_arp_request(frame.data(), forger, 0x0a000002, 0x0a000001);
  bases.push_back(frame);
  bases.emplace_back(200, 0xa5);
  uint64_t state = 2026;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  std::array<PacketBuf*, 64> in{};
  size_t sent = 0;
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> f = bases[next() % bases.size()];
    for (uint32_t flips = next() % 5; flips > 0; --flips)
      f[next() % f.size()] ^= static_cast<uint8_t>(1u << (next() % 8));
    const auto length = next() % 8 == 0 ? next() % static_cast<uint32_t>(f.size() + 1)
                                        : static_cast<uint32_t>(f.size());
    sent += b->send_frame(f.data(), length);
    if (i % 32 == 31) a->free(in.data(), a->rx_burst(in.data(), in.size()));
  }
  for (int i = 0; i < 100; ++i) a->free(in.data(), a->rx_burst(in.data(), in.size()));
  EXPECT_GT(sent, 4000u);
  const DpdkStats& s = a->stats();
  EXPECT_GT(s.rx_malformed + s.rx_bad_checksum + s.rx_not_for_us, sent / 2);
  ASSERT_NE(a->neighbours().find(ip_b), nullptr);
  EXPECT_EQ(*a->neighbours().find(ip_b), b->mac()) << "the configured neighbour was replaced";
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  test::transfer_in_real_time(*a, *b, {1, 70000, 1 << 20}, ec);
}

TEST(DpdkDatapath, tx__an_ipv6_endpoint_sends_to_ipv6_peers_only) {
  MemifPair pair(ipv6_config(0), ipv6_config(1));
  auto& [a, b] = pair;
  ASSERT_TRUE(a && b);
  NetAddr ipv4_peer;
  ipv4_peer.family = NetAddr::Family::kIpv4;
  ipv4_peer.ip = {10, 0, 0, 2};
  ipv4_peer.port = 4800;
  send_ten_bytes(*a, ipv4_peer);
  EXPECT_EQ(a->stats().tx_bad_address, 1u);
  EXPECT_EQ(a->stats().tx_packets, 0u);
}

TEST(DpdkEngine, transfer__between_two_memif_ports) {
  auto [da, db] = open_pair();
  ASSERT_TRUE(da && db);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  test::transfer_in_real_time(*da, *db, {0, 1, 1000, 70000, 8 << 20}, ec);
  EXPECT_EQ(da->stats().rx_bad_checksum + db->stats().rx_bad_checksum, 0u);
}

// Jumbo frames between memif ports whose buffers hold them: every byte arrives, and in
// packets of up to 8972 bytes (an 8 MiB message takes about 950 of them; at the default
// 1472-byte MTU it took over 5700).
TEST(DpdkEngine, transfer__in_jumbo_frames_between_memif_ports) {
  MemifPair pair(jumbo_config(0), jumbo_config(1));
  auto& [da, db] = pair;
  ASSERT_TRUE(da && db && da->link_up() && db->link_up());
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  test::transfer_in_real_time(*da, *db, {1, 9000, 70000, 8 << 20}, ec);
  EXPECT_EQ(da->stats().rx_bad_checksum + db->stats().rx_bad_checksum, 0u);
  EXPECT_EQ(db->stats().rx_malformed, 0u);
  EXPECT_LT(da->stats().tx_packets + db->stats().tx_packets, 2000u);
}

// IPv6 end to end, neighbours found by discovery: every byte arrives.
TEST(DpdkEngine, transfer__over_ipv6_between_two_memif_ports) {
  MemifPair pair(ipv6_config(0, false), ipv6_config(1, false));
  auto& [da, db] = pair;
  ASSERT_TRUE(da && db);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  test::transfer_in_real_time(*da, *db, {0, 1, 1000, 70000, 8 << 20}, ec);
  EXPECT_EQ(da->stats().rx_bad_checksum + db->stats().rx_bad_checksum, 0u);
  EXPECT_EQ(da->stats().rx_malformed + db->stats().rx_malformed, 0u);
  EXPECT_GE(da->stats().nd_solicitations_sent + db->stats().nd_solicitations_sent, 1u);
}

}  // namespace
}  // namespace spray::dp
