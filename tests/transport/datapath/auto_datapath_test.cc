// The auto datapath: shared memory to peers of this host, UDP to peers without a region
// (here a plain UDP endpoint stands for a remote host), buffers back to their owners,
// doorbells swallowed, and whole engines over it.
#include "transport/datapath/auto/auto_datapath.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "tests/support/packet_burst.h"
#include "tests/support/real_time_transfer.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

std::unique_ptr<AutoDatapath> open_auto() {
  std::string error;
  UdpConfig u;
  u.mtu_bytes = 8192;
  auto d = AutoDatapath::open(u, ShmConfig{}, error);
  EXPECT_TRUE(d) << error;
  return d;
}

// A plain UDP endpoint: it has no region, as if on another host.
std::unique_ptr<UdpDatapath> open_remote() {
  std::string error;
  UdpConfig u;
  u.mtu_bytes = 8192;
  auto d = UdpDatapath::open(u, error);
  EXPECT_TRUE(d) << error;
  return d;
}

using test::receive;

TEST(AutoDatapath, local_peers_get_shared_memory_and_others_udp) {
  auto a = open_auto(), b = open_auto();
  ASSERT_TRUE(a && b);
  auto remote = open_remote();
  ASSERT_TRUE(remote);

  std::vector<PacketBuf*> burst(20);
  ASSERT_TRUE(test::make_burst<AutoDatapath>(*a, burst, b->local_address(), 3000));
  a->tx_burst(burst.data(), 10);
  for (auto& p : burst) p->peer = remote->local_address();
  a->tx_burst(burst.data() + 10, 10);
  EXPECT_EQ(a->stats().tx_local, 10u);
  EXPECT_EQ(a->stats().tx_remote, 10u);

  auto at_b = receive(*b, 10);
  ASSERT_EQ(at_b.size(), 10u);
  for (size_t i = 0; i < at_b.size(); ++i) {
    EXPECT_EQ(at_b[i]->peer, a->local_address());
    EXPECT_EQ(at_b[i]->data[2999], static_cast<uint8_t>(i));
  }
  b->free(at_b.data(), at_b.size());
  auto at_remote = receive(*remote, 10);
  ASSERT_EQ(at_remote.size(), 10u);
  // Packets leave from one UDP socket per entropy value, so they may arrive out of order.
  std::set<uint8_t> firsts;
  for (auto* p : at_remote) {
    EXPECT_EQ(p->peer, a->local_address());
    firsts.insert(p->data[0]);
  }
  EXPECT_EQ(firsts, (std::set<uint8_t>{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  // The remote endpoint answers over UDP; the auto endpoint takes UDP too.
  for (auto* p : at_remote) p->peer = a->local_address();
  remote->tx_burst(at_remote.data(), at_remote.size());
  auto back = receive(*a, 10);
  EXPECT_EQ(back.size(), 10u);
  a->free(back.data(), back.size());
  // Every buffer went home: a can hand out its whole shared pool again.
  std::vector<PacketBuf*> all(ShmConfig{}.buffers);
  EXPECT_EQ(a->alloc(all.data(), all.size()), all.size());
  a->free(all.data(), all.size());
}

// is_host_local only looks: a peer asked about before its endpoint exists is not taken
// for remote once it does (where packets go is decided on the first one sent).
TEST(AutoDatapath, asking_whether_a_peer_is_local_decides_nothing) {
  auto a = open_auto();
  ASSERT_TRUE(a);
  NetAddr later;
  {
    auto b = open_auto();
    ASSERT_TRUE(b);
    later = b->local_address();
    EXPECT_TRUE(a->is_host_local(later));
  }  // b's endpoint is gone, and its region with it
  EXPECT_FALSE(a->is_host_local(later));
  std::string error;
  UdpConfig u;
  u.mtu_bytes = 8192;
  u.port = later.port;
  auto b = AutoDatapath::open(u, ShmConfig{}, error);  // back at the same address
  ASSERT_TRUE(b) << error;
  EXPECT_TRUE(a->is_host_local(later));
  std::vector<PacketBuf*> burst(4);
  ASSERT_TRUE(test::make_burst<AutoDatapath>(*a, burst, later, 100));
  a->tx_burst(burst.data(), burst.size());
  EXPECT_EQ(a->stats().tx_local, 4u);
  auto got = receive(*b, 4);
  EXPECT_EQ(got.size(), 4u);
  b->free(got.data(), got.size());
}

// Local peers take packets as long as shared memory carries, whatever the network's MTU
// (the engine cuts messages to them by host_local_mtu): such a packet crosses whole.
TEST(AutoDatapath, a_local_peer_takes_packets_longer_than_the_networks_mtu) {
  auto a = open_auto(), b = open_auto();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->mtu(), 8192u);  // UDP's, what every path carries
  EXPECT_EQ(a->host_local_mtu(), ShmConfig{}.mtu_bytes);
  std::vector<PacketBuf*> burst(3);
  const uint32_t length = ShmConfig{}.mtu_bytes;
  ASSERT_TRUE(test::make_burst<AutoDatapath>(*a, burst, b->local_address(), length));
  a->tx_burst(burst.data(), burst.size());
  EXPECT_EQ(a->stats().tx_local, 3u);
  auto got = receive(*b, 3);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]->len, length);
    EXPECT_EQ(got[i]->data[length - 1], static_cast<uint8_t>(i));
  }
  b->free(got.data(), got.size());
}

// The engine hands a batch over early (kTxFlushBytes) for packets a local peer waits
// on, and not for UDP, where each burst is a system call: flushes_early tells them apart
// by where the packet will go, as tx_burst decides it.
TEST(AutoDatapath, only_packets_for_local_peers_in_shared_memory_flush_early) {
  auto a = open_auto(), b = open_auto();
  ASSERT_TRUE(a && b);
  auto remote = open_remote();
  ASSERT_TRUE(remote);

  std::vector<PacketBuf*> shared(ShmConfig{}.buffers);
  ASSERT_EQ(a->alloc(shared.data(), shared.size()), shared.size());
  PacketBuf* udp_buffer = nullptr;  // the shared pool is empty: a UDP buffer comes next
  ASSERT_EQ(a->alloc(&udp_buffer, 1), 1u);
  for (int round = 0; round < 2; ++round) {  // the second round answers from the cache
    shared[0]->peer = b->local_address();
    EXPECT_TRUE(a->flushes_early(*shared[0]));
    shared[1]->peer = remote->local_address();
    EXPECT_FALSE(a->flushes_early(*shared[1]));
    udp_buffer->peer = b->local_address();  // goes over UDP although the peer is local
    EXPECT_FALSE(a->flushes_early(*udp_buffer));
  }
  a->free(&udp_buffer, 1);
  a->free(shared.data(), shared.size());
}

TEST(AutoDatapath, a_sleeping_receiver_is_woken_and_the_doorbell_is_not_handed_up) {
  auto a = open_auto(), b = open_auto();
  ASSERT_TRUE(a && b);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<PacketBuf*> one(1);
    if (test::make_burst<AutoDatapath>(*a, one, b->local_address(), 100))
      a->tx_burst(one.data(), 1);
  });
  EXPECT_TRUE(b->wait(Duration::seconds(10)));
  sender.join();
  auto got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  PacketBuf* extra = nullptr;  // the doorbell datagram is not handed up
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(b->rx_burst(&extra, 1), 0u);
  EXPECT_EQ(got[0]->len, 100u);
  b->free(got.data(), got.size());
  EXPECT_LE(b->stats().rx_doorbells, 1u);
}

TEST(AutoDatapath, an_idle_udp_socket_is_polled_less_often_but_never_forgotten) {
  auto a = open_auto();
  ASSERT_TRUE(a);
  auto remote = open_remote();
  ASSERT_TRUE(remote);
  PacketBuf* got = nullptr;
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(a->rx_burst(&got, 1), 0u);
  // Idle: the socket is polled once per 20 us, a few times in these polls, not each time.
  EXPECT_GT(a->stats().udp_polls_skipped, 2000u);

  std::vector<PacketBuf*> one(1);
  ASSERT_TRUE(test::make_burst<UdpDatapath>(*remote, one, a->local_address(), 500));
  remote->tx_burst(one.data(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // it is in a's socket now
  // The idle interval (20 us) has long passed, so the next clock reading polls the
  // socket: within one stride of polls (16).
  size_t polls = 0, received = 0;
  while (received == 0 && polls < 64) {
    received = a->rx_burst(&got, 1);
    ++polls;
  }
  ASSERT_EQ(received, 1u) << "a datagram waited through 64 polls";
  EXPECT_LE(polls, 16u);
  EXPECT_EQ(got->len, 500u);
  a->free(&got, 1);

  // Traffic makes the socket hot again: the next polls all reach it.
  const uint64_t skipped = a->stats().udp_polls_skipped;
  for (int i = 0; i < 100; ++i) a->rx_burst(&got, 1);
  EXPECT_EQ(a->stats().udp_polls_skipped, skipped);

  // And a sleeper's wake-up datagram is read by the first poll after prepare_wait.
  for (int i = 0; i < 4096; ++i) a->rx_burst(&got, 1);
  ASSERT_TRUE(test::make_burst<UdpDatapath>(*remote, one, a->local_address(), 300));
  EXPECT_TRUE(a->prepare_wait());
  remote->tx_burst(one.data(), 1);
  EXPECT_TRUE(a->wait(Duration::seconds(10)));
  ASSERT_EQ(a->rx_burst(&got, 1), 1u);
  EXPECT_EQ(got->len, 300u);
  a->free(&got, 1);
}

TEST(AutoEngine, transfer__to_a_local_peer_goes_by_shared_memory_with_one_copy_when_large) {
  engine::EngineConfig ec;
  ec.pds.cc.base_rtt = Duration::microseconds(20);
  {
    auto a = open_auto(), b = open_auto();
    ASSERT_TRUE(a && b);
    test::transfer_in_real_time(*a, *b, {0, 1, 1000, 70000, 4 << 20}, ec, Duration::seconds(20));
    EXPECT_GT(a->stats().tx_local, 0u);
    EXPECT_EQ(a->stats().tx_remote, 0u);
    EXPECT_EQ(b->shm().stats().peer_read_bytes, 70000u + (4u << 20));  // one copy each
  }
}

}  // namespace
}  // namespace spray::dp

namespace spray::dp {
namespace {

// The congestion windows of the PDCs `e` holds with `peer` (it opened them, or the peer).
template <class D>
std::vector<uint32_t> windows_with(engine::Engine<D>& e, pds::PeerIndex peer) {
  std::vector<uint32_t> windows;
  for (uint32_t i = 0; i < e.pds().config().max_pdcs; ++i) {
    const pds::Pdc* p = e.pds().pdc(i);
    if (p != nullptr && p->peer == peer) windows.push_back(p->cc->window_bytes());
  }
  return windows;
}

// A peer on another host is reached over kernel UDP, whose round trip is several times a
// shared-memory one: its PDCs size their window by EngineConfig::network_base_rtt, and a
// local peer's by pds.cc.base_rtt. Whether the engine learnt the peer from its address
// (a sends to it) or from its first packet (it sends to a).
TEST(AutoEngine, a_peer_on_another_host_gets_the_network_base_rtt) {
  auto a = open_auto(), local_sender = open_auto(), local_receiver = open_auto();
  ASSERT_TRUE(a && local_sender && local_receiver);
  auto remote_sender = open_remote(), remote_receiver = open_remote();
  ASSERT_TRUE(remote_sender && remote_receiver);
  engine::EngineConfig ec;
  ec.pds.cc_name = "nscc";
  ec.pds.cc.line_rate_gbps = 100;
  ec.pds.cc.base_rtt = Duration::microseconds(10);   // 125,000 bytes
  ec.network_base_rtt = Duration::microseconds(75);  // 937,500 bytes
  engine::Engine<AutoDatapath> ea(*a, ec), els(*local_sender, ec), elr(*local_receiver, ec);
  // Plain UDP engines know one kind of peer: network_base_rtt is unused there.
  engine::Engine<UdpDatapath> ers(*remote_sender, ec), err(*remote_receiver, ec);
  // Runs the engines until `want` operations in all completed well (or 10 s passed).
  int completed = 0;
  const auto run_until = [&](int want) {
    const Time deadline = monotonic_now() + Duration::seconds(10);
    while (completed < want && monotonic_now() < deadline) {
      const Time now = monotonic_now();
      ea.progress(now);
      els.progress(now);
      elr.progress(now);
      ers.progress(now);
      err.progress(now);
      ses::Completion c;
      while (ea.poll_completion(c)) completed += c.status == Status::kOk;
      while (els.poll_completion(c)) completed += c.status == Status::kOk;
      while (elr.poll_completion(c)) completed += c.status == Status::kOk;
      while (ers.poll_completion(c)) completed += c.status == Status::kOk;
      while (err.poll_completion(c)) completed += c.status == Status::kOk;
    }
    return completed == want;
  };
  std::vector<uint8_t> src(1000, 7);
  std::vector<std::vector<uint8_t>> got(4, std::vector<uint8_t>(1000));
  // The senders reach a first; a learns them from their packets.
  ASSERT_EQ(ea.post_recv({got[0].data(), 1000, 0}), Status::kOk);
  ASSERT_EQ(ea.post_recv({got[1].data(), 1000, 1}), Status::kOk);
  ASSERT_EQ(ers.send(ers.add_peer(a->local_address()), src.data(), 1000, 0), Status::kOk);
  ASSERT_EQ(els.send(els.add_peer(a->local_address()), src.data(), 1000, 1), Status::kOk);
  ASSERT_TRUE(run_until(4));
  // a reaches the receivers by their address.
  const pds::PeerIndex to_local = ea.add_peer(local_receiver->local_address());
  const pds::PeerIndex to_remote = ea.add_peer(remote_receiver->local_address());
  ASSERT_EQ(elr.post_recv({got[2].data(), 1000, 2}), Status::kOk);
  ASSERT_EQ(err.post_recv({got[3].data(), 1000, 3}), Status::kOk);
  ASSERT_EQ(ea.send(to_local, src.data(), 1000, 2), Status::kOk);
  ASSERT_EQ(ea.send(to_remote, src.data(), 1000, 3), Status::kOk);
  ASSERT_TRUE(run_until(8));
  for (const auto& g : got) EXPECT_EQ(g, src);
  const auto from_remote = ea.find_peer(remote_sender->local_address());
  const auto from_local = ea.find_peer(local_sender->local_address());
  ASSERT_TRUE(from_remote && from_local);
  // NSCC moves a window on each ACK, within 1.5 x the product: a network peer's PDC is
  // beyond anything the local figure allows, a local peer's within it.
  constexpr uint32_t kLocalMost = 187'500;
  for (pds::PeerIndex peer : {*from_remote, to_remote}) {
    const auto windows = windows_with(ea, peer);
    ASSERT_EQ(windows.size(), 1u);
    EXPECT_GT(windows[0], kLocalMost);
  }
  for (pds::PeerIndex peer : {*from_local, to_local}) {
    const auto windows = windows_with(ea, peer);
    ASSERT_EQ(windows.size(), 1u);
    EXPECT_LE(windows[0], kLocalMost);
  }
}

}  // namespace
}  // namespace spray::dp
