// The kernel UDP datapath on loopback: configuration errors, batched I/O with the
// entropy value in the source port, waiting, and whole engines transferring over it.
#include "transport/datapath/udp/udp_datapath.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <set>
#include <span>

#include "tests/support/capped_child.h"
#include "tests/support/packet_burst.h"
#include "tests/support/real_time_transfer.h"
#include "tests/transport/datapath/open_udp.h"
#include "transport/datapath/clock.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

// Receives into `in` until `want` packets are there (or a second has passed), keeping
// them all; returns how many arrived.
size_t receive_held(UdpDatapath& d, std::span<PacketBuf*> in, size_t want) {
  size_t got = 0;
  for (int tries = 0; tries < 100 && got < want; ++tries) {
    const size_t n = d.rx_burst(in.data() + got, in.size() - got);
    got += n;
    if (n == 0) d.wait(Duration::milliseconds(10));
  }
  return got;
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

// Buffers that cannot be had are an error from open, not an exception or a crash, and
// the sockets it had bound are closed. A child process with a capped address space asks
// for 4 GiB of receive buffers.
TEST(UdpDatapath, open__reports_buffers_it_cannot_allocate_and_frees_its_ports) {
  if (!test::kCappedChildWorks) GTEST_SKIP() << "a sanitizer build cannot cap memory";
  UdpConfig small;
  small.gro = false;
  small.buffers = 16;
  std::string error;
  uint16_t port = 0;
  {
    auto probe = UdpDatapath::open(small, error);
    ASSERT_TRUE(probe) << error;
    port = probe->local_address().port;  // free again once probe is closed
  }
  const test::ChildEnd end = test::run_in_capped_child(rlim_t{512} << 20, [&] {
    UdpConfig huge;
    huge.port = port;
    huge.gro_buffers = 65534;  // 4 GiB
    std::string why;
    if (UdpDatapath::open(huge, why)) return 1;
    if (why.find("cannot allocate") == std::string::npos) return 2;
    small.port = port;  // the failed open left its ports free
    return UdpDatapath::open(small, why) ? 0 : 3;
  });
  ASSERT_TRUE(end.exited) << end.describe();
  EXPECT_EQ(end.code, 0) << "1 opened, 2 another error, 3 port still held, "
                         << test::kEscapedException << " an exception, " << test::kCapFailed
                         << " setrlimit failed";
}

// Tests of what the source port carries: they run on loopback, which otherwise sends
// every packet from the base port (UdpConfig::spray_over_loopback).
UdpConfig sprayed(UdpConfig c = {}) {
  c.spray_over_loopback = true;
  return c;
}

TEST(UdpDatapath, burst__carries_the_entropy_value_in_the_source_port) {
  auto a = open_ok(sprayed());
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 32> out{};
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 100));
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

// Sends `lengths` (bytes 0, 1, 2, ... of packet i all equal to i) from a to b with one
// EV, and returns what b received, in order.
std::vector<std::vector<uint8_t>> send_run(UdpDatapath& a, UdpDatapath& b,
                                           const std::vector<uint32_t>& lengths) {
  std::vector<PacketBuf*> out(lengths.size());
  EXPECT_EQ(a.alloc(out.data(), out.size()), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i]->len = lengths[i];
    std::fill(out[i]->data, out[i]->data + lengths[i], static_cast<uint8_t>(i));
    out[i]->peer = b.local_address();
    out[i]->entropy = 3;
  }
  a.tx_burst(out.data(), out.size());
  std::vector<std::vector<uint8_t>> got;
  std::array<PacketBuf*, 64> in{};
  for (int tries = 0; tries < 100 && got.size() < lengths.size(); ++tries) {
    const size_t n = b.rx_burst(in.data(), in.size());
    for (size_t i = 0; i < n; ++i) {
      got.emplace_back(in[i]->data, in[i]->data + in[i]->len);
      EXPECT_EQ(in[i]->entropy, 3);
    }
    b.free(in.data(), n);
    if (n == 0) b.wait(Duration::milliseconds(10));
  }
  return got;
}

TEST(UdpDatapath, loopback__a_sprayed_burst_leaves_from_the_base_port_in_one_call) {
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  std::array<PacketBuf*, 32> out{};  // EVs 0..31, as spraying gives them
  ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 1000));
  a->tx_burst(out.data(), out.size());
  EXPECT_EQ(a->stats().tx_syscalls, 1u);      // one socket, not one per EV
  EXPECT_EQ(a->stats().tx_gso_messages, 1u);  // and one run: a single super-datagram
  std::array<PacketBuf*, 32> in{};
  ASSERT_EQ(receive_held(*b, in, out.size()), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(in[i]->peer, a->local_address());
    EXPECT_EQ(in[i]->entropy, 0) << "from the base port";
    EXPECT_EQ(in[i]->data[999], static_cast<uint8_t>(i)) << "in burst order";
  }
  b->free(in.data(), in.size());
}

TEST(UdpDatapath, gso__sends_a_run_as_one_message_that_arrives_as_datagrams) {
  auto a = open_ok(sprayed());
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  // 40 full packets and a short last one: one super-datagram, cut by the kernel.
  std::vector<uint32_t> lengths(40, 1472);
  lengths.push_back(100);
  const auto got = send_run(*a, *b, lengths);
  EXPECT_EQ(a->stats().tx_syscalls, 1u);
  EXPECT_EQ(a->stats().tx_gso_messages, 1u);
  EXPECT_EQ(a->stats().tx_packets, lengths.size());
  EXPECT_EQ(b->stats().rx_gro_messages, 1u);  // loopback never cut it; rx_burst did
  ASSERT_EQ(got.size(), lengths.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].size(), lengths[i]) << i;
    EXPECT_EQ(got[i], std::vector<uint8_t>(lengths[i], static_cast<uint8_t>(i))) << i;
  }
}

TEST(UdpDatapath, gso__never_merges_unequal_segments_or_other_peers) {
  auto a = open_ok(sprayed());
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  // A short packet ends a run (only the last segment may be short), a zero-length packet
  // is never a segment, and a longer packet starts a new run.
  const std::vector<uint32_t> lengths = {1472, 1472, 500, 1472, 1472, 0, 64};
  const auto got = send_run(*a, *b, lengths);
  ASSERT_EQ(got.size(), lengths.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].size(), lengths[i]) << i;
  EXPECT_EQ(a->stats().tx_gso_messages, 2u);  // {1472, 1472, 500} and {1472, 1472}
}

TEST(UdpDatapath, gso_and_gro__can_be_switched_off) {
  UdpConfig c;
  c.gso = false;
  c.gro = false;
  auto a = open_ok(sprayed(c));
  auto b = open_ok(c);
  ASSERT_TRUE(a && b);
  const auto got = send_run(*a, *b, std::vector<uint32_t>(10, 1000));
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], std::vector<uint8_t>(1000, static_cast<uint8_t>(i)));
  EXPECT_EQ(a->stats().tx_gso_messages, 0u);
  EXPECT_EQ(b->stats().rx_gro_messages, 0u);
}

TEST(UdpDatapath, gso_to_a_receiver_without_gro__arrives_cut_by_the_kernel) {
  UdpConfig no_gro;
  no_gro.gro = false;
  auto a = open_ok(sprayed());
  auto b = open_ok(no_gro);
  ASSERT_TRUE(a && b);
  std::vector<uint32_t> lengths(20, 1200);
  lengths.push_back(7);
  const auto got = send_run(*a, *b, lengths);
  EXPECT_EQ(a->stats().tx_gso_messages, 1u);
  ASSERT_EQ(got.size(), lengths.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], std::vector<uint8_t>(lengths[i], static_cast<uint8_t>(i))) << i;
}

TEST(UdpDatapath, gather__sends_header_and_payload_as_one_datagram_in_gso_runs) {
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(UdpConfig{});
  ASSERT_TRUE(a && b);
  // Ten packets of 1000 bytes: a 40-byte header in the buffer and 960 bytes of payload
  // from the sender's memory, except packets 3 and 9 which carry all in the buffer (9 is
  // short, ending the run). The whole run is one GSO message of 17 iovecs.
  std::vector<uint8_t> message(10 * 960);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i * 7 + 1);
  std::array<PacketBuf*, 10> out{};
  ASSERT_EQ(a->alloc(out.data(), out.size()), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    PacketBuf* p = out[i];
    const uint8_t* payload = message.data() + i * 960;
    std::fill(p->data, p->data + 40, static_cast<uint8_t>(0xa0 + i));
    p->len = 40;
    if (i == 3 || i == 9) {
      const uint32_t inline_bytes = i == 9 ? 500 : 960;
      std::memcpy(p->data + 40, payload, inline_bytes);
      p->len += inline_bytes;
    } else {
      p->payload = payload;
      p->payload_len = 960;
    }
    p->peer = b->local_address();
    p->entropy = 5;
  }
  a->tx_burst(out.data(), out.size());
  EXPECT_EQ(a->stats().tx_gso_messages, 1u);
  EXPECT_EQ(a->stats().tx_syscalls, 1u);
  ASSERT_TRUE(b->wait(Duration::milliseconds(500)));
  std::array<PacketBuf*, 64> in{};
  const size_t got = receive_held(*b, in, out.size());
  ASSERT_EQ(got, out.size());
  for (size_t i = 0; i < got; ++i) {
    ASSERT_EQ(in[i]->len, i == 9 ? 540u : 1000u) << i;
    EXPECT_EQ(in[i]->data[0], 0xa0 + i);
    EXPECT_EQ(in[i]->data[39], 0xa0 + i);
    const uint8_t* payload = message.data() + i * 960;
    EXPECT_EQ(0, std::memcmp(in[i]->data + 40, payload, in[i]->len - 40)) << i;
  }
  b->free(in.data(), got);
}

// Sends `count` packets of `len` bytes (each filled with its index) from a to b in one
// burst with one EV, so they leave as one GSO super-datagram, and waits for b to see it.
// The default configuration with `n` GRO receive buffers.
UdpConfig with_gro_buffers(uint32_t n) {
  UdpConfig c;
  c.gro_buffers = n;
  return c;
}

void send_one_run(UdpDatapath& a, UdpDatapath& b, size_t count, uint32_t len) {
  std::vector<PacketBuf*> out(count);
  ASSERT_EQ(a.alloc(out.data(), out.size()), out.size());
  for (size_t i = 0; i < count; ++i) {
    out[i]->len = len;
    std::fill(out[i]->data, out[i]->data + len, static_cast<uint8_t>(i));
    out[i]->peer = b.local_address();
  }
  a.tx_burst(out.data(), out.size());
  ASSERT_TRUE(b.wait(Duration::milliseconds(500)));
}

TEST(UdpDatapath, gro__lends_datagrams_in_place_without_pool_buffers) {
  UdpConfig small;
  small.buffers = 8;  // far fewer than the datagrams: lending must not need them
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(small);
  ASSERT_TRUE(a && b);
  send_one_run(*a, *b, 30, 1000);
  std::array<PacketBuf*, 64> in{};
  const size_t n = b->rx_burst(in.data(), in.size());
  ASSERT_EQ(n, 30u);
  EXPECT_EQ(b->stats().rx_gro_messages, 1u);
  EXPECT_EQ(b->stats().rx_no_buffer, 0u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(b->owns(in[i]));
    ASSERT_EQ(in[i]->len, 1000u);
    EXPECT_EQ(in[i]->data[0], i);
    EXPECT_EQ(in[i]->data[999], i);
    if (i > 0) {
      EXPECT_EQ(in[i]->data, in[i - 1]->data + 1000);  // in place, back to back
    }
  }
  b->free(in.data(), n);
}

TEST(UdpDatapath, gro__copies_through_a_bounce_buffer_while_every_buffer_is_lent) {
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(with_gro_buffers(1));
  ASSERT_TRUE(a && b);
  send_one_run(*a, *b, 4, 500);
  std::array<PacketBuf*, 64> held{};
  ASSERT_EQ(b->rx_burst(held.data(), held.size()), 4u);  // pins the only GRO buffer
  // The next run arrives while that buffer is pinned: it is received into the bounce
  // buffer and copied into pool buffers, not left in the socket.
  send_one_run(*a, *b, 4, 500);
  std::array<PacketBuf*, 64> in{};
  const size_t got = receive_held(*b, in, 4);
  ASSERT_EQ(got, 4u);
  for (size_t i = 0; i < got; ++i) {
    EXPECT_EQ(in[i]->len, 500u);
    EXPECT_EQ(in[i]->data[499], i);
  }
  EXPECT_EQ(held[3]->data[499], 3);  // the pinned buffer was not received into
  b->free(in.data(), got);
  b->free(held.data(), 4);
  // Freed, the buffer is posted again: the third run is lent once more.
  send_one_run(*a, *b, 3, 700);
  const uint64_t gro_before = b->stats().rx_gro_messages;
  ASSERT_EQ(b->rx_burst(in.data(), in.size()), 3u);
  EXPECT_EQ(b->stats().rx_gro_messages, gro_before + 1);
  b->free(in.data(), 3);
}

TEST(UdpDatapath, keep__moves_a_lent_datagram_into_a_pool_buffer) {
  auto a = open_ok(UdpConfig{});
  auto b = open_ok(with_gro_buffers(1));
  ASSERT_TRUE(a && b);
  send_one_run(*a, *b, 5, 300);
  std::array<PacketBuf*, 64> in{};
  ASSERT_EQ(b->rx_burst(in.data(), in.size()), 5u);
  const uint8_t* lent_at = in[2]->data;
  PacketBuf* kept = b->keep(in[2]);
  EXPECT_NE(kept->data, lent_at);
  EXPECT_EQ(kept->len, 300u);
  EXPECT_EQ(kept->peer, a->local_address());
  EXPECT_EQ(kept->data[0], 2);
  EXPECT_EQ(b->keep(kept), kept);  // already its own: unchanged
  in[2] = in[4];
  b->free(in.data(), 4);  // every lent datagram freed; only `kept` is held
  // The GRO buffer is free again although `kept` is still held: the next run is lent.
  send_one_run(*a, *b, 3, 300);
  const uint64_t gro_before = b->stats().rx_gro_messages;
  ASSERT_EQ(b->rx_burst(in.data(), in.size()), 3u);
  EXPECT_EQ(b->stats().rx_gro_messages, gro_before + 1);
  EXPECT_EQ(kept->data[299], 2);  // untouched by the new receive
  b->free(in.data(), 3);
  b->free(&kept, 1);
}

TEST(UdpDatapath, wait__times_out_when_nothing_arrives) {
  auto a = open_ok(UdpConfig{});
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->wait(Duration::milliseconds(5)));
}

// net.core.rmem_max: what a process without CAP_NET_ADMIN may ask for at most.
uint32_t receive_buffer_cap() {
  std::ifstream f("/proc/sys/net/core/rmem_max");
  uint32_t bytes = 0;
  f >> bytes;
  return bytes;
}

TEST(UdpDatapath, socket_buffer__is_granted_as_asked_or_up_to_the_kernel_cap) {
  const uint32_t cap = receive_buffer_cap();
  ASSERT_GT(cap, 0u);
  for (const uint32_t asked : {uint32_t{256} << 10, 2 * cap}) {
    UdpConfig c;
    c.socket_buffer_bytes = asked;
    auto d = open_ok(c);
    ASSERT_TRUE(d);
    const UdpDatapath::SocketBuffers got = d->socket_buffers();
    if (::geteuid() == 0) {  // root may go past the cap (SO_RCVBUFFORCE)
      EXPECT_EQ(got.receive_bytes, asked);
      EXPECT_EQ(got.send_bytes, asked);
    } else {
      EXPECT_EQ(got.receive_bytes, std::min(asked, cap));
    }
  }
}

// Counts what `d` can still receive (freeing it) until 100 ms pass with nothing new.
size_t drain(UdpDatapath& d) {
  std::array<PacketBuf*, 64> in{};
  size_t got = 0;
  for (;;) {
    const size_t n = d.rx_burst(in.data(), in.size());
    d.free(in.data(), n);
    got += n;
    if (n == 0 && !d.wait(Duration::milliseconds(100))) return got;
  }
}

// What the receive buffer is for: datagrams that arrive while the owner is not reading
// wait there, and what does not fit is lost in the kernel.
TEST(UdpDatapath, socket_buffer__holds_a_burst_nobody_reads_and_a_small_one_loses_most) {
  constexpr size_t kBurst = 512;
  UdpConfig send;
  send.gso = false;  // one datagram per packet, so the receiver's buffer counts each
  send.socket_buffer_bytes = 8 << 20;
  auto a = open_ok(send);
  ASSERT_TRUE(a);
  for (const uint32_t buffer : {uint32_t{8} << 20, uint32_t{64} << 10}) {
    UdpConfig recv;
    recv.gro = false;
    recv.socket_buffer_bytes = buffer;
    auto b = open_ok(recv);
    ASSERT_TRUE(b);
    if (b->socket_buffers().receive_bytes < buffer) {
      GTEST_SKIP() << "net.core.rmem_max allows only " << b->socket_buffers().receive_bytes
                   << " bytes without CAP_NET_ADMIN";
    }
    std::vector<PacketBuf*> out(kBurst);
    ASSERT_TRUE(test::make_burst(*a, std::span(out), b->local_address(), 1400));
    EXPECT_EQ(a->tx_burst(out.data(), out.size()), kBurst);
    const size_t got = drain(*b);
    if (buffer > (1u << 20)) {
      EXPECT_EQ(got, kBurst) << "an 8 MiB buffer holds 512 x 1400 B";
    } else {
      EXPECT_LT(got, kBurst / 4) << "64 KiB holds fewer than a quarter of them";
      EXPECT_GT(got, 0u);
    }
  }
  EXPECT_EQ(a->stats().tx_dropped, 0u);  // the losses were the receiver's, in its kernel
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
  test::transfer_in_real_time(*da, *db, {0, 1, 1000, 70000, 8 << 20}, ec, Duration::seconds(20));
}

TEST(UdpEngine, transfer__over_ipv4_loopback) {
  transfer_over("127.0.0.1");
}
TEST(UdpEngine, transfer__over_ipv6_loopback) {
  transfer_over("::1");
}

// The sender learns which EVs work both ways from ACKs that come back on the EV of their
// trigger (congestion/paths/reps.h). UDP carries an EV as one of entropy_ports source
// ports, so the engine uses no more EVs than that, whatever PdsConfig asks: an EV of
// 256 would come back as itself mod 8 and never match. (Sprayed over loopback here, which
// by default sends everything from the base port: one path, nothing to learn.)
TEST(UdpEngine, acks__come_back_on_their_triggers_ev_however_many_evs_pds_asks_for) {
  UdpConfig c;
  c.address = "127.0.0.1";
  c.mtu_bytes = 8192;
  c.entropy_ports = 8;
  c.spray_over_loopback = true;
  auto da = open_ok(c);
  auto db = open_ok(c);
  ASSERT_TRUE(da && db);
  engine::EngineConfig ec;
  ec.pds.entropy_count = 256;
  engine::Engine<UdpDatapath> a(*da, ec), b(*db, ec);
  EXPECT_EQ(a.pds().config().entropy_count, 8u);
  std::vector<uint8_t> src(4 << 20, 7), dst(src.size());
  ASSERT_EQ(b.post_recv({dst.data(), dst.size(), 1}), Status::kOk);
  ASSERT_EQ(a.send(a.add_peer(db->local_address()), src.data(), src.size(), 1), Status::kOk);
  bool sent = false, received = false;
  const Time deadline = dp::monotonic_now() + Duration::seconds(20);
  while (!(sent && received) && dp::monotonic_now() < deadline) {
    a.progress(dp::monotonic_now());
    b.progress(dp::monotonic_now());
    ses::Completion done;
    while (a.poll_completion(done)) sent = done.status == Status::kOk;
    while (b.poll_completion(done)) received = done.status == Status::kOk;
  }
  ASSERT_TRUE(sent && received);
  EXPECT_EQ(dst, src);
  const pds::PdsStats& s = a.pds().stats();
  EXPECT_GT(s.acks_on_trigger_ev, s.acks_received / 2) << s.acks_received << " ACKs";
}

// A UDP datapath that delivers now and then a received packet two bursts late, so ROD
// packets arrive out of order and the engine holds the ones after the gap across
// bursts. Over GRO those are lent from shared receive buffers: an engine that did not
// move them out (keep()) would leave the buffers pinned, and with two of them every
// later receive would be copied through the bounce buffer. kForwardKeep = false hides
// keep() from the engine: the control that shows the test can tell.
template <bool kForwardKeep>
class ReorderingUdp {
 public:
  static constexpr bool kGathersPayload = true;
  explicit ReorderingUdp(UdpDatapath& inner) : inner_(inner) {}

  size_t alloc(PacketBuf** bufs, size_t n) { return inner_.alloc(bufs, n); }
  size_t tx_burst(PacketBuf** bufs, size_t n) { return inner_.tx_burst(bufs, n); }
  void free(PacketBuf** bufs, size_t n) { inner_.free(bufs, n); }
  uint32_t mtu() const { return inner_.mtu(); }
  NetAddr local_address() const { return inner_.local_address(); }
  PacketBuf* keep(PacketBuf* b) requires kForwardKeep {
    ++keeps;
    return inner_.keep(b);
  }

  size_t rx_burst(PacketBuf** bufs, size_t n) {
    size_t got = inner_.rx_burst(bufs, n - 1);
    if (delayed_ != nullptr) {
      // Two bursts with packets later (or after a quiet spell: the transfer's end).
      idle_polls_ = got == 0 ? idle_polls_ + 1 : 0;
      if ((got > 0 && ++bursts_since_ == 2) || idle_polls_ == 64) {
        bufs[got++] = delayed_;
        delayed_ = nullptr;
        ++reordered;
      }
      return got;
    }
    if (got >= 2 && ++bursts_ % 4 == 0) {  // hold back this burst's first packet
      delayed_ = bufs[0];
      std::copy(bufs + 1, bufs + got, bufs);
      --got;
      bursts_since_ = 0;
      idle_polls_ = 0;
    }
    return got;
  }

  uint64_t keeps = 0;
  uint64_t reordered = 0;

 private:
  UdpDatapath& inner_;
  PacketBuf* delayed_ = nullptr;
  uint64_t bursts_ = 0;
  uint32_t bursts_since_ = 0;
  uint32_t idle_polls_ = 0;
};

// What an ordered transfer through ReorderingUdp saw at the receiver.
struct ReorderedRun {
  uint64_t keeps = 0;   // packets the engine moved out of lent buffers
  uint64_t copied = 0;  // datagrams received through the bounce buffer
};

// 200 ROD messages from an engine over UDP to one whose datapath reorders and has two
// GRO receive buffers; checks that they arrive intact and that reordering happened.
template <bool kForwardKeep>
ReorderedRun ordered_transfer_with_reordering() {
  UdpConfig c;
  c.mtu_bytes = 8192;
  auto a = open_ok(c);
  c.gro_buffers = 2;
  auto b = open_ok(c);
  if (!a || !b) return {};
  ReorderingUdp<kForwardKeep> ra(*a), rb(*b);
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(50);
  // Eager sizes (below the 64 KiB rendezvous threshold): rendezvous data travels as read
  // responses, which are not ordered.
  std::vector<uint64_t> sizes(200, 60000);
  sizes.front() = 1;
  sizes.back() = 1000;
  test::transfer_in_real_time(ra, rb, sizes, ec, Duration::seconds(20), pds::Mode::kRod);
  EXPECT_GT(rb.reordered, 10u);
  EXPECT_GT(b->stats().rx_gro_messages, 10u);
  return {rb.keeps, b->stats().rx_copied};
}

TEST(UdpEngine, rod__moves_held_packets_out_of_lent_receive_buffers) {
  const ReorderedRun run = ordered_transfer_with_reordering<true>();
  EXPECT_GT(run.keeps, 0u);
  EXPECT_EQ(run.copied, 0u);  // every receive buffer came back at once
}

TEST(UdpEngine, rod__without_keep_held_packets_pin_receive_buffers_but_arrive_intact) {
  const ReorderedRun run = ordered_transfer_with_reordering<false>();
  EXPECT_GT(run.copied, 0u);  // buffers pinned: copied through the bounce buffer
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
