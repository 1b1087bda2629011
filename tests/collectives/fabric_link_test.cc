// FabricLink over libfabric's tcp provider, two links in one process: a message crosses
// intact, and a peer that never progresses turns a send that the provider keeps refusing
// (-FI_EAGAIN) into a CollectiveError at the post timeout, not a hang.
#include "collectives/fabric_link.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace spray::coll {
namespace {

using Clock = std::chrono::steady_clock;

struct LinkPair {
  std::unique_ptr<FabricLink> a, b;  // ranks 0 and 1
};

LinkPair open_pair() {
  std::string error;
  LinkPair p{FabricLink::open("tcp", error), nullptr};
  if (p.a) p.b = FabricLink::open("tcp", error);
  if (!p.a || !p.b) return {};
  const std::vector<std::vector<uint8_t>> names{p.a->address(), p.b->address()};
  if (!p.a->set_peers(names, error) || !p.b->set_peers(names, error)) return {};
  return p;
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

TEST(FabricLink, SendsToAStalledPeerFailAtThePostTimeout) {
  LinkPair p = open_pair();
  ASSERT_TRUE(p.a && p.b) << "libfabric's tcp provider did not open";
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

}  // namespace
}  // namespace spray::coll
