// FI_ATOMIC through the public libfabric API: fi_atomic, fi_fetch_atomic and
// fi_compare_atomic in their plain, v, msg and inject forms against registered memory of
// another endpoint; what fi_query_atomic and the *valid calls offer; counts applied
// exactly once when endpoints contend for one word; and the errors: wrong key, out of
// bounds, missing rights, misalignment, and misuse refused before anything is sent.
#include <rdma/fi_atomic.h>

#include <algorithm>
#include <set>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct Atomic : RegisteringFabric {
  void SetUp() override { open(FI_EP_RDM, FI_MSG | FI_ATOMIC, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR); }
  // Reads what the CQ holds; an error completion fails the test with its reason at once
  // (a loop that read on past it would wait for operations that already failed).
  void read_successes() {
    fi_cq_tagged_entry e[16];
    if (fi_cq_read(cq, e, 16) == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      FAIL() << "error completion: " << fi_strerror(err.err);
    }
  }
};

TEST_F(Atomic, getinfo__offers_atomics_with_their_directions) {
  EXPECT_EQ(info->caps & (FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE),
            FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
  EXPECT_TRUE(info->tx_attr->caps & FI_ATOMIC);
  EXPECT_TRUE(info->rx_attr->caps & FI_ATOMIC);
}

TEST_F(Atomic, query__offers_each_call_its_own_operations_and_types) {
  fid_ep* a = endpoint();
  size_t count = 0;
  EXPECT_EQ(fi_atomicvalid(a, FI_UINT64, FI_SUM, &count), 0);
  EXPECT_EQ(count, 128u);  // 1024 bytes of elements
  EXPECT_EQ(fi_atomicvalid(a, FI_INT8, FI_BXOR, &count), 0);
  EXPECT_EQ(count, 1024u);
  EXPECT_EQ(fi_atomicvalid(a, FI_DOUBLE, FI_PROD, &count), 0);
  EXPECT_EQ(fi_atomicvalid(a, FI_DOUBLE, FI_BOR, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomicvalid(a, FI_UINT32, FI_ATOMIC_READ, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomicvalid(a, FI_UINT32, FI_CSWAP, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomicvalid(a, FI_LONG_DOUBLE, FI_SUM, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomicvalid(a, FI_FLOAT_COMPLEX, FI_SUM, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_fetch_atomicvalid(a, FI_UINT32, FI_ATOMIC_READ, &count), 0);
  EXPECT_EQ(count, 256u);
  EXPECT_EQ(fi_fetch_atomicvalid(a, FI_FLOAT, FI_MIN, &count), 0);
  EXPECT_EQ(fi_fetch_atomicvalid(a, FI_UINT32, FI_CSWAP, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_UINT64, FI_CSWAP_GT, &count), 0);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_UINT16, FI_MSWAP, &count), 0);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_DOUBLE, FI_MSWAP, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_compare_atomicvalid(a, FI_UINT64, FI_SUM, &count), -FI_EOPNOTSUPP);
  fi_atomic_attr attr{};
  EXPECT_EQ(fi_query_atomic(domain, FI_INT16, FI_MAX, &attr, 0), 0);
  EXPECT_EQ(attr.size, 2u);
  EXPECT_EQ(attr.count, 512u);
  EXPECT_EQ(fi_query_atomic(domain, FI_DOUBLE, FI_CSWAP, &attr, FI_COMPARE_ATOMIC), 0);
  EXPECT_EQ(attr.size, 8u);
  EXPECT_EQ(attr.count, 1u);
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_ATOMIC_READ, &attr, FI_FETCH_ATOMIC), 0);
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_ATOMIC_READ, &attr, 0), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_query_atomic(domain, FI_UINT64, FI_SUM, &attr, FI_TAGGED), -FI_EOPNOTSUPP);
}

TEST_F(Atomic, every_form__applies_its_operation_and_returns_the_old_values) {
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) uint64_t target[8] = {10, 20, 30, 40, 50, 60, 70, 80};
  fid_mr* mr = reg(target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(mr);

  // fi_atomic: target[0..1] += {1, 2}.
  const uint64_t add[2] = {1, 2};
  int ctx = 0;
  ASSERT_EQ(fi_atomic(a, add, 2, nullptr, addrs[1], remote(target), key, FI_UINT64, FI_SUM, &ctx),
            0);
  auto done = wait(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].op_context, &ctx);
  EXPECT_EQ(done[0].flags & (FI_ATOMIC | FI_WRITE), FI_ATOMIC | FI_WRITE);
  EXPECT_EQ(target[0], 11u);
  EXPECT_EQ(target[1], 22u);

  // fi_fetch_atomic: target[2] max= 35, old value back.
  const uint64_t bigger = 35;
  uint64_t old = 0;
  ASSERT_EQ(fi_fetch_atomic(a, &bigger, 1, nullptr, &old, nullptr, addrs[1], remote(target, 16),
                            key, FI_UINT64, FI_MAX, &ctx),
            0);
  done = wait(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].flags & (FI_ATOMIC | FI_READ), FI_ATOMIC | FI_READ);
  EXPECT_EQ(old, 30u);
  EXPECT_EQ(target[2], 35u);

  // fi_compare_atomic: swap target[3] for 99 if it is 40.
  const uint64_t swap = 99, compare = 40;
  ASSERT_EQ(fi_compare_atomic(a, &swap, 1, nullptr, &compare, nullptr, &old, nullptr, addrs[1],
                              remote(target, 24), key, FI_UINT64, FI_CSWAP, &ctx),
            0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(old, 40u);
  EXPECT_EQ(target[3], 99u);

  // fi_inject_atomic: no completion; the operand buffer is free at once.
  uint64_t operand = 0xf0;
  ASSERT_EQ(fi_inject_atomic(a, &operand, 1, addrs[1], remote(target, 32), key, FI_UINT64, FI_BOR),
            0);
  operand = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (target[4] != (50u | 0xf0u) && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);  // drives progress; nothing to report
  }
  EXPECT_EQ(target[4], 50u | 0xf0u);

  // fi_fetch_atomicmsg with FI_ATOMIC_READ and fi_ioc/fi_rma_ioc descriptors.
  uint64_t read_back[2] = {};
  fi_ioc none{nullptr, 2};
  fi_ioc result{read_back, 2};
  fi_rma_ioc where{remote(target, 40), 2, key};
  fi_msg_atomic msg{};
  msg.msg_iov = &none;
  msg.iov_count = 1;
  msg.addr = addrs[1];
  msg.rma_iov = &where;
  msg.rma_iov_count = 1;
  msg.datatype = FI_UINT64;
  msg.op = FI_ATOMIC_READ;
  msg.context = &ctx;
  ASSERT_EQ(fi_fetch_atomicmsg(a, &msg, &result, nullptr, 1, 0), 0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(read_back[0], 60u);
  EXPECT_EQ(read_back[1], 70u);
  EXPECT_EQ(target[5], 60u);  // reading changes nothing

  // fi_compare_atomicv with FI_CSWAP_LT: 5 < 80, so target[7] becomes 7.
  uint64_t seven = 7, five = 5;
  fi_ioc op_ioc{&seven, 1}, cmp_ioc{&five, 1}, res_ioc{&old, 1};
  ASSERT_EQ(fi_compare_atomicv(a, &op_ioc, nullptr, 1, &cmp_ioc, nullptr, 1, &res_ioc, nullptr, 1,
                               addrs[1], remote(target, 56), key, FI_UINT64, FI_CSWAP_LT, &ctx),
            0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(old, 80u);
  EXPECT_EQ(target[7], 7u);
}

TEST_F(Atomic, floating_point__sums_and_products_land_as_computed) {
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) double target[3] = {1.5, -2.0, 0.25};
  fid_mr* mr = reg(target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE);
  const double factors[3] = {2.0, 3.0, -4.0};
  double old[3] = {};
  ASSERT_EQ(fi_fetch_atomic(a, factors, 3, nullptr, old, nullptr, addrs[1], remote(target),
                            fi_mr_key(mr), FI_DOUBLE, FI_PROD, nullptr),
            0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(target[0], 3.0);
  EXPECT_EQ(target[1], -6.0);
  EXPECT_EQ(target[2], -1.0);
  EXPECT_EQ(old[1], -2.0);
}

// Two endpoints fetch-and-add one word of a third, interleaved: each value is handed out
// exactly once and the word ends at the number of operations.
TEST_F(Atomic, contention__every_fetch_and_add_counts_once) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  endpoint();
  alignas(8) uint64_t counter = 0;
  fid_mr* mr = reg(&counter, sizeof counter, FI_REMOTE_READ | FI_REMOTE_WRITE);
  constexpr size_t kEach = 200;
  std::vector<uint64_t> got(2 * kEach, ~0ULL);
  const uint64_t one = 1;
  for (size_t i = 0; i < kEach; ++i) {
    for (size_t who = 0; who < 2; ++who) {
      uint64_t* into = &got[2 * i + who];
      for (;;) {
        const ssize_t rc =
            fi_fetch_atomic(who == 0 ? a : b, &one, 1, nullptr, into, nullptr, addrs[2],
                            remote(&counter), fi_mr_key(mr), FI_UINT64, FI_SUM, nullptr);
        if (rc == 0) break;
        ASSERT_EQ(rc, -FI_EAGAIN);
        ASSERT_NO_FATAL_FAILURE(read_successes());
      }
    }
  }
  // Whatever the loop above already read off the CQ is done too; wait for the counter.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::count(got.begin(), got.end(), ~0ULL) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_NO_FATAL_FAILURE(read_successes());
  }
  EXPECT_EQ(counter, 2 * kEach);
  std::sort(got.begin(), got.end());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
}

// Posts drive their own endpoint; a neighbour in the same domain that is their target
// must answer all the same. One endpoint posts fetch-and-adds to another of its domain,
// 150 us apart and never reading the CQ, for about 30 ms: longer than the suite's
// patience (a PDC fails after ~17 ms of silence). Every one applies once and completes.
// Without a standby thread (ctest provider_strict_manual_progress_*) only the posts
// drive the target; the PDC failed so before they did (see endpoint_transmit).
TEST_F(Atomic, manual_progress__posts_on_one_endpoint_keep_its_neighbour_answering) {
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) uint64_t counter = 0;
  fid_mr* mr = reg(&counter, sizeof counter, FI_REMOTE_READ | FI_REMOTE_WRITE);
  constexpr size_t kOps = 200;
  std::vector<uint64_t> got(kOps, ~0ULL);
  const uint64_t one = 1;
  for (size_t i = 0; i < kOps; ++i) {
    ASSERT_EQ(fi_fetch_atomic(a, &one, 1, nullptr, &got[i], nullptr, addrs[1], remote(&counter),
                              fi_mr_key(mr), FI_UINT64, FI_SUM, nullptr),
              0);
    // The application computes between posts, making no other call.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(150);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  EXPECT_EQ(wait(kOps).size(), kOps);
  EXPECT_EQ(counter, kOps);
  std::sort(got.begin(), got.end());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
}

TEST_F(Atomic, errors__complete_with_the_reason_and_leave_memory_alone) {
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) uint64_t target[4] = {1, 2, 3, 4};
  alignas(8) uint64_t readonly[4] = {5, 6, 7, 8};
  fid_mr* rw = reg(target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE);
  fid_mr* ro = reg(readonly, sizeof readonly, FI_REMOTE_READ);
  const uint64_t one = 1;
  struct Case {
    const char* what;
    uint64_t addr;
    uint64_t key;
    int err;
  };
  const Case cases[] = {
      {"unknown key", remote(target), fi_mr_key(rw) + 1000, FI_EKEYREJECTED},
      {"past the end", remote(target, 32), fi_mr_key(rw), FI_EINVAL},
      {"to read-only memory", remote(readonly), fi_mr_key(ro), FI_EACCES},
      {"misaligned", remote(target, 4), fi_mr_key(rw), FI_EINVAL},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int ctx = 0;
    ASSERT_EQ(fi_atomic(a, &one, 1, nullptr, addrs[1], c.addr, c.key, FI_UINT64, FI_SUM, &ctx), 0);
    const fi_cq_err_entry err = wait_error();
    EXPECT_EQ(err.err, c.err) << fi_strerror(err.err);
    EXPECT_EQ(err.op_context, &ctx);
    EXPECT_EQ(err.flags & FI_ATOMIC, FI_ATOMIC);
  }
  EXPECT_EQ(target[0] + target[1] + target[2] + target[3], 10u);
  EXPECT_EQ(readonly[0], 5u);
  // Misuse caught before anything is sent.
  uint64_t old = 0;
  const uint64_t key = fi_mr_key(rw);
  EXPECT_EQ(
      fi_atomic(a, &one, 0, nullptr, addrs[1], remote(target), key, FI_UINT64, FI_SUM, nullptr),
      -FI_EINVAL);
  std::vector<uint64_t> many(129, 1);
  EXPECT_EQ(fi_atomic(a, many.data(), many.size(), nullptr, addrs[1], remote(target), key,
                      FI_UINT64, FI_SUM, nullptr),
            -FI_EINVAL);
  EXPECT_EQ(
      fi_atomic(a, nullptr, 1, nullptr, addrs[1], remote(target), key, FI_UINT64, FI_SUM, nullptr),
      -FI_EINVAL);
  EXPECT_EQ(
      fi_atomic(a, &one, 1, nullptr, addrs[1], remote(target), key, FI_DOUBLE, FI_BAND, nullptr),
      -FI_EOPNOTSUPP);
  EXPECT_EQ(
      fi_atomic(a, &one, 1, nullptr, addrs[1], remote(target), key, FI_UINT64, FI_CSWAP, nullptr),
      -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_fetch_atomic(a, &one, 1, nullptr, nullptr, nullptr, addrs[1], remote(target), key,
                            FI_UINT64, FI_SUM, nullptr),
            -FI_EINVAL);  // no result buffer
  EXPECT_EQ(fi_compare_atomic(a, &one, 1, nullptr, nullptr, nullptr, &old, nullptr, addrs[1],
                              remote(target), key, FI_UINT64, FI_CSWAP, nullptr),
            -FI_EINVAL);  // no compare value
  const uint64_t two[2] = {1, 1};
  uint64_t two_old[2];
  EXPECT_EQ(fi_compare_atomic(a, two, 2, nullptr, two, nullptr, two_old, nullptr, addrs[1],
                              remote(target), key, FI_UINT64, FI_CSWAP, nullptr),
            -FI_EINVAL);  // compare-and-swap takes one element
  EXPECT_EQ(fi_atomic(a, &one, 1, nullptr, 9999, remote(target), key, FI_UINT64, FI_SUM, nullptr),
            -FI_EINVAL);  // no such peer
  EXPECT_EQ(target[0], 1u);
  fi_cq_tagged_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);  // none of them reported anything
}

// An endpoint opened without FI_ATOMIC refuses atomics.
struct NoAtomicCap : Fabric {
  void SetUp() override { open(FI_EP_RDM, FI_MSG | FI_RMA); }
};

TEST_F(NoAtomicCap, an_endpoint_without_fi_atomic_refuses_them) {
  ASSERT_FALSE(info->caps & FI_ATOMIC);
  fid_ep* a = endpoint();
  const uint64_t one = 1;
  EXPECT_EQ(fi_atomic(a, &one, 1, nullptr, addrs[0], 0, 0, FI_UINT64, FI_SUM, nullptr), -FI_ENOSYS);
}

}  // namespace
}  // namespace spray_fi_test
