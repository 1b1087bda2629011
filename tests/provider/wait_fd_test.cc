// FI_WAIT_FD through the public libfabric API: the CQ's fd (FI_GETWAIT) with the
// fi_trywait protocol wakes a blocked application for arriving traffic, for
// fi_cq_signal, and for retransmission timers while a send is in flight.
#include <poll.h>

#include <thread>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct WaitFd : Fabric {
  void SetUp() override {
    cq_wait = FI_WAIT_FD;
    open(FI_EP_RDM, FI_MSG | FI_TAGGED | FI_SOURCE);
    ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
  }
  int trywait() {
    fid* f = &cq->fid;
    return fi_trywait(fabric, &f, 1);
  }
  // poll(2) on the CQ's fd: 1 when readable within `ms`.
  int readable(int ms) const {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, ms);
  }
  int fd = -1;
};

TEST_F(WaitFd, fd__wakes_a_blocked_reader_when_a_message_arrives) {
  EXPECT_GE(fd, 0);
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  uint64_t in = 0, out = 0x1234;
  ASSERT_EQ(fi_recv(b, &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &in), 0);
  ASSERT_EQ(trywait(), 0);  // nothing to read: safe to block
  EXPECT_EQ(readable(0), 0);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(fi_send(a, &out, sizeof(out), nullptr, addrs[1], &out), 0);
  });
  EXPECT_EQ(readable(10000), 1);  // woken by the datagram, not by the timeout
  sender.join();
  wait(2);
  EXPECT_EQ(in, out);
}

TEST_F(WaitFd, signal__wakes_the_fd_and_trywait_consumes_it) {
  endpoint();
  ASSERT_EQ(trywait(), 0);
  EXPECT_EQ(readable(0), 0);
  ASSERT_EQ(fi_cq_signal(cq), 0);
  EXPECT_EQ(readable(1000), 1);
  EXPECT_EQ(trywait(), -FI_EAGAIN);  // the signal was pending
  EXPECT_EQ(trywait(), 0);
  EXPECT_EQ(readable(0), 0);
}

TEST_F(WaitFd, trywait__refuses_while_completions_wait_and_arms_a_timer_for_retransmission) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  uint64_t v = 7, in = 0;
  ASSERT_EQ(fi_recv(b, &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &in), 0);
  ASSERT_EQ(fi_send(a, &v, sizeof(v), nullptr, addrs[1], &v), 0);
  // Progress runs inside trywait: once the send and receive complete, it says so.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int rc = 0;
  while ((rc = trywait()) == 0 && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(rc, -FI_EAGAIN);
  wait(2);

  // A send towards an address where nobody listens stays in flight: trywait arms the
  // timer, so the fd wakes (about one minimum RTO later) with no traffic at all.
  sockaddr_in nobody{};
  nobody.sin_family = AF_INET;
  nobody.sin_port = htons(9);  // discard: nothing of ours there
  nobody.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fi_addr_t dead = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(av, &nobody, 1, &dead, 0, nullptr), 1);
  ASSERT_EQ(fi_send(a, &v, sizeof(v), nullptr, dead, &v), 0);
  ASSERT_EQ(trywait(), 0);
  EXPECT_EQ(readable(5000), 1);
  EXPECT_EQ(wait_error().err, FI_EHOSTUNREACH);  // and it fails in the end, not hangs
}

TEST_F(WaitFd, trywait__on_an_object_without_a_wait_fd_is_invalid) {
  fid_ep* a = endpoint();
  fid* f = &a->fid;
  EXPECT_EQ(fi_trywait(fabric, &f, 1), -FI_EINVAL);
}

}  // namespace
}  // namespace spray_fi_test
