// FI_RMA through the public libfabric API: fi_write/fi_read (and data, inject, msg forms)
// into registered memory under each memory-registration mode an application may ask
// for (FI_MR_PROV_KEY + FI_MR_VIRT_ADDR, application keys with offset addressing,
// FI_MR_ENDPOINT), and the errors: wrong key, out of bounds, missing rights.
#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

constexpr uint64_t kRma = FI_MSG | FI_RMA;

struct Rma : RegisteringFabric {
  void SetUp() override { open(FI_EP_RDM, kRma, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR); }
};

TEST_F(Rma, getinfo__offers_rma_with_directions_and_one_rma_iov) {
  EXPECT_EQ(info->caps & (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE),
            FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
  EXPECT_EQ(info->tx_attr->rma_iov_limit, 1u);
  EXPECT_EQ(info->domain_attr->mr_mode, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
}

TEST_F(Rma, write_then_read__every_size_lands_exactly_where_addressed) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(1 << 20, 0xee);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(mr);
  for (const size_t size : {size_t{0}, size_t{1}, size_t{4000}, size_t{300000}}) {
    SCOPED_TRACE(size);
    std::fill(target.begin(), target.end(), 0xee);
    const auto out = pattern(size, static_cast<uint8_t>(size));
    int wctx = 0;
    ASSERT_EQ(
        fi_write(a, out.data(), size, nullptr, addrs[1], remote(target.data(), 1000), key, &wctx),
        0);
    auto w = wait(1);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].op_context, &wctx);
    EXPECT_EQ(w[0].flags & (FI_RMA | FI_WRITE), FI_RMA | FI_WRITE);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), target.begin() + 1000));
    EXPECT_EQ(target[999], 0xee);
    EXPECT_EQ(target[1000 + size], 0xee);

    std::vector<uint8_t> back(size + 1, 0x11);
    int rctx = 0;
    ASSERT_EQ(
        fi_read(a, back.data(), size, nullptr, addrs[1], remote(target.data(), 1000), key, &rctx),
        0);
    auto r = wait(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].flags & (FI_RMA | FI_READ), FI_RMA | FI_READ);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), back.begin()));
    EXPECT_EQ(back[size], 0x11);
  }
}

// An endpoint opened with spray's msg_order (any RDM endpoint from fi_getinfo) keeps the
// data orders it reports (max_order_raw_size -1, max_order_war_size 1024): posted without
// waiting, a read sees all of a large write before it, and a small read does not see the
// write after it. When reads went on a PDC of their own, the read overtook the 300 KB
// write over plain loopback.
TEST_F(Rma, ordered__a_read_sees_the_writes_before_it_and_none_after) {
  EXPECT_EQ(info->ep_attr->max_order_raw_size, SIZE_MAX);
  EXPECT_EQ(info->ep_attr->max_order_war_size, 1024u);
  fid_ep* a = endpoint();
  endpoint();
  constexpr size_t kBlock = 300000;
  std::vector<uint8_t> target(kBlock + 8, 0);  // a block, then a word
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(mr);
  uint8_t* const word = target.data() + kBlock;
  for (uint8_t round = 1; round <= 20; ++round) {
    SCOPED_TRACE(static_cast<int>(round));
    const std::vector<uint8_t> block(kBlock, round);
    const std::vector<uint8_t> next(8, round);
    std::vector<uint8_t> block_end(8, 0xee), word_before(8, 0xee);
    ASSERT_EQ(fi_write(a, block.data(), kBlock, nullptr, addrs[1], remote(target.data(), 0), key,
                       nullptr),
              0);
    ASSERT_EQ(fi_read(a, block_end.data(), 8, nullptr, addrs[1], remote(target.data(), kBlock - 8),
                      key, nullptr),
              0);
    ASSERT_EQ(fi_read(a, word_before.data(), 8, nullptr, addrs[1], remote(word, 0), key, nullptr),
              0);
    ASSERT_EQ(fi_write(a, next.data(), 8, nullptr, addrs[1], remote(word, 0), key, nullptr), 0);
    ASSERT_EQ(wait(4).size(), 4u);
    EXPECT_EQ(block_end, std::vector<uint8_t>(8, round));        // read after write
    EXPECT_EQ(word_before, std::vector<uint8_t>(8, round - 1));  // write after read
    EXPECT_EQ(std::vector<uint8_t>(word, word + 8), next);       // the last write
  }
}

TEST_F(Rma, writedata__completes_at_the_target_with_its_data) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(64, 0);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_WRITE);
  const char msg[] = "immediate";
  int ctx = 0;
  ASSERT_EQ(fi_writedata(a, msg, sizeof(msg), nullptr, 0xabcdef, addrs[1], remote(target.data(), 8),
                         fi_mr_key(mr), &ctx),
            0);
  std::vector<fi_addr_t> from;
  auto done = wait(2, &from);
  ASSERT_EQ(done.size(), 2u);
  bool saw_target = false;
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].flags & FI_REMOTE_WRITE) {
      saw_target = true;
      EXPECT_TRUE(done[i].flags & FI_REMOTE_CQ_DATA);
      EXPECT_EQ(done[i].data, 0xabcdefu);
      EXPECT_EQ(done[i].op_context, nullptr);
      EXPECT_EQ(from[i], addrs[0]);
    } else {
      EXPECT_EQ(done[i].op_context, &ctx);
    }
  }
  EXPECT_TRUE(saw_target);
  EXPECT_STREQ(reinterpret_cast<const char*>(target.data() + 8), msg);
}

TEST_F(Rma, inject_write__needs_no_buffer_and_reports_nothing) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(256, 0);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_WRITE);
  uint8_t src[100];
  std::memset(src, 0x5c, sizeof(src));
  ASSERT_EQ(fi_inject_write(a, src, sizeof(src), addrs[1], remote(target.data(), 0), fi_mr_key(mr)),
            0);
  std::memset(src, 0, sizeof(src));  // reusable at once
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (target[99] != 0x5c && std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);  // drives progress; nothing to report
  }
  EXPECT_EQ(std::count(target.begin(), target.begin() + 100, 0x5c), 100);
  EXPECT_EQ(target[100], 0);
}

TEST_F(Rma, more__a_write_posted_with_FI_MORE_lands_with_the_next_one_without_it) {
  SKIP_UNLESS_STRICT_MANUAL_PROGRESS();
  ASSERT_EQ(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
  fid_ep* a = endpoint();
  SeparateDomain far;
  ASSERT_TRUE(far.open(fabric, info, av, a));
  std::vector<uint8_t> target(64, 0);
  fid_mr* mr = nullptr;
  ASSERT_EQ(
      fi_mr_reg(far.domain, target.data(), target.size(), FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr),
      0);
  const uint8_t bytes[2] = {0x5a, 0xa5};
  auto write = [&](size_t i, uint64_t flags) {
    const iovec iov{const_cast<uint8_t*>(&bytes[i]), 1};
    const fi_rma_iov rma{remote(target.data(), i), 1, fi_mr_key(mr)};
    fi_msg_rma m{};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = far.address;
    m.rma_iov = &rma;
    m.rma_iov_count = 1;
    m.context = const_cast<uint8_t*>(&bytes[i]);
    return fi_writemsg(a, &m, flags);
  };
  ASSERT_EQ(write(0, FI_MORE), 0);
  EXPECT_EQ(far.poll(1, 50), 0);  // far progresses; nothing has come to write
  EXPECT_EQ(target[0], 0);
  ASSERT_EQ(write(1, 0), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((target[0] == 0 || target[1] == 0) && std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(far.poll(1, 1), 0);  // writes without data complete nothing at the target
  }
  EXPECT_EQ(target[0], 0x5a);
  EXPECT_EQ(target[1], 0xa5);
  EXPECT_EQ(target[2], 0);
  EXPECT_EQ(wait(2).size(), 2u);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST_F(Rma, errors__wrong_key_bounds_or_rights_fail_and_touch_nothing) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(4096, 0xee), readonly(4096, 0x77), local(8192, 1);
  fid_mr* rw = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  fid_mr* ro = reg(readonly.data(), readonly.size(), FI_REMOTE_READ);
  fid_mr* wo = reg(local.data(), 16, FI_REMOTE_WRITE);
  struct Case {
    const char* what;
    bool write;
    uint64_t addr;
    size_t len;
    uint64_t key;
    int err;
  };
  const Case cases[] = {
      {"unknown key", true, remote(target.data(), 0), 8, fi_mr_key(rw) + 1000, FI_EKEYREJECTED},
      {"past the end", true, remote(target.data(), 4000), 200, fi_mr_key(rw), FI_EINVAL},
      {"before the start", false, remote(target.data(), 0) - 8, 16, fi_mr_key(rw), FI_EINVAL},
      {"write to read-only", true, remote(readonly.data(), 0), 8, fi_mr_key(ro), FI_EACCES},
      {"read of write-only", false, remote(local.data(), 0), 8, fi_mr_key(wo), FI_EACCES},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int ctx = 0;
    std::vector<uint8_t> into(c.len, 0x42);
    const ssize_t rc =
        c.write ? fi_write(a, local.data(), c.len, nullptr, addrs[1], c.addr, c.key, &ctx)
                : fi_read(a, into.data(), c.len, nullptr, addrs[1], c.addr, c.key, &ctx);
    ASSERT_EQ(rc, 0);
    const fi_cq_err_entry err = wait_error();
    EXPECT_EQ(err.err, c.err) << fi_strerror(err.err);
    EXPECT_EQ(err.op_context, &ctx);
    EXPECT_EQ(std::count(into.begin(), into.end(), 0x42), static_cast<long>(c.len));
  }
  EXPECT_EQ(std::count(target.begin(), target.end(), 0xee), 4096);
  EXPECT_EQ(std::count(readonly.begin(), readonly.end(), 0x77), 4096);
  // Misuse caught before anything is sent.
  EXPECT_EQ(fi_write(a, nullptr, 8, nullptr, addrs[1], 0, fi_mr_key(rw), nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_write(a, local.data(), 8, nullptr, 9999, 0, fi_mr_key(rw), nullptr), -FI_EINVAL);
  std::vector<uint8_t> big(info->tx_attr->inject_size + 1);
  EXPECT_EQ(fi_inject_write(a, big.data(), big.size(), addrs[1], 0, fi_mr_key(rw)), -FI_EINVAL);
}

TEST_F(Rma, counters__count_reads_and_writes_apart) {
  fid_cntr* reads = nullptr;
  fid_cntr* writes = nullptr;
  fi_cntr_attr attr{};
  attr.events = FI_CNTR_EVENTS_COMP;
  ASSERT_EQ(fi_cntr_open(domain, &attr, &reads, nullptr), 0);
  ASSERT_EQ(fi_cntr_open(domain, &attr, &writes, nullptr), 0);
  fid_ep* a = endpoint_counting({{reads, FI_READ}, {writes, FI_WRITE}});
  endpoint();
  std::vector<uint8_t> target(64, 0), local(64, 3);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(fi_write(a, local.data(), 64, nullptr, addrs[1], remote(target.data(), 0),
                       fi_mr_key(mr), nullptr),
              0);
  }
  ASSERT_EQ(fi_read(a, local.data(), 64, nullptr, addrs[1], remote(target.data(), 0), fi_mr_key(mr),
                    nullptr),
            0);
  // Manual progress: the target (another process in real life) moves only when its CQ
  // is driven, so drive the shared CQ until the counters reach their counts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<fi_cq_tagged_entry> done;
  while ((fi_cntr_read(writes) < 3 || fi_cntr_read(reads) < 1) &&
         std::chrono::steady_clock::now() < deadline) {
    fi_cq_tagged_entry e;
    if (fi_cq_read(cq, &e, 1) == 1) done.push_back(e);
  }
  EXPECT_EQ(fi_cntr_wait(writes, 3, 1000), 0);
  EXPECT_EQ(fi_cntr_wait(reads, 1, 1000), 0);
  EXPECT_EQ(fi_cntr_read(writes), 3u);
  EXPECT_EQ(fi_cntr_read(reads), 1u);
  EXPECT_EQ(fi_cntr_readerr(writes) + fi_cntr_readerr(reads), 0u);
  const auto rest = wait(4 - done.size());  // the CQ saw all four as well
  EXPECT_EQ(done.size() + rest.size(), 4u);
  EXPECT_EQ(fi_close(&a->fid), 0);
  eps.erase(eps.begin());
  EXPECT_EQ(fi_close(&reads->fid), 0);
  EXPECT_EQ(fi_close(&writes->fid), 0);
}

TEST_F(Rma, dgram_or_no_fi_rma__rma_is_not_supported) {
  Fabric::TearDown();
  mrs.clear();
  eps.clear();
  addrs.clear();
  open(FI_EP_RDM, FI_MSG | FI_TAGGED);
  fid_ep* a = endpoint();
  char buf[8] = {};
  EXPECT_EQ(fi_write(a, buf, 8, nullptr, addrs[0], 0, 1, nullptr), -FI_ENOSYS);
  EXPECT_EQ(fi_read(a, buf, 8, nullptr, addrs[0], 0, 1, nullptr), -FI_ENOSYS);
}

// Application-chosen keys, addresses as offsets into the region.
struct RmaOffsets : Rma {
  void SetUp() override { open(FI_EP_RDM, kRma, 0); }
};

TEST_F(RmaOffsets, keys_are_the_applications_and_addresses_are_offsets) {
  EXPECT_EQ(info->domain_attr->mr_mode, 0);
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(128, 0);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_WRITE, 77);
  EXPECT_EQ(fi_mr_key(mr), 77u);
  fid_mr* dup = nullptr;
  EXPECT_EQ(fi_mr_reg(domain, target.data(), 8, FI_REMOTE_WRITE, 0, 77, 0, &dup, nullptr),
            -FI_ENOKEY);
  const uint64_t v = 0x0123456789abcdefULL;
  ASSERT_EQ(fi_write(a, &v, 8, nullptr, addrs[1], 16, 77, nullptr), 0);
  wait(1);
  uint64_t landed = 0;
  std::memcpy(&landed, target.data() + 16, 8);
  EXPECT_EQ(landed, v);
}

// An application of the API before 1.5 names provider keys and virtual addresses
// FI_MR_BASIC, and hands that value to fi_domain.
struct RmaBasicModeOfOldApi : Rma {
  void SetUp() override {
    api_version = FI_VERSION(1, 4);
    open(FI_EP_RDM, kRma, FI_MR_BASIC);
  }
};

TEST_F(RmaBasicModeOfOldApi, keys_are_the_providers_and_addresses_virtual) {
  ASSERT_EQ(info->domain_attr->mr_mode, FI_MR_BASIC);
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(128, 0);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_WRITE, 77);
  fid_mr* other = reg(target.data(), 8, FI_REMOTE_WRITE, 77);
  ASSERT_NE(other, nullptr) << "a key the application asked for twice: ours, not its";
  EXPECT_NE(fi_mr_key(mr), fi_mr_key(other));
  const uint64_t v = 0x0123456789abcdefULL;
  const uint64_t address = reinterpret_cast<uintptr_t>(target.data()) + 16;
  ASSERT_EQ(fi_write(a, &v, 8, nullptr, addrs[1], address, fi_mr_key(mr), nullptr), 0);
  wait(1);
  uint64_t landed = 0;
  std::memcpy(&landed, target.data() + 16, 8);
  EXPECT_EQ(landed, v);
}

// FI_MR_ENDPOINT: a region serves remote access only once bound to an endpoint and enabled.
struct RmaEndpointRegions : Rma {
  void SetUp() override {
    open(FI_EP_RDM, kRma, FI_MR_ENDPOINT | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
  }
};

TEST_F(RmaEndpointRegions, region_serves_only_after_bind_and_enable) {
  ASSERT_TRUE(info->domain_attr->mr_mode & FI_MR_ENDPOINT);
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  std::vector<uint8_t> target(64, 0);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_WRITE);
  EXPECT_EQ(fi_mr_enable(mr), -FI_EINVAL);  // not bound yet
  uint32_t v = 0xfeedbeef;
  ASSERT_EQ(fi_write(a, &v, 4, nullptr, addrs[1], remote(target.data(), 0), fi_mr_key(mr), &v), 0);
  EXPECT_EQ(wait_error().err, FI_EKEYREJECTED);  // b does not know the key yet
  ASSERT_EQ(fi_mr_bind(mr, &b->fid, 0), 0);
  ASSERT_EQ(fi_mr_enable(mr), 0);
  ASSERT_EQ(fi_write(a, &v, 4, nullptr, addrs[1], remote(target.data(), 0), fi_mr_key(mr), &v), 0);
  wait(1);
  uint32_t landed = 0;
  std::memcpy(&landed, target.data(), 4);
  EXPECT_EQ(landed, v);
}

}  // namespace
}  // namespace spray_fi_test
