// fi_cq_read and fi_cntr_read give the CPU away after a run of idle reads
// (provider/idle_yield.h): the policy itself, and the real provider, loaded by libfabric,
// calling sched_yield.
//
// The provider's sched_yield calls are counted by interposing the symbol: this
// executable defines sched_yield and exports it (see tests/CMakeLists.txt), so the
// dynamic linker binds the provider's calls to it rather than to libc's.
#include "provider/idle_yield.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "tests/provider/fabric_fixture.h"

namespace {

thread_local int yields_on_this_thread = 0;

}  // namespace

extern "C" int sched_yield() noexcept {
  ++yields_on_this_thread;
  return static_cast<int>(::syscall(SYS_sched_yield));
}

namespace spray::fi {
namespace {

TEST(IdleYield, yields_once_every_run_of_idle_polls) {
  IdleYield y(4);
  int yields = 0;
  for (int i = 0; i < 12; ++i) yields += y.should_yield(false) ? 1 : 0;
  EXPECT_EQ(yields, 3);
  EXPECT_FALSE(y.should_yield(false));  // the count started again after the third
}

TEST(IdleYield, a_busy_poll_starts_the_count_again) {
  IdleYield y(4);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(y.should_yield(false));
  EXPECT_FALSE(y.should_yield(true));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(y.should_yield(false));
  EXPECT_TRUE(y.should_yield(false));
}

TEST(IdleYield, zero_never_yields) {
  IdleYield y(0);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(y.should_yield(false));
}

}  // namespace
}  // namespace spray::fi

namespace spray_fi_test {
namespace {

// The default FI_SPRAY_YIELD_AFTER: 64 idle reads a yield.
TEST_F(Fabric, cq_read__yields_the_cpu_after_a_run_of_idle_reads_but_not_while_completions_come) {
  if (const char* set = std::getenv("FI_SPRAY_YIELD_AFTER"); set && *set) {
    GTEST_SKIP() << "FI_SPRAY_YIELD_AFTER is set; this test checks the default (64)";
  }
  fid_ep* ep = endpoint();
  fi_cq_tagged_entry e{};
  const int before = yields_on_this_thread;
  for (int i = 0; i < 640; ++i) ASSERT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
  // A read that moved a packet (there are none to move here) would restart the count.
  const int idle_yields = yields_on_this_thread - before;
  EXPECT_GE(idle_yields, 9);
  EXPECT_LE(idle_yields, 10);

  // Reads that find completions never yield: 100 messages to itself, each read as soon
  // as it can be, with at most a few idle reads between them.
  uint64_t payload = 0;
  const int busy_before = yields_on_this_thread;
  int completions = 0;
  for (int m = 0; m < 100; ++m) {
    ASSERT_EQ(fi_trecv(ep, &payload, sizeof payload, nullptr, addrs[0], 7, 0, nullptr), 0);
    ASSERT_EQ(fi_tinject(ep, &payload, sizeof payload, addrs[0], 7), 0);
    for (int spins = 0; completions < m + 1 && spins < 1'000'000; ++spins) {
      if (fi_cq_read(cq, &e, 1) == 1) ++completions;
    }
  }
  EXPECT_EQ(completions, 100);
  // Each message is one packet and an ACK away: far fewer than 64 idle reads apart.
  EXPECT_EQ(yields_on_this_thread - busy_before, 0);
}

TEST_F(Fabric, cntr_read__yields_the_cpu_after_a_run_of_idle_reads) {
  if (const char* set = std::getenv("FI_SPRAY_YIELD_AFTER"); set && *set) {
    GTEST_SKIP() << "FI_SPRAY_YIELD_AFTER is set; this test checks the default (64)";
  }
  fi_cntr_attr attr{};
  attr.events = FI_CNTR_EVENTS_COMP;
  fid_cntr* cntr = nullptr;
  ASSERT_EQ(fi_cntr_open(domain, &attr, &cntr, nullptr), 0);
  endpoint(cntr, FI_RECV);
  const int before = yields_on_this_thread;
  for (int i = 0; i < 640; ++i) ASSERT_EQ(fi_cntr_read(cntr), 0u);
  const int idle_yields = yields_on_this_thread - before;
  EXPECT_GE(idle_yields, 9);
  EXPECT_LE(idle_yields, 10);
  for (fid_ep* ep : eps) EXPECT_EQ(fi_close(&ep->fid), 0);  // before the counter they use
  eps.clear();
  EXPECT_EQ(fi_close(&cntr->fid), 0);
}

}  // namespace
}  // namespace spray_fi_test
