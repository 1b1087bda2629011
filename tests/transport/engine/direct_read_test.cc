// Direct reads: over a datapath that can copy from a peer's memory (shared memory between
// processes), a rendezvous receive is one copy made by the receiving engine, not a read
// request answered by packets. Driven here over an in-memory wire whose "peer memory"
// is this process's (so the copy is a memcpy), with refusals on demand.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "nic_sim/loopback_pair.h"
#include "tests/transport/engine/forwarding_port.h"
#include "transport/engine/engine.h"

namespace spray {
namespace {

// The keys senders offer for reading, as the shared-memory region of each would publish
// them: one table for the whole "host".
using OfferedKeys = std::set<uint64_t>;

// LoopbackPort plus read_peer_memory, which copies from this process's memory unless
// told to refuse (a kernel that forbids cross-memory attach, a peer that is gone), and
// then fails as ShmDatapath does if the key is no longer offered.
class PeerReadingPort : public test::ForwardingPort {
 public:
  PeerReadingPort(sim::LoopbackPort& port, OfferedKeys& offered)
      : ForwardingPort(port), offered_(offered) {}

  bool read_peer_memory(const dp::NetAddr&, uint64_t key, uint64_t remote, uint8_t* local,
                        size_t length) {
    ++calls;
    if (refuse) return false;
    std::memcpy(local, reinterpret_cast<const void*>(remote), length);
    if (offered_.count(key) == 0) {
      ++withdrawn;
      return false;
    }
    bytes += length;
    return true;
  }
  void offer_for_reading(uint64_t key) { offered_.insert(key); }
  void withdraw_from_reading(uint64_t key) { offered_.erase(key); }

  bool refuse = false;
  uint64_t calls = 0;
  uint64_t bytes = 0;
  uint64_t withdrawn = 0;  // copies made after the sender withdrew the key

 private:
  OfferedKeys& offered_;
};
static_assert(dp::Datapath<PeerReadingPort>);

struct Pair {
  sim::LoopbackPair wire{4096, 65536};
  OfferedKeys offered;
  PeerReadingPort pa{wire.a(), offered}, pb{wire.b(), offered};
  engine::Engine<PeerReadingPort> a{pa, {}}, b{pb, {}};
  pds::PeerIndex to_b = a.add_peer(pb.local_address());

  // Runs A alone, 1 ms a step from `now`, until its send completes (B makes no call).
  bool a_alone_until_its_send_ends(Time& now, ses::Completion& sent) {
    for (int i = 0; i < 100000; ++i) {
      now = now + Duration::milliseconds(1);
      a.progress(now);
      if (a.poll_completion(sent)) return true;
    }
    return false;
  }
  // Runs both engines, 100 us a step from `now`, until B's receive completes.
  bool both_until_b_completes(Time& now, ses::Completion& received) {
    for (int i = 0; i < 200000; ++i) {
      now = now + Duration::microseconds(100);
      a.progress(now);
      b.progress(now);
      if (b.poll_completion(received)) return true;
    }
    return false;
  }

  // Runs both engines until the receive and the send completed; returns them.
  bool run(ses::Completion& sent, ses::Completion& received) {
    bool got_tx = false, got_rx = false;
    Time now{};
    for (int i = 0; i < 200000 && !(got_tx && got_rx); ++i) {
      now = now + Duration::microseconds(1);
      a.progress(now);
      b.progress(now);
      got_tx = got_tx || a.poll_completion(sent);
      got_rx = got_rx || b.poll_completion(received);
    }
    return got_tx && got_rx;
  }
};

TEST(DirectRead, a_rendezvous_is_copied_once_by_the_receiver) {
  Pair p;
  const size_t len = 5 << 20;  // more than one progress step's worth of copying
  std::vector<uint8_t> src(len), dst(len, 0);
  std::iota(src.begin(), src.end(), static_cast<uint8_t>(3));
  ASSERT_EQ(p.b.post_recv({dst.data(), len, 7}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, src.data(), len, 9), Status::kOk);
  ses::Completion sent, received;
  ASSERT_TRUE(p.run(sent, received));
  EXPECT_EQ(sent.status, Status::kOk);
  EXPECT_EQ(received.status, Status::kOk);
  EXPECT_EQ(received.length, len);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(p.b.ses().stats().direct_reads, 1u);
  EXPECT_EQ(p.pb.bytes, len);
  EXPECT_GE(p.pb.calls, 5u);  // copied in steps of at most 1 MiB per progress
  // No read request crossed the wire: A sent the rendezvous header and ACKs only.
  EXPECT_LT(p.a.stats().tx_packets, 10u);
}

TEST(DirectRead, a_short_receive_copies_only_what_fits_and_completes_truncated) {
  Pair p;
  std::vector<uint8_t> src(300000), dst(100000, 0);
  std::iota(src.begin(), src.end(), static_cast<uint8_t>(1));
  ASSERT_EQ(p.b.post_recv({dst.data(), dst.size(), 7}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, src.data(), src.size(), 9), Status::kOk);
  ses::Completion sent, received;
  ASSERT_TRUE(p.run(sent, received));
  EXPECT_EQ(p.pb.bytes, dst.size());
  EXPECT_TRUE(std::equal(dst.begin(), dst.end(), src.begin()));
  EXPECT_EQ(sent.status, Status::kOk);
}

TEST(DirectRead, a_refused_read_falls_back_to_read_requests) {
  Pair p;
  p.pb.refuse = true;
  const size_t len = 1 << 20;
  std::vector<uint8_t> src(len), dst(len, 0);
  std::iota(src.begin(), src.end(), static_cast<uint8_t>(5));
  ASSERT_EQ(p.b.post_recv({dst.data(), len, 7}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, src.data(), len, 9), Status::kOk);
  ses::Completion sent, received;
  ASSERT_TRUE(p.run(sent, received));
  EXPECT_EQ(received.status, Status::kOk);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(p.b.ses().stats().direct_reads, 0u);
  EXPECT_EQ(p.b.ses().stats().direct_read_fallbacks, 1u);
  EXPECT_GT(p.a.stats().tx_packets, len / 4096);  // the read responses carried it
}

// The sender gives up on a receiver that stopped answering in the middle of its copy
// (as a sender gives up on a process descheduled for seconds), and its application
// writes over the buffer, as it may once the send completed. The receiver then copies
// the rest: it must not complete the receive as if the bytes were the message.
TEST(DirectRead, a_copy_that_ends_after_the_sender_gave_up_does_not_complete_the_receive) {
  Pair p;
  const size_t len = 3 << 20;  // three progress steps of copying
  std::vector<uint8_t> src(len, 0x11), dst(len, 0);
  ASSERT_EQ(p.b.post_recv({dst.data(), len, 7}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, src.data(), len, 9), Status::kOk);
  EXPECT_EQ(p.offered.size(), 1u);
  Time now{};
  for (int i = 0; i < 1000 && p.pb.calls == 0; ++i) {  // until B has copied its first MiB
    now = now + Duration::microseconds(1);
    p.a.progress(now);
    p.b.progress(now);
  }
  ASSERT_EQ(p.pb.calls, 1u);
  ses::Completion sent;
  ASSERT_TRUE(p.a_alone_until_its_send_ends(now, sent));  // B silent: A's retries run out
  EXPECT_EQ(sent.status, Status::kPeerUnreachable);
  EXPECT_TRUE(p.offered.empty());           // withdrawn before the completion could be read
  std::fill(src.begin(), src.end(), 0xee);  // the application's buffer again
  ses::Completion received;
  ASSERT_TRUE(p.both_until_b_completes(now, received));
  EXPECT_NE(received.status, Status::kOk) << "completed with a buffer the sender took back";
  EXPECT_EQ(p.pb.withdrawn, 1u);
  EXPECT_EQ(p.b.ses().stats().direct_reads, 0u);
}

// As above, but the receiver wakes only a minute after the sender gave up, and copies
// nothing directly (refused throughout, as where the kernel forbids it): its read
// request goes back on the PDC the message came on, which the sender failed and forgot
// long ago, so the sender NACKs it (INV_DPDCID) and the receive fails as the send did.
// No bytes are placed, and the sender's SES never sees a read for a key it withdrew
// (which it would refuse as a bad key, an error the receiver's user could not explain).
TEST(DirectRead,
     a_read_long_after_the_sender_gave_up_fails_as_peer_unreachable_and_places_nothing) {
  Pair p;
  p.pb.refuse = true;
  const size_t len = 1 << 20;
  std::vector<uint8_t> src(len, 0x11), dst(len, 0);
  ASSERT_EQ(p.b.post_recv({dst.data(), len, 7}), Status::kOk);
  ASSERT_EQ(p.a.send(p.to_b, src.data(), len, 9), Status::kOk);
  ses::Completion sent;
  Time now{};
  ASSERT_TRUE(p.a_alone_until_its_send_ends(now, sent));  // B silent from the start
  EXPECT_EQ(sent.status, Status::kPeerUnreachable);
  for (int i = 0; i < 600; ++i) {  // a minute more of A alone
    now = now + Duration::milliseconds(100);
    p.a.progress(now);
  }
  ses::Completion received;
  ASSERT_TRUE(p.both_until_b_completes(now, received));
  EXPECT_EQ(received.status, Status::kPeerUnreachable) << to_string(received.status);
  EXPECT_EQ(dst, std::vector<uint8_t>(len, 0)) << "bytes of a send that had ended were placed";
  EXPECT_EQ(p.a.ses().stats().rma_errors, 0u);
  EXPECT_GT(p.a.pds().stats().nacks_sent, 0u);
}

}  // namespace
}  // namespace spray
