// FI_RMA_EVENT through the public libfabric API: counters at the target of RMA and
// atomics. An endpoint opened with it counts the peers' reads, fetching and compare
// atomics on its FI_REMOTE_READ counter and their writes and plain atomics on its
// FI_REMOTE_WRITE counter; a region bound to a counter (fi_mr_bind, FI_REMOTE_WRITE)
// counts the writes and atomics that change it. Each access that succeeded counts once,
// none that was refused does, and a write counts only once all its bytes are in place.
// The capability is given only when asked for, and the bindings it allows are refused
// without it.
#include <rdma/fi_atomic.h>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

constexpr uint64_t kCaps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;

struct RmaEvent : Fabric {
  void SetUp() override { open(FI_EP_RDM, kCaps, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR); }

  fid_mr* reg(void* buf, size_t len, uint64_t flags = 0) {
    fid_mr* mr = nullptr;
    EXPECT_EQ(
        fi_mr_reg(domain, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, flags, &mr, nullptr),
        0);
    if (mr) mrs.push_back(mr);
    return mr;
  }
  fid_cntr* counter(fi_wait_obj wait_obj = FI_WAIT_UNSPEC) {
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    attr.wait_obj = wait_obj;
    fid_cntr* c = nullptr;
    EXPECT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), 0);
    return c;
  }
  static uint64_t remote(const void* buf, size_t offset = 0) {
    return reinterpret_cast<uintptr_t>(buf) + offset;  // FI_MR_VIRT_ADDR
  }
  // Drives the domain (reading a counter progresses every endpoint of it) until `c`
  // reaches `want` or 10 s pass, then a little longer, so that a count beyond `want`
  // would show; returns the count.
  static uint64_t settle(fid_cntr* c, uint64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (fi_cntr_read(c) < want && std::chrono::steady_clock::now() < deadline) {
    }
    const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < linger) (void)fi_cntr_read(c);
    return fi_cntr_read(c);
  }
  void TearDown() override {
    for (fid_mr* mr : mrs) EXPECT_EQ(fi_close(&mr->fid), 0);
    Fabric::TearDown();
  }
  std::vector<fid_mr*> mrs;
};

TEST_F(RmaEvent, getinfo__offers_fi_rma_event_only_when_asked) {
  EXPECT_TRUE(info->caps & FI_RMA_EVENT);
  EXPECT_TRUE(info->rx_attr->caps & FI_RMA_EVENT);
  fi_info* plain = getinfo(hints_for(FI_EP_RDM, FI_MSG | FI_RMA));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->caps & FI_RMA_EVENT) << "a cost nobody asked for";
  fi_freeinfo(plain);
  // Events of remote access need remote access; datagram endpoints have no RMA.
  EXPECT_EQ(getinfo(hints_for(FI_EP_RDM, FI_MSG | FI_RMA_EVENT)), nullptr);
  EXPECT_EQ(getinfo(hints_for(FI_EP_RDM, FI_RMA | FI_READ | FI_RMA_EVENT)), nullptr);
  EXPECT_EQ(getinfo(hints_for(FI_EP_DGRAM, FI_MSG | FI_RMA_EVENT)), nullptr);
}

TEST_F(RmaEvent, endpoint_counters__count_each_access_that_succeeded_once_by_kind) {
  fid_cntr* remote_reads = counter();
  fid_cntr* remote_writes = counter();
  fid_ep* a = endpoint();
  fid_ep* target =
      endpoint_counting({{remote_reads, FI_REMOTE_READ}, {remote_writes, FI_REMOTE_WRITE}});
  const fi_addr_t t = addrs.back();

  std::vector<uint8_t> memory(400000, 0);
  alignas(8) uint64_t words[4] = {10, 20, 30, 40};
  fid_mr* mr = reg(memory.data(), memory.size());
  fid_mr* wmr = reg(words, sizeof(words));
  const uint64_t key = fi_mr_key(mr), wkey = fi_mr_key(wmr);
  const auto out = pattern(300000, 7);
  std::vector<uint8_t> in(300000);
  uint64_t one = 1, fetched[3] = {}, compare = 999, swap = 0;

  // Writes (several packets, none, with data, injected) and plain atomics: 7 on the
  // remote write counter. Reads (several packets, none), fetching, compare and reading
  // atomics: 5 on the remote read counter.
  ASSERT_EQ(fi_write(a, out.data(), out.size(), nullptr, t, remote(memory.data()), key, nullptr),
            0);
  ASSERT_EQ(fi_write(a, out.data(), 0, nullptr, t, remote(memory.data()), key, nullptr), 0);
  ASSERT_EQ(fi_write(a, out.data(), 64, nullptr, t, remote(memory.data(), 350000), key, nullptr),
            0);
  ASSERT_EQ(
      fi_writedata(a, out.data(), 8, nullptr, 99, t, remote(memory.data(), 360000), key, nullptr),
      0);
  ASSERT_EQ(fi_inject_write(a, out.data(), 8, t, remote(memory.data(), 370000), key), 0);
  ASSERT_EQ(fi_atomic(a, &one, 1, nullptr, t, remote(words, 0), wkey, FI_UINT64, FI_SUM, nullptr),
            0);
  ASSERT_EQ(fi_inject_atomic(a, &one, 1, t, remote(words, 0), wkey, FI_UINT64, FI_SUM), 0);
  ASSERT_EQ(fi_read(a, in.data(), in.size(), nullptr, t, remote(memory.data()), key, nullptr), 0);
  ASSERT_EQ(fi_read(a, in.data(), 0, nullptr, t, remote(memory.data()), key, nullptr), 0);
  ASSERT_EQ(fi_fetch_atomic(a, &one, 1, nullptr, &fetched[0], nullptr, t, remote(words, 8), wkey,
                            FI_UINT64, FI_SUM, nullptr),
            0);
  ASSERT_EQ(fi_compare_atomic(a, &swap, 1, nullptr, &compare, nullptr, &fetched[1], nullptr, t,
                              remote(words, 8), wkey, FI_UINT64, FI_CSWAP, nullptr),
            0);
  ASSERT_EQ(fi_fetch_atomic(a, nullptr, 1, nullptr, &fetched[2], nullptr, t, remote(words, 16),
                            wkey, FI_UINT64, FI_ATOMIC_READ, nullptr),
            0);
  // 10 initiator completions (the injects report none) and the target's entry for the
  // write with data.
  std::vector<fi_cq_tagged_entry> done = wait(11);
  EXPECT_EQ(std::count_if(done.begin(), done.end(),
                          [](const auto& e) { return (e.flags & FI_REMOTE_CQ_DATA) != 0; }),
            1);
  EXPECT_EQ(settle(remote_writes, 7), 7u);
  EXPECT_EQ(settle(remote_reads, 5), 5u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin()));
  EXPECT_EQ(words[0], 12u);
  EXPECT_EQ(fetched[0], 20u);
  EXPECT_EQ(words[1], 21u);  // the compare matched nothing: no swap
  EXPECT_EQ(fetched[2], 30u);

  // Refused at the target: a wrong key, out of bounds, misaligned. None counts (the
  // target refuses before it answers, so a count would be there by now).
  ASSERT_EQ(fi_write(a, out.data(), 8, nullptr, t, remote(memory.data()), key + 100, nullptr), 0);
  EXPECT_EQ(wait_error().err, FI_EKEYREJECTED);
  ASSERT_EQ(
      fi_read(a, in.data(), 16, nullptr, t, remote(memory.data(), memory.size() - 8), key, nullptr),
      0);
  EXPECT_EQ(wait_error().err, FI_EINVAL);
  ASSERT_EQ(fi_atomic(a, &one, 1, nullptr, t, remote(words, 4), wkey, FI_UINT64, FI_SUM, nullptr),
            0);
  EXPECT_EQ(wait_error().err, FI_EINVAL);
  ASSERT_EQ(fi_fetch_atomic(a, &one, 1, nullptr, &fetched[0], nullptr, t, remote(words, 4), wkey,
                            FI_UINT64, FI_SUM, nullptr),
            0);
  EXPECT_EQ(wait_error().err, FI_EINVAL);
  EXPECT_EQ(settle(remote_writes, 7), 7u);
  EXPECT_EQ(settle(remote_reads, 5), 5u);
  EXPECT_EQ(fi_cntr_readerr(remote_writes) + fi_cntr_readerr(remote_reads), 0u);
  EXPECT_EQ(fi_close(&remote_reads->fid), -FI_EBUSY);  // bound to the endpoint still
  EXPECT_EQ(fi_close(&target->fid), 0);
  eps.pop_back();
  EXPECT_EQ(fi_close(&remote_reads->fid), 0);
  EXPECT_EQ(fi_close(&remote_writes->fid), 0);
}

TEST_F(RmaEvent, endpoint_counter__a_write_counts_once_its_bytes_are_in_place) {
  fid_cntr* remote_writes = counter();
  fid_ep* a = endpoint();
  endpoint(remote_writes, FI_REMOTE_WRITE);
  std::vector<uint8_t> memory(200000, 0);
  fid_mr* mr = reg(memory.data(), memory.size());
  for (uint64_t i = 1; i <= 20; ++i) {
    SCOPED_TRACE(i);
    const auto out = pattern(memory.size(), static_cast<uint8_t>(i));
    ASSERT_EQ(fi_write(a, out.data(), out.size(), nullptr, addrs[1], remote(memory.data()),
                       fi_mr_key(mr), nullptr),
              0);
    // The target's count, seen before the initiator hears of the write: the bytes must
    // already be there.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (fi_cntr_read(remote_writes) < i && std::chrono::steady_clock::now() < deadline) {
    }
    ASSERT_EQ(fi_cntr_read(remote_writes), i);
    ASSERT_TRUE(std::equal(out.begin(), out.end(), memory.begin()));
    wait(1);
  }
  EXPECT_EQ(fi_close(&eps[1]->fid), 0);
  eps.pop_back();
  EXPECT_EQ(fi_close(&remote_writes->fid), 0);
}

TEST_F(RmaEvent, region_counter__counts_the_writes_and_atomics_that_change_its_region) {
  fid_cntr* changes = counter();
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) uint64_t counted[2] = {5, 6};
  alignas(8) uint64_t other[2] = {7, 8};
  fid_mr* mr = reg(counted, sizeof(counted), FI_RMA_EVENT);
  fid_mr* other_mr = reg(other, sizeof(other));
  EXPECT_EQ(fi_mr_bind(mr, &changes->fid, FI_REMOTE_READ), -FI_EBADFLAGS);  // fi_mr(3): writes only
  ASSERT_EQ(fi_mr_bind(mr, &changes->fid, FI_REMOTE_WRITE), 0);
  const uint64_t key = fi_mr_key(mr), other_key = fi_mr_key(other_mr);
  uint64_t v = 1, fetched = 0;
  // Counted: a write, a fetching sum, a plain sum. Not: a read, an atomic read, a write
  // to another region, a refused write.
  ASSERT_EQ(fi_write(a, &v, 8, nullptr, addrs[1], remote(counted), key, nullptr), 0);
  ASSERT_EQ(fi_fetch_atomic(a, &v, 1, nullptr, &fetched, nullptr, addrs[1], remote(counted, 8), key,
                            FI_UINT64, FI_SUM, nullptr),
            0);
  ASSERT_EQ(
      fi_atomic(a, &v, 1, nullptr, addrs[1], remote(counted, 8), key, FI_UINT64, FI_SUM, nullptr),
      0);
  ASSERT_EQ(fi_read(a, &fetched, 8, nullptr, addrs[1], remote(counted), key, nullptr), 0);
  ASSERT_EQ(fi_fetch_atomic(a, nullptr, 1, nullptr, &fetched, nullptr, addrs[1], remote(counted),
                            key, FI_UINT64, FI_ATOMIC_READ, nullptr),
            0);
  ASSERT_EQ(fi_write(a, &v, 8, nullptr, addrs[1], remote(other), other_key, nullptr), 0);
  wait(6);
  const uint64_t sixteen_bytes[2] = {1, 1};  // one word past the region's end
  ASSERT_EQ(fi_write(a, sixteen_bytes, 16, nullptr, addrs[1], remote(counted, 8), key, nullptr), 0);
  EXPECT_EQ(wait_error().err, FI_EINVAL);
  EXPECT_EQ(settle(changes, 3), 3u);
  EXPECT_EQ(counted[1], 8u);

  // The counter stays open while a region counts on it; one counter per region.
  fid_cntr* second = counter();
  EXPECT_EQ(fi_mr_bind(mr, &second->fid, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(fi_close(&changes->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&mr->fid), 0);
  mrs.erase(mrs.begin());
  EXPECT_EQ(fi_close(&changes->fid), 0);
  // A counter woken through a descriptor: no region can signal it.
  fid_cntr* fd_counter = counter(FI_WAIT_FD);
  EXPECT_EQ(fi_mr_bind(other_mr, &fd_counter->fid, FI_REMOTE_WRITE), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_close(&fd_counter->fid), 0);
  EXPECT_EQ(fi_close(&second->fid), 0);
}

TEST_F(RmaEvent, without_fi_rma_event__remote_counters_are_refused) {
  TearDown();
  mrs.clear();
  eps.clear();
  addrs.clear();
  open(FI_EP_RDM, FI_MSG | FI_RMA, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
  ASSERT_FALSE(info->caps & FI_RMA_EVENT);
  fid_cntr* c = counter();
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
  EXPECT_EQ(fi_ep_bind(ep, &c->fid, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &c->fid, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &c->fid, FI_WRITE), 0);
  EXPECT_EQ(fi_close(&ep->fid), 0);
  EXPECT_EQ(fi_close(&c->fid), 0);
}

}  // namespace
}  // namespace spray_fi_test
