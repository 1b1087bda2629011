// FI_MULTI_RECV through the public libfabric API: one posted buffer takes message after
// message, packed back to back in the order they match, and keeps its place in the queue
// until less than FI_OPT_MIN_MULTI_RECV bytes remain; the completion that releases it
// (the last of its messages to complete) carries FI_MULTI_RECV.
#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct MultiRecv : Fabric {
  void SetUp() override { open(FI_EP_RDM, FI_MSG | FI_TAGGED | FI_MULTI_RECV | FI_SOURCE); }

  ssize_t post_multi(fid_ep* ep, std::vector<uint8_t>& buf, void* ctx) {
    iovec iov{buf.data(), buf.size()};
    fi_msg msg{};
    msg.msg_iov = &iov;
    msg.iov_count = 1;
    msg.addr = FI_ADDR_UNSPEC;
    msg.context = ctx;
    return fi_recvmsg(ep, &msg, FI_MULTI_RECV);
  }
  // Receive completions only (sends are counted and dropped), `n` of them within 10 s.
  std::vector<fi_cq_tagged_entry> receives(size_t n) {
    std::vector<fi_cq_tagged_entry> out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      if (r == 1 && (e.flags & FI_RECV)) out.push_back(e);
      if (r == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ADD_FAILURE() << "error completion: " << fi_strerror(err.err);
        break;
      }
    }
    EXPECT_EQ(out.size(), n);
    return out;
  }
  // Cancels the buffer posted with `ctx` and returns its error completion (send
  // completions still arriving are skipped).
  int cancel(fid_ep* ep, void* ctx) {
    EXPECT_EQ(fi_cancel(&ep->fid, ctx), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      EXPECT_TRUE(r != 1 || (e.flags & FI_SEND)) << "unexpected receive completion";
      fi_cq_err_entry err{};
      if (r == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) {
        EXPECT_EQ(err.op_context, ctx);
        return err.err;
      }
    }
    return 0;
  }
};

TEST_F(MultiRecv, messages_pack_into_one_buffer_until_it_is_released) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const size_t min = 101;
  ASSERT_EQ(fi_setopt(&b->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
  std::vector<uint8_t> buf(1000, 0xee);
  int ctx = 0;
  ASSERT_EQ(post_multi(b, buf, &ctx), 0);
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 4; ++i) sent.push_back(pattern(300, static_cast<uint8_t>(i)));
  for (auto& m : sent) ASSERT_EQ(fi_send(a, m.data(), m.size(), nullptr, addrs[1], nullptr), 0);

  // Three fit (900 bytes); 100 < 101 remain, so the third releases the buffer.
  auto got = receives(3);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].op_context, &ctx);
    EXPECT_EQ(got[i].len, 300u);
    EXPECT_EQ(got[i].buf, buf.data() + 300 * i);
    EXPECT_EQ((got[i].flags & FI_MULTI_RECV) != 0, i == 2) << i;
    EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), buf.begin() + 300 * i)) << i;
  }
  EXPECT_EQ(buf[900], 0xee);
  // The fourth waited, unexpected, for the next buffer.
  std::vector<uint8_t> next(4096);
  int ctx2 = 0;
  ASSERT_EQ(post_multi(b, next, &ctx2), 0);
  auto fourth = receives(1);
  ASSERT_EQ(fourth.size(), 1u);
  EXPECT_EQ(fourth[0].buf, next.data());
  EXPECT_TRUE(std::equal(sent[3].begin(), sent[3].end(), next.begin()));
  EXPECT_EQ(cancel(b, &ctx2), FI_ECANCELED);  // still posted with 3796 bytes left
}

TEST_F(MultiRecv, rendezvous_sized_messages_land_back_to_back) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  std::vector<uint8_t> buf(3 * 70000);
  int ctx = 0;
  ASSERT_EQ(post_multi(b, buf, &ctx), 0);
  auto m1 = pattern(70000, 1), m2 = pattern(70000, 2);
  ASSERT_EQ(fi_send(a, m1.data(), m1.size(), nullptr, addrs[1], nullptr), 0);
  ASSERT_EQ(fi_send(a, m2.data(), m2.size(), nullptr, addrs[1], nullptr), 0);
  auto got = receives(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].buf, buf.data() + 70000);
  EXPECT_TRUE(std::equal(m1.begin(), m1.end(), buf.begin()));
  EXPECT_TRUE(std::equal(m2.begin(), m2.end(), buf.begin() + 70000));
  EXPECT_EQ(cancel(b, &ctx), FI_ECANCELED);
}

// While a rendezvous message is still being read into the buffer, the eager messages
// behind it match the same buffer (it is still first in line), not the receive posted
// after it. They complete before the rendezvous does; its completion, the last, releases
// the buffer. (The buffer used to leave the queue until each message had landed, so
// the eager ones went to the later receive.)
TEST_F(MultiRecv, keeps_its_place_in_line_while_a_rendezvous_lands_in_it) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const size_t min = 64;
  ASSERT_EQ(fi_setopt(&b->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
  const auto big = pattern(70000, 1);
  std::vector<std::vector<uint8_t>> smalls;
  for (int i = 0; i < 3; ++i) smalls.push_back(pattern(100, static_cast<uint8_t>(2 + i)));
  std::vector<uint8_t> buf(70000 + 3 * 100 + 50, 0xee);  // 50 < 64 left after all four
  int ctx = 0;
  ASSERT_EQ(post_multi(b, buf, &ctx), 0);
  std::vector<uint8_t> later(4096, 0xee);
  int later_ctx = 0;
  ASSERT_EQ(fi_recv(b, later.data(), later.size(), nullptr, FI_ADDR_UNSPEC, &later_ctx), 0);
  ASSERT_EQ(fi_send(a, big.data(), big.size(), nullptr, addrs[1], nullptr), 0);
  for (auto& m : smalls) ASSERT_EQ(fi_send(a, m.data(), m.size(), nullptr, addrs[1], nullptr), 0);

  auto got = receives(4);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].op_context, &ctx) << i;
    EXPECT_EQ((got[i].flags & FI_MULTI_RECV) != 0, i == 3) << "only the last releases: " << i;
  }
  EXPECT_TRUE(std::equal(big.begin(), big.end(), buf.begin()));
  for (size_t i = 0; i < smalls.size(); ++i) {
    const auto at = buf.begin() + static_cast<ptrdiff_t>(70000 + 100 * i);
    EXPECT_TRUE(std::equal(smalls[i].begin(), smalls[i].end(), at)) << i;
    const bool reported =
        std::any_of(got.begin(), got.end(), [&](auto& e) { return e.buf == &*at && e.len == 100; });
    EXPECT_TRUE(reported) << "small " << i << " reported at its part";
  }
  EXPECT_EQ(buf[70300], 0xee);
  EXPECT_EQ(later[0], 0xee);
  EXPECT_EQ(cancel(b, &later_ctx), FI_ECANCELED);  // nothing went to the later receive
}

// fi_cancel at any moment of a rendezvous landing in the buffer: while the message is
// still arriving nothing of the buffer is posted, yet the cancel must hold (it used to
// return FI_ENOENT there, and the rest of the buffer was posted again for good). Each
// round cancels after one more CQ read, so some round catches the message mid-flight.
TEST_F(MultiRecv, cancel__while_a_message_lands_releases_the_buffer_after_it) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const auto big = pattern(300000, 7);
  for (int reads_before_cancel = 0; reads_before_cancel < 12; ++reads_before_cancel) {
    SCOPED_TRACE(reads_before_cancel);
    std::vector<uint8_t> buf(2 * big.size(), 0xee);
    int ctx = 0;
    ASSERT_EQ(post_multi(b, buf, &ctx), 0);
    int sctx = 0;
    ASSERT_EQ(fi_send(a, big.data(), big.size(), nullptr, addrs[1], &sctx), 0);
    // Completions read before the cancel: the send's, and the message's (if it landed).
    std::vector<fi_cq_tagged_entry> seen;
    for (int i = 0; i < reads_before_cancel; ++i) {
      fi_cq_tagged_entry e;
      if (fi_cq_read(cq, &e, 1) == 1) seen.push_back(e);
    }
    ASSERT_EQ(fi_cancel(&b->fid, &ctx), 0) << "the buffer is still posted in part";
    // Then one FI_ECANCELED entry releases the buffer; a message that matched before it
    // landed whole, and its completion came first (the CQ keeps completions in order).
    int canceled = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (canceled == 0 && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      if (r == 1) seen.push_back(e);
      fi_cq_err_entry err{};
      if (r == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) {
        EXPECT_EQ(err.err, FI_ECANCELED);
        EXPECT_EQ(err.op_context, &ctx);
        EXPECT_TRUE(err.flags & FI_MULTI_RECV);
        ++canceled;
      }
    }
    ASSERT_EQ(canceled, 1);
    const auto has = [&](void* c) {
      return std::any_of(seen.begin(), seen.end(), [&](auto& e) { return e.op_context == c; });
    };
    if (has(&ctx)) {
      EXPECT_TRUE(std::equal(big.begin(), big.end(), buf.begin()));
      if (!has(&sctx)) wait(1);  // the send's completion
    } else {
      // Canceled before the message matched: it waits, unexpected, for another receive.
      std::vector<uint8_t> in(big.size());
      ASSERT_EQ(fi_recv(b, in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &in), 0);
      wait(has(&sctx) ? 1 : 2);
      EXPECT_EQ(in, big);
    }
    EXPECT_EQ(buf[big.size()], 0xee);  // nothing more landed after the cancel
  }
}

TEST_F(MultiRecv, misuse__tagged_empty_or_without_the_capability_is_invalid) {
  endpoint();
  fid_ep* b = endpoint();
  std::vector<uint8_t> buf(100);
  iovec iov{buf.data(), buf.size()};
  fi_msg_tagged t{};
  t.msg_iov = &iov;
  t.iov_count = 1;
  t.addr = FI_ADDR_UNSPEC;
  EXPECT_EQ(fi_trecvmsg(b, &t, FI_MULTI_RECV), -FI_EINVAL);
  std::vector<uint8_t> empty;
  EXPECT_EQ(post_multi(b, empty, nullptr), -FI_EINVAL);
}

struct NoMultiRecvCap : MultiRecv {
  void SetUp() override { open(FI_EP_RDM, FI_MSG); }
};

TEST_F(NoMultiRecvCap, multi_recv_flag_without_the_capability_is_invalid) {
  fid_ep* b = endpoint();
  std::vector<uint8_t> buf(100);
  EXPECT_EQ(post_multi(b, buf, nullptr), -FI_EINVAL);
}

}  // namespace
}  // namespace spray_fi_test
