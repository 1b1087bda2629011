// Early flushes: over a datapath whose receiver sees nothing until tx_burst publishes
// (shared memory: D::kTxFlushBytes), the engine hands its transmit batch over every
// kTxFlushBytes, so the peer starts on a message's first packets while the rest are
// built. A datapath with paths of both kinds (auto) says per packet which ones a peer
// waits on (flushes_early); the others (kernel UDP, a system call a burst) wait for a
// full batch. Driven over an in-memory wire that records each burst.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "nic_sim/loopback_pair.h"
#include "tests/transport/engine/forwarding_port.h"
#include "transport/engine/engine.h"

namespace spray {
namespace {

// LoopbackPort plus the two members of a datapath that flushes early for some packets,
// and a record of how many packets each tx_burst carried.
class BurstRecordingPort : public test::ForwardingPort {
 public:
  static constexpr size_t kTxFlushBytes = 16 * 1024;

  using ForwardingPort::ForwardingPort;
  size_t tx_burst(dp::PacketBuf** b, size_t n) {
    bursts.push_back(n);
    return ForwardingPort::tx_burst(b, n);
  }
  bool flushes_early(const dp::PacketBuf&) const { return peer_waits; }

  bool peer_waits = true;      // what flushes_early answers for every packet
  std::vector<size_t> bursts;  // packets per tx_burst, in order
};
static_assert(dp::Datapath<BurstRecordingPort>);

struct FlushPair {
  sim::LoopbackPair wire{4096, 65536};
  BurstRecordingPort pa{wire.a()}, pb{wire.b()};
  engine::Engine<BurstRecordingPort> a{pa, {}}, b{pb, {}};
  pds::PeerIndex to_b = a.add_peer(pb.local_address());

  // Sends `len` bytes to B and runs both engines until both ends completed; the bursts
  // of A's first progress step (the message's first window) are left in `first_step`.
  void send_and_finish(size_t len, std::vector<size_t>& first_step) {
    std::vector<uint8_t> src(len), dst(len, 0);
    std::iota(src.begin(), src.end(), static_cast<uint8_t>(5));
    ASSERT_EQ(b.post_recv({dst.data(), len, 1}), Status::kOk);
    ASSERT_EQ(a.send(to_b, src.data(), len, 2), Status::kOk);
    Time now{};
    pa.bursts.clear();
    a.progress(now);
    first_step = pa.bursts;
    ses::Completion sent, received;
    bool got_tx = false, got_rx = false;
    for (int i = 0; i < 100000 && !(got_tx && got_rx); ++i) {
      now = now + Duration::microseconds(1);
      b.progress(now);
      a.progress(now);
      got_tx = got_tx || a.poll_completion(sent);
      got_rx = got_rx || b.poll_completion(received);
    }
    ASSERT_TRUE(got_tx && got_rx);
    EXPECT_EQ(sent.status, Status::kOk);
    EXPECT_EQ(received.status, Status::kOk);
    EXPECT_EQ(dst, src);
  }
};

size_t packets_in(const std::vector<size_t>& bursts) {
  return std::accumulate(bursts.begin(), bursts.end(), size_t{0});
}

TEST(EarlyFlush, packets_a_peer_waits_on_leave_every_flush_size) {
  FlushPair p;
  std::vector<size_t> first_step;
  p.send_and_finish(60000, first_step);  // eager: 15 packets of at most 4096 bytes
  ASSERT_GE(packets_in(first_step), 10u) << "the first window should hold most of the message";
  // 16 KiB is four full packets: the batch leaves once it holds them, and the fifth
  // goes in the next burst.
  EXPECT_GE(first_step.size(), 3u);
  EXPECT_LE(*std::max_element(first_step.begin(), first_step.end()), 5u);
}

TEST(EarlyFlush, packets_no_peer_waits_on_leave_in_one_full_batch) {
  FlushPair p;
  p.pa.peer_waits = false;
  std::vector<size_t> first_step;
  p.send_and_finish(60000, first_step);
  ASSERT_GE(packets_in(first_step), 10u);
  EXPECT_EQ(first_step.size(), 1u) << "one tx_burst for the whole step";
}

}  // namespace
}  // namespace spray
