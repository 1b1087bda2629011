// FabricRelay in virtual time: what spray-fabric does with each datagram, without
// sockets. Addresses are processes' UDP addresses; time is whatever the test says.
#include "nic_sim/fabric_relay.h"

#include <gtest/gtest.h>

#include <vector>

#include "transport/datapath/udp/socket_address.h"

namespace spray::sim {
namespace {

dp::NetAddr process(uint16_t port) {
  return *dp::parse_ip("127.0.0.1", port);
}

// A datagram as a FabricDatapath sends it: relay header naming `to`, then `len` bytes
// of `fill`.
std::vector<uint8_t> datagram(const dp::NetAddr& to, uint16_t entropy, size_t len,
                              uint8_t fill = 0xab) {
  std::vector<uint8_t> d(dp::kRelayHeaderBytes + len, fill);
  dp::encode_relay_header({to, entropy, 0}, d.data());
  return d;
}

struct Delivered {
  dp::NetAddr to;
  dp::RelayHeader header;
  std::vector<uint8_t> bytes;
};

// Everything the relay delivers by `at`, collected in batches of `batch`.
std::vector<Delivered> collect_all(FabricRelay& relay, Time at, size_t batch = 4) {
  std::vector<Delivered> got;
  std::vector<FabricRelay::Outgoing> out(batch);
  for (;;) {
    const size_t n = relay.collect(at, out);
    for (size_t i = 0; i < n; ++i) {
      Delivered d{out[i].to, {}, {out[i].packet->data, out[i].packet->data + out[i].packet->len}};
      EXPECT_TRUE(dp::decode_relay_header(out[i].header.data(), out[i].header.size(), d.header));
      got.push_back(d);
    }
    relay.release({out.data(), n});
    if (n < batch) return got;
  }
}

FabricConfig small_fabric(uint32_t hosts = 4) {
  FabricConfig c;
  c.hosts = hosts;
  c.paths = 4;
  c.mtu_bytes = 2048;
  c.buffers = 1024;
  return c;
}

const Time kLater = Time{} + Duration::milliseconds(1);

TEST(FabricRelay, a_packet_reaches_its_destination_naming_its_source_and_entropy) {
  FabricRelay relay(small_fabric());
  const dp::NetAddr a = process(5000), b = process(5008);
  ASSERT_TRUE(relay.take(datagram(b, 6, 1000, 0x5c), a, Time{}));
  EXPECT_TRUE(collect_all(relay, Time{}).empty()) << "links take time";
  const auto got = collect_all(relay, kLater);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, b);
  EXPECT_EQ(got[0].header.other, a);
  EXPECT_EQ(got[0].header.entropy, 6);
  EXPECT_EQ(got[0].header.flags, 0);
  EXPECT_EQ(got[0].bytes, std::vector<uint8_t>(1000, 0x5c));
  EXPECT_EQ(relay.hosts_in_use(), 2u);
  EXPECT_EQ(relay.fabric().pool().available(), relay.fabric().pool().capacity()) << "released";
}

TEST(FabricRelay, the_entropy_value_picks_the_path) {
  FabricRelay relay(small_fabric());
  const dp::NetAddr a = process(5000), b = process(5008);
  for (uint16_t ev = 0; ev < 8; ++ev) ASSERT_TRUE(relay.take(datagram(b, ev, 100), a, Time{}));
  EXPECT_EQ(collect_all(relay, kLater).size(), 8u);
  EXPECT_EQ(relay.fabric().stats().path_packets, (std::vector<uint64_t>{2, 2, 2, 2}));
}

TEST(FabricRelay, a_path_that_is_down_loses_what_takes_it) {
  FabricRelay relay(small_fabric());
  relay.fabric().set_path_up(1, false);
  const dp::NetAddr a = process(5000), b = process(5008);
  for (uint16_t ev = 0; ev < 8; ++ev) ASSERT_TRUE(relay.take(datagram(b, ev, 100), a, Time{}));
  const auto got = collect_all(relay, kLater);
  EXPECT_EQ(got.size(), 6u);
  for (const Delivered& d : got) EXPECT_NE(d.header.entropy % 4, 1);
  EXPECT_EQ(relay.fabric().stats().dropped_path_down, 2u);
}

TEST(FabricRelay, a_path_is_down_while_any_of_its_outages_lasts) {
  FabricRelay relay(small_fabric());
  const auto ms = [](int64_t v) { return Duration::milliseconds(v); };
  const std::vector<PathOutage> outages{{1, ms(10), ms(20)},
                                        {1, ms(30), ms(40)},
                                        {2, ms(15), Duration{INT64_MAX}},
                                        {1, ms(35), ms(50)}};
  const auto up_at = [&](int64_t t) {
    apply_outages(relay.fabric(), outages, ms(t));
    return std::vector<bool>{relay.fabric().path_up(0), relay.fabric().path_up(1),
                             relay.fabric().path_up(2)};
  };
  EXPECT_EQ(up_at(5), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(up_at(12), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(up_at(25), (std::vector<bool>{true, true, false})) << "between path 1's outages";
  EXPECT_EQ(up_at(33), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(up_at(45), (std::vector<bool>{true, false, false})) << "the overlapping one lasts";
  EXPECT_EQ(up_at(60), (std::vector<bool>{true, true, false})) << "path 2 is down for good";
}

TEST(FabricRelay, a_trimmed_packet_arrives_as_its_headers_and_says_so) {
  FabricConfig c = small_fabric();
  c.faults.trim = 1.0;
  FabricRelay relay(c);
  const dp::NetAddr a = process(5000), b = process(5008);
  ASSERT_TRUE(relay.take(datagram(b, 0, 1500), a, Time{}));
  const auto got = collect_all(relay, kLater);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bytes.size(), kTrimmedBytes);
  EXPECT_EQ(got[0].header.flags, dp::PacketBuf::kTrimmed);
}

TEST(FabricRelay, hosts_are_given_out_on_first_sight_and_no_further_than_configured) {
  FabricRelay relay(small_fabric(/*hosts=*/3));
  const dp::NetAddr a = process(5000), b = process(5008), c = process(5016), d = process(5024);
  EXPECT_TRUE(relay.take(datagram(b, 0, 10), a, Time{}));  // a and b
  EXPECT_TRUE(relay.take(datagram(a, 0, 10), c, Time{}));  // c
  EXPECT_FALSE(relay.take(datagram(d, 0, 10), a, Time{})) << "no host left for d";
  EXPECT_FALSE(relay.take(datagram(a, 0, 10), d, Time{}));
  EXPECT_EQ(relay.stats().no_host_left, 2u);
  EXPECT_EQ(relay.hosts_in_use(), 3u);
  EXPECT_EQ(relay.address_of(2), c);
  EXPECT_EQ(collect_all(relay, kLater).size(), 2u);
}

// Processes come and go: once every host is taken, a new address gets the host idle
// longest, when it has been idle for host_idle and its last packet has left the fabric.
TEST(FabricRelay, a_new_address_gets_the_host_idle_longest_once_every_host_is_taken) {
  const Duration idle = Duration::milliseconds(10);
  FabricRelay relay(small_fabric(/*hosts=*/3), idle);
  const dp::NetAddr a = process(5000), b = process(5008), c = process(5016), d = process(5024);
  const Time t0{}, t1 = t0 + Duration::milliseconds(5);
  ASSERT_TRUE(relay.take(datagram(b, 0, 10), a, t0));  // a and b
  ASSERT_TRUE(relay.take(datagram(a, 0, 10), c, t1));  // c; a active again
  EXPECT_EQ(collect_all(relay, t1 + Duration::milliseconds(1)).size(), 2u);
  EXPECT_FALSE(relay.take(datagram(a, 0, 10), d, t0 + idle - Duration::nanoseconds(1)))
      << "b, idle longest, has not been idle long enough yet";
  EXPECT_EQ(relay.stats().no_host_left, 1u);

  const Time t2 = t0 + idle;
  ASSERT_TRUE(relay.take(datagram(a, 0, 10, 0x22), d, t2));
  EXPECT_EQ(relay.stats().hosts_reclaimed, 1u);
  EXPECT_EQ(relay.address_of(1), d) << "b's host";
  auto got = collect_all(relay, t2 + Duration::milliseconds(1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, a);
  EXPECT_EQ(got[0].header.other, d);
  EXPECT_EQ(got[0].bytes, std::vector<uint8_t>(10, 0x22));

  // b comes back as a newcomer and takes c's host (idle since t1), not a's or d's.
  ASSERT_TRUE(relay.take(datagram(d, 0, 10, 0x33), b, t1 + idle));
  EXPECT_EQ(relay.stats().hosts_reclaimed, 2u);
  EXPECT_EQ(relay.address_of(2), b);
  got = collect_all(relay, t1 + idle + Duration::milliseconds(1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, d);
  EXPECT_EQ(got[0].header.other, b);
  EXPECT_EQ(relay.hosts_in_use(), 3u);
}

// A host whose last packet may still be on a link, or in a ring collect() has not
// emptied, keeps its address: that packet reaches the process it was meant for, and a
// newcomer never receives it or is named as its source.
TEST(FabricRelay, a_host_keeps_its_address_while_a_packet_of_it_may_remain) {
  FabricConfig config = small_fabric(/*hosts=*/2);
  config.host_link.propagation = Duration::milliseconds(40);  // 80 ms up and down
  FabricRelay relay(config, Duration::milliseconds(1));
  const dp::NetAddr a = process(5000), b = process(5008), d = process(5024);
  ASSERT_TRUE(relay.take(datagram(b, 0, 10, 0x11), a, Time{}));
  const Time on_the_way = Time{} + Duration::milliseconds(10);
  EXPECT_FALSE(relay.take(datagram(a, 0, 10), d, on_the_way)) << "a's packet is on a link";

  const Time in_the_ring = Time{} + Duration::milliseconds(200);
  relay.fabric().advance_to(in_the_ring);  // delivered to b's ring, not collected
  EXPECT_FALSE(relay.take(datagram(a, 0, 10), d, in_the_ring)) << "it waits in b's ring";
  EXPECT_EQ(relay.stats().hosts_reclaimed, 0u);

  auto got = collect_all(relay, in_the_ring);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, b) << "the process it was sent to";
  EXPECT_EQ(got[0].header.other, a);
  EXPECT_EQ(got[0].bytes, std::vector<uint8_t>(10, 0x11));

  ASSERT_TRUE(relay.take(datagram(a, 0, 10, 0x44), d, in_the_ring)) << "now both may go";
  EXPECT_EQ(relay.stats().hosts_reclaimed, 2u) << "d took a's host, and a then b's";
  got = collect_all(relay, in_the_ring + Duration::milliseconds(200));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to, a);
  EXPECT_EQ(got[0].header.other, d);
}

// A new destination must pass the check (the daemon's: an address of this host); one
// that has sent to the fabric itself is known and needs none.
TEST(FabricRelay, a_new_destination_must_pass_the_check) {
  FabricRelay relay(small_fabric());
  relay.check_new_destinations([](const dp::NetAddr& a) { return a.ip[3] == 1; });
  const dp::NetAddr a = process(5000);
  const dp::NetAddr elsewhere = *dp::parse_ip("127.0.0.2", 5000);
  EXPECT_FALSE(relay.take(datagram(elsewhere, 0, 10), a, Time{}));
  EXPECT_EQ(relay.stats().not_allowed, 1u);
  EXPECT_EQ(relay.hosts_in_use(), 0u) << "nothing given out for a refused datagram";
  EXPECT_TRUE(relay.take(datagram(a, 0, 10), elsewhere, Time{})) << "a source needs no check";
  EXPECT_TRUE(relay.take(datagram(elsewhere, 0, 10), a, Time{})) << "now it is known";
  EXPECT_EQ(collect_all(relay, kLater).size(), 2u);
}

TEST(FabricRelay, malformed_and_oversized_datagrams_are_refused_and_counted) {
  FabricRelay relay(small_fabric());
  const dp::NetAddr a = process(5000), b = process(5008);
  std::vector<uint8_t> d = datagram(b, 0, 10);
  EXPECT_FALSE(relay.take({d.data(), dp::kRelayHeaderBytes - 1}, a, Time{})) << "too short";
  EXPECT_FALSE(relay.take({d.data(), dp::kRelayHeaderBytes}, a, Time{})) << "no packet";
  d[0] = 'X';
  EXPECT_FALSE(relay.take(d, a, Time{})) << "not our magic";
  d = datagram(b, 0, 10);
  d[2] = dp::kRelayVersion + 1;
  EXPECT_FALSE(relay.take(d, a, Time{})) << "another version";
  d = datagram(b, 0, 10);
  d[8] = 0x51;  // the simulator's own family: not a process address
  EXPECT_FALSE(relay.take(d, a, Time{}));
  EXPECT_EQ(relay.stats().malformed, 5u);
  EXPECT_FALSE(relay.take(datagram(b, 0, 2049), a, Time{}));
  EXPECT_EQ(relay.stats().too_large, 1u);
  EXPECT_TRUE(relay.take(datagram(b, 0, 2048), a, Time{}));
  EXPECT_EQ(collect_all(relay, kLater).size(), 1u);
  EXPECT_EQ(relay.stats().taken, 1u);
}

TEST(FabricRelay, a_fabric_out_of_buffers_refuses_at_the_door) {
  FabricConfig c = small_fabric();
  c.buffers = 3;
  FabricRelay relay(c);
  const dp::NetAddr a = process(5000), b = process(5008);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(relay.take(datagram(b, 0, 10), a, Time{}));
  EXPECT_FALSE(relay.take(datagram(b, 0, 10), a, Time{}));
  EXPECT_EQ(relay.stats().no_buffer, 1u);
  EXPECT_EQ(collect_all(relay, kLater).size(), 3u);
  EXPECT_TRUE(relay.take(datagram(b, 0, 10), a, kLater)) << "buffers came back";
}

// collect() takes the hosts in turn, so one busy destination does not starve the rest.
TEST(FabricRelay, collect_serves_destinations_in_turn) {
  FabricRelay relay(small_fabric());
  const dp::NetAddr a = process(5000), b = process(5008), c = process(5016);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(relay.take(datagram(b, 0, 10), a, Time{}));
  ASSERT_TRUE(relay.take(datagram(c, 0, 10), a, Time{}));
  std::vector<FabricRelay::Outgoing> out(4);
  size_t n = relay.collect(kLater, out);
  ASSERT_EQ(n, 4u);
  relay.release({out.data(), n});
  n = relay.collect(kLater, out);
  bool c_served = false;
  for (size_t i = 0; i < n; ++i) c_served = c_served || out[i].to == c;
  relay.release({out.data(), n});
  EXPECT_TRUE(c_served) << "c waited behind b twice";
}

}  // namespace
}  // namespace spray::sim
