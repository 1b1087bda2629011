// FI_WAIT_FD through the public libfabric API: the CQ's and the counter's fd
// (FI_GETWAIT) with the fi_trywait protocol wake a blocked application for arriving
// traffic, for fi_cq_signal / fi_cntr_add, and for retransmission timers while a send is
// in flight; fi_cntr_wait blocks on every endpoint bound to its counter.
#include <poll.h>

#include <thread>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

// fi_trywait on one object.
int trywait_on(fid_fabric* fabric, fid* object) {
  return fi_trywait(fabric, &object, 1);
}
// poll(2) on a wait fd: 1 when readable within `ms`.
int readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms);
}
// Blocks on `fd` while another thread sends `*value` from `from` to `to` 50 ms later;
// 1 when the fd woke (for the datagram, not the 10 s timeout).
int readable_when_sent(int fd, fid_ep* from, fi_addr_t to, uint64_t* value) {
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(fi_send(from, value, sizeof(*value), nullptr, to, value), 0);
  });
  const int woke = readable_within(fd, 10000);
  sender.join();
  return woke;
}

struct WaitFd : Fabric {
  void SetUp() override {
    cq_wait = FI_WAIT_FD;
    open(FI_EP_RDM, FI_MSG | FI_TAGGED | FI_SOURCE);
    ASSERT_EQ(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
  }
  int trywait() { return trywait_on(fabric, &cq->fid); }
  int readable(int ms) const { return readable_within(fd, ms); }
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
  EXPECT_EQ(readable_when_sent(fd, a, addrs[1], &out), 1);
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
  // If a pass of the standby thread delivered the completions read above, it signalled
  // the fd for them: one trywait consumes that stale signal (-FI_EAGAIN, which the
  // protocol allows), the next arms the timer. (CI under ASan met it once.)
  rc = trywait();
  if (rc == -FI_EAGAIN) rc = trywait();
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(readable(5000), 1);
  EXPECT_EQ(wait_error().err, FI_EHOSTUNREACH);  // and it fails in the end, not hangs
}

TEST_F(WaitFd, trywait__on_an_object_without_a_wait_fd_is_invalid) {
  fid_ep* a = endpoint();
  fid* f = &a->fid;
  EXPECT_EQ(fi_trywait(fabric, &f, 1), -FI_EINVAL);
}

// A counter opened with FI_WAIT_FD, bound to endpoints made by the fixture.
struct CounterWaitFd : Fabric {
  fid_cntr* cntr = nullptr;
  int fd = -1;
  void SetUp() override {
    Fabric::SetUp();
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = FI_WAIT_FD;
    ASSERT_EQ(fi_cntr_open(domain, &attr, &cntr, nullptr), 0);
    ASSERT_EQ(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0);
    ASSERT_GE(fd, 0);
  }
  void TearDown() override {
    for (fid_ep* ep : eps) EXPECT_EQ(fi_close(&ep->fid), 0);
    eps.clear();
    if (cntr) {
      EXPECT_EQ(fi_close(&cntr->fid), 0);
    }
    Fabric::TearDown();
  }
  fid_ep* counted_endpoint(uint64_t events) { return endpoint(cntr, events); }
  int trywait() { return trywait_on(fabric, &cntr->fid); }
  int readable(int ms) const { return readable_within(fd, ms); }
};

TEST_F(CounterWaitFd, fd__wakes_a_blocked_application_when_a_counted_message_arrives) {
  fid_ep* a = endpoint();  // not counted
  fid_ep* b = counted_endpoint(FI_RECV);
  uint64_t in = 0, out = 0x5678;
  ASSERT_EQ(fi_recv(b, &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, &in), 0);
  ASSERT_EQ(trywait(), 0);  // nothing happened: safe to block
  EXPECT_EQ(readable(0), 0);
  EXPECT_EQ(readable_when_sent(fd, a, addrs[1], &out), 1);
  // The sender progresses through the CQ; the counter's reader through the counter.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fi_cntr_read(cntr) < 1 && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    (void)fi_cq_read(cq, &e, 1);
  }
  EXPECT_EQ(fi_cntr_read(cntr), 1u);
  EXPECT_EQ(in, out);
  EXPECT_EQ(trywait(), -FI_EAGAIN);  // it changed since the last trywait: read it first
  EXPECT_EQ(trywait(), 0);
}

TEST_F(CounterWaitFd, cntr_add__wakes_the_fd) {
  counted_endpoint(FI_SEND);
  ASSERT_EQ(trywait(), 0);
  EXPECT_EQ(readable(0), 0);
  ASSERT_EQ(fi_cntr_add(cntr, 3), 0);
  EXPECT_EQ(readable(1000), 1);
  EXPECT_EQ(trywait(), -FI_EAGAIN);
  EXPECT_EQ(fi_cntr_read(cntr), 3u);
  EXPECT_EQ(trywait(), 0);
  EXPECT_EQ(readable(0), 0);
}

TEST_F(CounterWaitFd, cntr_wait__progresses_and_blocks_on_every_bound_endpoint) {
  // Two counted endpoints: the second one's traffic must end the wait even though the
  // first one stays idle. 2 sends and 2 receives in all, counted on one counter.
  fid_ep* a = counted_endpoint(FI_SEND | FI_RECV);
  fid_ep* b = counted_endpoint(FI_SEND | FI_RECV);
  std::vector<uint8_t> to_b = pattern(100000, 1), to_a = pattern(3000, 2);
  std::vector<uint8_t> at_b(to_b.size()), at_a(to_a.size());
  ASSERT_EQ(fi_recv(b, at_b.data(), at_b.size(), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_recv(a, at_a.data(), at_a.size(), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_send(a, to_b.data(), to_b.size(), nullptr, addrs[1], nullptr), 0);
  ASSERT_EQ(fi_send(b, to_a.data(), to_a.size(), nullptr, addrs[0], nullptr), 0);
  EXPECT_EQ(fi_cntr_wait(cntr, 4, 10000), 0);
  EXPECT_EQ(fi_cntr_read(cntr), 4u);
  EXPECT_EQ(fi_cntr_readerr(cntr), 0u);
  EXPECT_EQ(at_b, to_b);
  EXPECT_EQ(at_a, to_a);
}

TEST_F(CounterWaitFd, wait_objects__other_than_none_unspec_and_fd_are_refused) {
  fi_cntr_attr attr{};
  attr.events = FI_CNTR_EVENTS_COMP;
  attr.wait_obj = FI_WAIT_SET;
  fid_cntr* c = nullptr;
  EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), -FI_ENOSYS);
  attr.wait_obj = FI_WAIT_UNSPEC;
  ASSERT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), 0);
  int unspec_fd = -1;
  EXPECT_EQ(fi_control(&c->fid, FI_GETWAIT, &unspec_fd), -FI_ENODATA);  // no fd to hand out
  EXPECT_EQ(fi_control(&cntr->fid, FI_GETWAIT, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

TEST_F(CounterWaitFd, cntr_wait__times_out_when_nothing_happens) {
  counted_endpoint(FI_RECV);
  EXPECT_EQ(fi_cntr_wait(cntr, 1, 20), -FI_ETIMEDOUT);
  EXPECT_EQ(fi_cntr_read(cntr), 0u);
}

}  // namespace
}  // namespace spray_fi_test
