// FI_PEEK, FI_CLAIM and FI_DISCARD on tagged receives through the public libfabric API,
// as Open MPI's OFI MTL uses them for MPI_Iprobe, MPI_Improbe and MPI_Mrecv.
#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct Probe : Fabric {
  size_t sends_done = 0;  // send completions seen while waiting for a receive's

  // Issues fi_trecvmsg with `flags` and returns its completion: a success (found) or
  // an error entry (err set). Send completions on the way are counted, not returned.
  struct Outcome {
    bool found = false;
    fi_cq_tagged_entry entry{};
    fi_addr_t source = FI_ADDR_NOTAVAIL;
    int err = 0;
  };
  Outcome trecvmsg(fid_ep* ep, void* buf, size_t len, uint64_t tag, uint64_t ignore,
                   fi_context2* ctx, uint64_t flags, fi_addr_t src = FI_ADDR_UNSPEC) {
    iovec iov{buf, len};
    fi_msg_tagged msg{};
    msg.msg_iov = buf ? &iov : nullptr;
    msg.iov_count = buf ? 1 : 0;
    msg.addr = src;
    msg.tag = tag;
    msg.ignore = ignore;
    msg.context = ctx;
    Outcome o;
    const ssize_t rc = fi_trecvmsg(ep, &msg, flags | FI_COMPLETION);
    EXPECT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
    if (rc != 0) return o;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t r = fi_cq_readfrom(cq, &o.entry, 1, &o.source);
      if (r == 1 && (o.entry.flags & FI_SEND)) {
        ++sends_done;
        continue;
      }
      if (r == 1) {
        EXPECT_EQ(o.entry.op_context, ctx);
        o.found = true;
        return o;
      }
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        EXPECT_EQ(fi_cq_readerr(cq, &err, 0), 1);
        EXPECT_EQ(err.op_context, ctx);
        o.err = err.err;
        return o;
      }
    }
    ADD_FAILURE() << "no completion for the probe";
    return o;
  }
  // Waits until `n` sends in all have completed.
  void wait_sends(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sends_done < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      if (fi_cq_read(cq, &e, 1) == 1) {
        EXPECT_TRUE(e.flags & FI_SEND);
        ++sends_done;
      }
    }
    EXPECT_EQ(sends_done, n);
  }
  // Peeks (with `flags` added) until a message is found, within 10 s.
  Outcome peek_until_found(fid_ep* ep, uint64_t tag, uint64_t ignore, fi_context2* ctx,
                           uint64_t flags = 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    Outcome o;
    while (!o.found && std::chrono::steady_clock::now() < deadline) {
      o = trecvmsg(ep, nullptr, 0, tag, ignore, ctx, FI_PEEK | flags);
      if (!o.found) {
        EXPECT_EQ(o.err, FI_ENOMSG);
      }
    }
    return o;
  }
};

TEST_F(Probe, peek__reports_enomsg_then_the_message_which_stays_for_a_receive) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  fi_context2 pctx{};
  auto none = trecvmsg(b, nullptr, 0, 0x42, 0, &pctx, FI_PEEK);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.err, FI_ENOMSG);

  auto out = pattern(3000, 3);
  ASSERT_EQ(fi_tsenddata(a, out.data(), out.size(), nullptr, 0xda7a, addrs[1], 0x42, nullptr), 0);
  auto hit = peek_until_found(b, 0x40, 0x0f, &pctx);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.entry.len, out.size());
  EXPECT_EQ(hit.entry.tag, 0x42u);
  EXPECT_TRUE(hit.entry.flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(hit.entry.data, 0xda7au);
  EXPECT_EQ(hit.source, addrs[0]);
  EXPECT_EQ(hit.entry.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);

  std::vector<uint8_t> in(out.size());
  fi_context2 rctx{};
  auto got = trecvmsg(b, in.data(), in.size(), 0x42, 0, &rctx, 0);
  ASSERT_TRUE(got.found);
  EXPECT_EQ(got.entry.len, out.size());
  EXPECT_EQ(in, out);
  wait_sends(1);
  EXPECT_FALSE(trecvmsg(b, nullptr, 0, 0x42, 0, &pctx, FI_PEEK).found);  // taken
}

TEST_F(Probe, peek__directed_at_a_source_sees_only_that_source) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  fid_ep* c = endpoint();
  uint64_t from_a = 1, from_c = 2;
  ASSERT_EQ(fi_tsend(a, &from_a, 8, nullptr, addrs[1], 7, nullptr), 0);
  wait_sends(1);
  fi_context2 ctx{};
  EXPECT_EQ(trecvmsg(b, nullptr, 0, 7, 0, &ctx, FI_PEEK, addrs[2]).err, FI_ENOMSG);
  ASSERT_EQ(fi_tsend(c, &from_c, 8, nullptr, addrs[1], 7, nullptr), 0);
  wait_sends(2);
  auto hit = trecvmsg(b, nullptr, 0, 7, 0, &ctx, FI_PEEK, addrs[2]);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.source, addrs[2]);
}

// MPI_Improbe + MPI_Mrecv: the claimed message goes only to the FI_CLAIM receive with the
// same context, even when a wildcard receive is posted in between. Eager and rendezvous.
TEST_F(Probe, claim__hands_the_message_to_the_claiming_receive_only) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  size_t sent = 0;
  for (const size_t size : {size_t{100}, size_t{300000}}) {
    SCOPED_TRACE(size);
    auto first = pattern(size, 1), second = pattern(size, 2);
    ASSERT_EQ(fi_tsend(a, first.data(), size, nullptr, addrs[1], 5, nullptr), 0);
    ASSERT_EQ(fi_tsend(a, second.data(), size, nullptr, addrs[1], 5, nullptr), 0);
    fi_context2 claim{};
    auto hit = peek_until_found(b, 5, 0, &claim, FI_CLAIM);
    ASSERT_TRUE(hit.found);
    EXPECT_EQ(hit.entry.len, size);

    std::vector<uint8_t> in2(size), in1(size);
    fi_context2 wildcard{};
    auto w = trecvmsg(b, in2.data(), size, 0, ~0ull, &wildcard, 0);
    ASSERT_TRUE(w.found);
    EXPECT_EQ(in2, second);
    auto mine = trecvmsg(b, in1.data(), size, 0, 0, &claim, FI_CLAIM);
    ASSERT_TRUE(mine.found);
    EXPECT_EQ(mine.entry.len, size);
    EXPECT_EQ(in1, first);
    wait_sends(sent += 2);
  }
}

TEST_F(Probe, discard__with_peek_or_after_a_claim_drops_the_message) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  auto dropped = pattern(5000, 4), kept = pattern(5000, 5), claimed = pattern(200000, 6);
  ASSERT_EQ(fi_tsend(a, dropped.data(), dropped.size(), nullptr, addrs[1], 1, nullptr), 0);
  ASSERT_EQ(fi_tsend(a, claimed.data(), claimed.size(), nullptr, addrs[1], 2, nullptr), 0);
  ASSERT_EQ(fi_tsend(a, kept.data(), kept.size(), nullptr, addrs[1], 1, nullptr), 0);
  fi_context2 ctx{};
  auto d = peek_until_found(b, 1, 0, &ctx, FI_DISCARD);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.entry.len, dropped.size());

  fi_context2 claim{};
  ASSERT_TRUE(peek_until_found(b, 2, 0, &claim, FI_CLAIM).found);
  auto gone = trecvmsg(b, nullptr, 0, 2, 0, &claim, FI_CLAIM | FI_DISCARD);
  ASSERT_TRUE(gone.found);
  EXPECT_EQ(gone.entry.len, 0u);

  std::vector<uint8_t> in(kept.size());
  auto r = trecvmsg(b, in.data(), in.size(), 1, 0, &ctx, 0);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(in, kept);
  wait_sends(3);  // every send completes, the discarded ones too
}

TEST_F(Probe, misuse__claim_without_a_peek_and_discard_alone_are_invalid) {
  endpoint();
  fid_ep* b = endpoint();
  char buf[8];
  iovec iov{buf, sizeof(buf)};
  fi_context2 ctx{};
  fi_msg_tagged msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = FI_ADDR_UNSPEC;
  msg.context = &ctx;
  EXPECT_EQ(fi_trecvmsg(b, &msg, FI_CLAIM), -FI_EINVAL);  // nothing claimed with ctx
  EXPECT_EQ(fi_trecvmsg(b, &msg, FI_DISCARD), -FI_EINVAL);
  msg.context = nullptr;
  EXPECT_EQ(fi_trecvmsg(b, &msg, FI_PEEK | FI_CLAIM), -FI_EINVAL);  // a claim needs a context
}

}  // namespace
}  // namespace spray_fi_test
