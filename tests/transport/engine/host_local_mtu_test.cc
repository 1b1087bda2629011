// Per-path MTU: over a datapath with paths of two kinds (auto: shared memory to peers on
// this host, kernel UDP to the rest), a peer on this host gets packets as long as shared
// memory carries (host_local_mtu), not the network's MTU. What a receiver accepts does not
// depend on whether it, too, took the sender for local. Driven over an in-memory wire whose
// buffers hold the longer packets, with each end told separately whether the other is local.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "nic_sim/loopback_pair.h"
#include "transport/engine/engine.h"

namespace spray {
namespace {

constexpr uint32_t kNetworkMtu = 4096;
constexpr uint32_t kLocalMtu = 16384;

// LoopbackPort (buffers of kLocalMtu bytes) that says its MTU is the network's, answers
// is_host_local as told, and records the longest packet it sent.
class TwoPathPort {
 public:
  TwoPathPort(sim::LoopbackPort& port, bool peers_local)
      : peers_are_local(peers_local), port_(port) {}
  size_t alloc(dp::PacketBuf** b, size_t n) { return port_.alloc(b, n); }
  size_t tx_burst(dp::PacketBuf** b, size_t n) {
    for (size_t i = 0; i < n; ++i) longest_sent = std::max(longest_sent, b[i]->len);
    return port_.tx_burst(b, n);
  }
  size_t rx_burst(dp::PacketBuf** b, size_t n) { return port_.rx_burst(b, n); }
  void free(dp::PacketBuf** b, size_t n) { port_.free(b, n); }
  uint32_t mtu() const { return kNetworkMtu; }
  dp::NetAddr local_address() const { return port_.local_address(); }
  bool is_host_local(const dp::NetAddr&) const { return peers_are_local; }
  uint32_t host_local_mtu() const { return kLocalMtu; }

  const bool peers_are_local;  // what is_host_local answers for every peer
  uint32_t longest_sent = 0;

 private:
  sim::LoopbackPort& port_;
};
static_assert(dp::Datapath<TwoPathPort>);

// A and B, where A takes B for local as `a_sees_local` says and B takes A for remote
// (it learns A when A's first packet arrives).
struct TwoPathPair {
  explicit TwoPathPair(bool a_sees_local) : pa(wire.a(), a_sees_local), pb(wire.b(), false) {}
  sim::LoopbackPair wire{kLocalMtu, 65536};
  TwoPathPort pa, pb;
  engine::Engine<TwoPathPort> a{pa, {}}, b{pb, {}};
  pds::PeerIndex to_b = a.add_peer(pb.local_address());

  // Runs both engines until each has `a_wants` and `b_wants` completions; all must be kOk.
  void run(int a_wants, int b_wants) {
    Time now{};
    int a_got = 0, b_got = 0;
    for (int i = 0; i < 200000 && (a_got < a_wants || b_got < b_wants); ++i) {
      now = now + Duration::microseconds(1);
      a.progress(now);
      b.progress(now);
      ses::Completion c;
      while (a.poll_completion(c)) {
        EXPECT_EQ(c.status, Status::kOk);
        ++a_got;
      }
      while (b.poll_completion(c)) {
        EXPECT_EQ(c.status, Status::kOk);
        ++b_got;
      }
    }
    ASSERT_EQ(a_got, a_wants);
    ASSERT_EQ(b_got, b_wants);
  }
};

std::vector<uint8_t> pattern(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A send (eager, several packets) and an RMA write from A to B, and an RMA read by A of
// B's memory, whose data B cuts for A as B sees it.
void exchange(TwoPathPair& p) {
  const size_t len = 60000;  // eager: below the rendezvous threshold
  const auto sent = pattern(len, 3), written = pattern(len, 7), to_read = pattern(len, 11);
  std::vector<uint8_t> received(len, 0), read_back(len, 0), window(2 * len, 0);
  std::copy(to_read.begin(), to_read.end(), window.begin() + len);
  constexpr uint64_t kKey = 42;
  ASSERT_EQ(p.b.register_memory({window.data(), window.size(), 0, kKey,
                                 ses::access::kRemoteRead | ses::access::kRemoteWrite}),
            Status::kOk);
  ASSERT_EQ(p.b.post_recv({received.data(), len, 1}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, sent.data(), len, 2), Status::kOk);
  ASSERT_EQ(p.a.write(p.to_b, written.data(), len, 0, kKey, 3), Status::kOk);
  ASSERT_EQ(p.a.read(p.to_b, read_back.data(), len, len, kKey, 4), Status::kOk);
  p.run(3, 1);
  EXPECT_EQ(received, sent);
  EXPECT_TRUE(std::equal(written.begin(), written.end(), window.begin()));
  EXPECT_EQ(read_back, to_read);
}

TEST(HostLocalMtu, a_local_peer_gets_packets_as_long_as_shared_memory_carries) {
  TwoPathPair p(true);
  exchange(p);
  EXPECT_GT(p.pa.longest_sent, kNetworkMtu);
  EXPECT_LE(p.pa.longest_sent, kLocalMtu);
  // B took A for remote: its read data kept to the network's MTU, and A accepted it.
  EXPECT_LE(p.pb.longest_sent, kNetworkMtu);
  EXPECT_GT(p.pb.longest_sent, kNetworkMtu / 2);
}

TEST(HostLocalMtu, a_network_peer_gets_the_networks_mtu) {
  TwoPathPair p(false);
  exchange(p);
  EXPECT_LE(p.pa.longest_sent, kNetworkMtu);
  EXPECT_GT(p.pa.longest_sent, kNetworkMtu / 2);
}

}  // namespace
}  // namespace spray
