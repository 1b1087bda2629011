// FI_PROGRESS_AUTO: a domain opened with it moves data while the application makes no
// libfabric call at all; the manual-progress control shows the same message waits for
// the application there (so the first test can fail).
#include <thread>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

// Whether `into` holds `data`, read the way an RDMA application polls memory a peer
// writes: volatile loads with no synchronisation, so this peek may see a half-written
// buffer (and only answers true once every byte is there). The provider's progress
// thread writes `into` meanwhile; ThreadSanitizer would call the peek a race, which is
// why it is not instrumented. Callers compare again after reading the completion, which
// does synchronise with the provider.
__attribute__((no_sanitize("thread"))) bool landed(const std::vector<uint8_t>& into,
                                                   const std::vector<uint8_t>& data) {
  const volatile uint8_t* bytes = into.data();
  for (size_t i = into.size(); i-- > 0;) {  // the tail lands last: a miss shows early
    if (bytes[i] != data[i]) return false;
  }
  return true;
}

// Sends a rendezvous-sized message from eps[0] to eps[1] (a receive posted first), then
// makes no libfabric call for up to `patience`: true if the bytes landed meanwhile.
// Under manual progress the receiver never runs, so the bytes cannot land.
bool lands_without_calls(Fabric& f, std::vector<uint8_t>& into, const std::vector<uint8_t>& data,
                         std::chrono::milliseconds patience) {
  EXPECT_EQ(fi_recv(f.eps[1], into.data(), into.size(), nullptr, f.addrs[0], &into), 0);
  EXPECT_EQ(fi_send(f.eps[0], data.data(), data.size(), nullptr, f.addrs[1],
                    const_cast<std::vector<uint8_t>*>(&data)),
            0);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (landed(into, data)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return landed(into, data);
}

struct AutoProgress : Fabric {
  void SetUp() override {
    data_progress = FI_PROGRESS_AUTO;
    open(FI_EP_RDM, FI_MSG | FI_SOURCE);
  }
};

TEST_F(AutoProgress, getinfo__offers_auto_progress_when_asked) {
  EXPECT_EQ(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
}

TEST_F(AutoProgress, a_message_lands_while_the_application_makes_no_call) {
  endpoint();
  endpoint();
  const std::vector<uint8_t> data = pattern(1 << 20, 5);
  std::vector<uint8_t> into(data.size());
  EXPECT_TRUE(lands_without_calls(*this, into, data, std::chrono::seconds(10)));
  wait(2);  // and both completions are there to read
  EXPECT_EQ(into, data);
}

TEST_F(AutoProgress, sread__wakes_for_completions_the_thread_delivers) {
  endpoint();
  endpoint();
  const std::vector<uint8_t> data = pattern(4096, 9);
  std::vector<uint8_t> into(data.size());
  ASSERT_EQ(fi_recv(eps[1], into.data(), into.size(), nullptr, addrs[0], &into), 0);
  ASSERT_EQ(fi_send(eps[0], data.data(), data.size(), nullptr, addrs[1], &into[0]), 0);
  size_t got = 0;
  for (int i = 0; i < 10 && got < 2; ++i) {
    fi_cq_tagged_entry e[2];
    const ssize_t r = fi_cq_sread(cq, e, 2 - got, nullptr, 1000);
    if (r > 0) got += static_cast<size_t>(r);
  }
  EXPECT_EQ(got, 2u);
  EXPECT_EQ(into, data);
}

// Once fi_close returns, the endpoint's port is free: the progress thread may be asleep
// in poll() on the endpoint's socket, which keeps the socket (and its port) alive until
// the poll ends unless close waits that out. An application reopening on its port, or
// a test holding the port of a closed peer, would otherwise see EADDRINUSE at random.
TEST_F(AutoProgress, close__frees_the_port_before_it_returns) {
  endpoint();  // a live endpoint keeps the thread polling
  int busy = 0;
  for (int round = 0; round < 200; ++round) {
    fid_ep* ep = endpoint();
    sockaddr_storage name{};
    size_t len = sizeof(name);
    ASSERT_EQ(fi_getname(&ep->fid, &name, &len), 0);
    if (name.ss_family != AF_INET && name.ss_family != AF_INET6) GTEST_SKIP() << "not a socket";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the thread polls it now
    ASSERT_EQ(fi_close(&ep->fid), 0);
    eps.pop_back();
    addrs.pop_back();
    const int s = socket(name.ss_family, SOCK_DGRAM, 0);
    ASSERT_GE(s, 0);
    if (bind(s, reinterpret_cast<sockaddr*>(&name), static_cast<socklen_t>(len)) != 0) ++busy;
    close(s);
  }
  EXPECT_EQ(busy, 0) << "of 200 closed endpoints, " << busy << " still held their port";
}

TEST_F(Fabric, manual_progress__a_message_waits_for_the_application) {
  EXPECT_NE(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
  endpoint();
  endpoint();
  const std::vector<uint8_t> data = pattern(1 << 20, 5);
  std::vector<uint8_t> into(data.size());
  EXPECT_FALSE(lands_without_calls(*this, into, data, std::chrono::milliseconds(200)));
  wait(2);  // reading the CQ progresses: now it arrives
  EXPECT_EQ(into, data);
}

}  // namespace
}  // namespace spray_fi_test
