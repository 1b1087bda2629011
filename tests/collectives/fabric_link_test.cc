// FabricLink, two links in one process: over libfabric's tcp provider a message crosses
// intact, and a peer that never progresses turns a send that the provider keeps refusing
// (-FI_EAGAIN, rxm's own protocol) into a CollectiveError at the post timeout, and one it
// queues (tcp's RDM endpoint, through rxm passthru) into one at the wait's deadline, never
// a hang; over spray, a send
// to a peer that is gone fails naming the provider's cause, an injected (small) one at the
// next call after it, and injected sends by the thousand recycle their slots and arrive
// while their sender is away.
#include "collectives/fabric_link.h"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace spray::coll {
namespace {

using Clock = std::chrono::steady_clock;

struct LinkPair {
  std::unique_ptr<FabricLink> a, b;  // ranks 0 and 1
};

// Gives this process a JobID of its own (spray's FI_SPRAY_JOB_ID) for tests whose peer is
// closed on purpose: an endpoint that another test process opens meanwhile on the closed
// peer's address (UDP port) is then of another job and ignores what is sent to it, so the
// peer stays as dead as the test needs however many tests ctest runs side by side. (Of
// one job, such an endpoint took the send: once in a run at ctest -j 6, it succeeded.)
// spray reads the variable when libfabric first loads it, so this holds when the test has
// its process to itself, as ctest runs each; in a run of the whole binary it may be late.
void use_a_job_of_our_own() {
  if (std::getenv("FI_SPRAY_JOB_ID") != nullptr) return;
  std::random_device random;
  setenv("FI_SPRAY_JOB_ID", std::to_string(1 + random() % 0xffffff).c_str(), 1);
}

// Has spray declare a gone peer unreachable within tens of milliseconds (4 retransmissions,
// timeouts capped at 5 ms) instead of its default of about 5 s. Spray reads these when it
// is first loaded, so this must come before the first open; each test runs in a process
// of its own (gtest_discover_tests). Explicit settings in the environment are kept.
void give_up_on_gone_peers_fast() {
  setenv("FI_SPRAY_RETRIES", "4", 0);
  setenv("FI_SPRAY_RTO_MAX_MS", "5", 0);
}

LinkPair open_pair(const char* provider = "tcp") {
  std::string error;
  LinkPair p{FabricLink::open(provider, error), nullptr};
  if (p.a) p.b = FabricLink::open(provider, error);
  if (!p.a || !p.b) return {};
  const std::vector<std::vector<uint8_t>> names{p.a->address(), p.b->address()};
  if (!p.a->set_peers(names, error) || !p.b->set_peers(names, error)) return {};
  return p;
}

// Whether libfabric opened tcp's own RDM endpoint under rxm (passthru) for this link,
// rather than rxm's own protocol.
bool over_tcp_passthru(const FabricLink& link) {
  return link.opened_path().find("FI_PROTO_RXM_TCP") != std::string::npos;
}

TEST(FabricLink, MessageCrossesIntact) {
  LinkPair p = open_pair();
  ASSERT_TRUE(p.a && p.b) << "libfabric's tcp provider did not open";
  std::vector<uint8_t> sent(100000), got(sent.size());
  std::iota(sent.begin(), sent.end(), uint8_t{7});
  // Each end waits on its own thread, as two ranks would: tcp connects only while the
  // accepting side progresses too.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::string receive_error;
  std::thread receiver([&] {
    try {
      p.b->wait(p.b->irecv(0, got.data(), got.size(), 42), deadline);
    } catch (const CollectiveError& e) {
      receive_error = e.what();
    }
  });
  try {
    p.a->wait(p.a->isend(1, sent.data(), sent.size(), 42), deadline);
  } catch (const CollectiveError& e) {
    ADD_FAILURE() << e.what();
  }
  receiver.join();
  EXPECT_EQ(receive_error, "");
  EXPECT_EQ(got, sent);
}

// Over rxm's own protocol (FI_OFI_RXM_ENABLE_PASSTHRU=0), which pushes back. rxm reads
// the variable when the process first calls libfabric, so this holds only in a process
// of its own (as ctest runs each test); in a run of the whole binary it skips.
TEST(FabricLink, SendsToAStalledPeerFailAtThePostTimeout) {
  setenv("FI_OFI_RXM_ENABLE_PASSTHRU", "0", 1);
  LinkPair p = open_pair();
  ASSERT_TRUE(p.a && p.b) << "libfabric's tcp provider did not open";
  if (over_tcp_passthru(*p.a)) {
    GTEST_SKIP() << "libfabric took rxm passthru in this process before the test could "
                    "turn it off: run this test alone";
  }
  p.a->set_post_timeout(std::chrono::milliseconds(300));
  // Rank 1 posts no receive and never progresses, like a stalled rank: tcp cannot finish
  // connecting to it (or, connected, fills the socket and then its transmit queue), so
  // fi_tsend answers -FI_EAGAIN for good. One buffer serves every send.
  std::vector<uint8_t> block(64 * 1024, 0x5a);
  const auto start = Clock::now();
  std::string what;
  try {
    for (int i = 0; i < 4000; ++i) p.a->isend(1, block.data(), block.size(), 9);
  } catch (const CollectiveError& e) {
    what = e.what();
  }
  const auto took = Clock::now() - start;
  ASSERT_NE(what, "") << "4000 sends of 64 KiB were all accepted: tcp never pushed back";
  EXPECT_NE(what.find("-FI_EAGAIN"), std::string::npos) << what;
  EXPECT_NE(what.find("to rank 1"), std::string::npos) << what;
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(20));
}

// Over tcp's own RDM endpoint (rxm passthru, the collectives' default over tcp) sends to
// a stalled peer are queued rather than refused; waiting for one then fails at its
// deadline, naming the rank, instead of hanging.
TEST(FabricLink, ASendToAStalledPeerFailsAtItsDeadlineOverTcpPassthru) {
  // Rank 1 posts no receive and never progresses. Enough data to fill both sockets. The
  // buffer outlives the links: the sends are still queued when they close.
  std::vector<uint8_t> block(1 << 20, 0x5a);
  LinkPair p = open_pair();
  ASSERT_TRUE(p.a && p.b) << "libfabric's tcp provider did not open";
  if (!over_tcp_passthru(*p.a)) {
    GTEST_SKIP() << "libfabric opened " << p.a->opened_path()
                 << ", not tcp's RDM endpoint (FI_OFI_RXM_ENABLE_PASSTHRU set, or set "
                    "before this test in the same process)";
  }
  std::vector<Request> sends;
  std::string what;
  const auto start = Clock::now();
  try {
    for (int i = 0; i < 64; ++i) sends.push_back(p.a->isend(1, block.data(), block.size(), 9));
    p.a->wait_all(sends, Clock::now() + std::chrono::milliseconds(500));
  } catch (const CollectiveError& e) {
    what = e.what();
  }
  const auto took = Clock::now() - start;
  ASSERT_NE(what, "") << "64 MiB went to a peer that never received";
  EXPECT_NE(what.find("to rank 1"), std::string::npos) << what;
  EXPECT_GE(took, std::chrono::milliseconds(500));
  EXPECT_LT(took, std::chrono::seconds(20));
}

// An error completion names the provider's own cause, not only its fi errno: spray
// reports a target whose PDC table stayed full as FI_EAGAIN ("Resource temporarily
// unavailable"), which alone sent the reader of a CI log the wrong way.
TEST(FabricLink, AnErrorCompletionNamesTheProvidersCause) {
  use_a_job_of_our_own();
  give_up_on_gone_peers_fast();
  LinkPair p = open_pair("spray");
  ASSERT_TRUE(p.a && p.b) << "the spray provider did not open (FI_PROVIDER_PATH?)";
  p.b.reset();  // rank 1 is gone: nothing answers at its address any more
  std::vector<uint8_t> block(64 * 1024, 0x5a);  // more than spray injects: a plain send
  std::string what;
  try {
    p.a->wait(p.a->isend(1, block.data(), block.size(), 9),
              Clock::now() + std::chrono::seconds(60));
  } catch (const CollectiveError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("to rank 1"), std::string::npos) << what;
  EXPECT_NE(what.find(fi_strerror(FI_EHOSTUNREACH)), std::string::npos) << what;
  EXPECT_NE(what.find("(spray: peer unreachable)"), std::string::npos) << what;
}

// A small send is injected: complete for the caller at once. If the provider fails it
// later, the next wait throws that failure, naming the send, rather than letting it pass
// unseen or waiting out its own deadline.
TEST(FabricLink, AnInjectedSendThatFailsLaterFailsTheNextWait) {
  use_a_job_of_our_own();
  give_up_on_gone_peers_fast();
  LinkPair p = open_pair("spray");
  ASSERT_TRUE(p.a && p.b) << "the spray provider did not open (FI_PROVIDER_PATH?)";
  p.b.reset();
  const uint64_t word = 0x1122334455667788;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const auto start = Clock::now();
  p.a->wait(p.a->isend(1, &word, sizeof word, 9), deadline);  // injected: returns at once
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  uint64_t never = 0;
  std::string what;
  try {
    p.a->wait(p.a->irecv(1, &never, sizeof never, 10), deadline);
  } catch (const CollectiveError& e) {
    what = e.what();
  }
  EXPECT_LT(Clock::now(), deadline) << "the receive timed out: the send's failure was lost";
  EXPECT_NE(what.find("send of 8 bytes to rank 1 (tag 0x9)"), std::string::npos) << what;
  EXPECT_NE(what.find("(spray: peer unreachable)"), std::string::npos) << what;
}

// A send that fails breaks the link at once: a wait for something else (here a receive
// from the same dead peer, which would never come) throws the send's failure as soon as
// the provider reports it, instead of waiting out its own deadline.
TEST(FabricLink, ASendThatFailsEndsTheWaitForAnotherRequestAtOnce) {
  use_a_job_of_our_own();
  give_up_on_gone_peers_fast();
  LinkPair p = open_pair("spray");
  ASSERT_TRUE(p.a && p.b) << "the spray provider did not open (FI_PROVIDER_PATH?)";
  p.b.reset();
  std::vector<uint8_t> block(64 * 1024, 0x5a);  // more than spray injects: a plain send
  const Request send = p.a->isend(1, block.data(), block.size(), 9);
  (void)send;  // never waited for: the receive's wait must see its failure
  uint64_t never = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::string what;
  try {
    p.a->wait(p.a->irecv(1, &never, sizeof never, 10), deadline);
  } catch (const CollectiveError& e) {
    what = e.what();
  }
  EXPECT_LT(Clock::now(), deadline - std::chrono::seconds(30))
      << "the receive waited out its deadline: the send's failure was not seen";
  EXPECT_NE(what.find("send of 65536 bytes to rank 1 (tag 0x9)"), std::string::npos) << what;
  EXPECT_NE(what.find("(spray: peer unreachable)"), std::string::npos) << what;
}

// More injected sends than the link has slots, each waited for at once: their slots come
// back when the provider's late completions arrive, and every message arrives intact
// though the sender then stops calling in: spray's window holds back the last few
// hundred, which only the link's drainer thread sends (without it this timed out).
TEST(FabricLink, InjectedSendsRecycleTheirSlotsAndArriveWhileTheSenderIsAway) {
  LinkPair p = open_pair("spray");
  ASSERT_TRUE(p.a && p.b) << "the spray provider did not open (FI_PROVIDER_PATH?)";
  constexpr uint32_t kMessages = 10000;  // the pool holds 4096
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  std::vector<uint32_t> got(kMessages, 0);
  std::string receive_error;
  std::thread receiver([&] {
    try {
      constexpr uint32_t kBatch = 500;
      for (uint32_t first = 0; first < kMessages; first += kBatch) {
        std::vector<Request> rs;
        for (uint32_t i = first; i < first + kBatch; ++i) {
          rs.push_back(p.b->irecv(0, &got[i], sizeof got[i], i));
        }
        p.b->wait_all(rs, deadline);
      }
    } catch (const CollectiveError& e) {
      receive_error = e.what();
    }
  });
  try {
    for (uint32_t i = 0; i < kMessages; ++i) {
      const uint32_t value = i * 2654435761u;
      p.a->wait(p.a->isend(1, &value, sizeof value, i), deadline);  // `value` reused at once
    }
  } catch (const CollectiveError& e) {
    ADD_FAILURE() << e.what();
  }
  receiver.join();  // rank 0 is away: only its drainer polls its link
  EXPECT_NO_THROW(p.a->finish_sends(deadline));
  EXPECT_EQ(receive_error, "");
  for (uint32_t i = 0; i < kMessages; ++i) ASSERT_EQ(got[i], i * 2654435761u) << "message " << i;
}

}  // namespace
}  // namespace spray::coll
