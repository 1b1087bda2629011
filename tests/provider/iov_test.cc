// Operations whose buffer comes in several pieces (iov_limit 4), through the public
// libfabric API: fi_sendv/fi_recvv, the tagged and *msg forms with immediate data and
// FI_INJECT, a claimed message received into pieces, fi_writev/fi_readv, and the atomic
// ioc forms. Every byte must land in its piece, in order, once, with the bytes around
// each piece untouched, eager and rendezvous alike; a truncated receive fills its
// pieces with the prefix; a receive cancelled or a read refused writes none of them;
// and misuse (too many pieces, a piece with bytes but no address, FI_MULTI_RECV over
// pieces, counts that disagree) is refused at the call.
#include <rdma/fi_atomic.h>

#include <algorithm>
#include <array>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

constexpr uint8_t kUntouched = 0xee;

// Buffers carved out of one allocation with a guard byte before and after each piece, so
// a copy that strays past its piece shows.
struct PieceBuffers {
  std::vector<uint8_t> memory;
  std::vector<iovec> iov;

  explicit PieceBuffers(std::initializer_list<size_t> lengths) {
    size_t total = 1;
    for (size_t n : lengths) total += n + 1;
    memory.assign(total, kUntouched);
    size_t at = 1;
    for (size_t n : lengths) {
      iov.push_back({memory.data() + at, n});
      at += n + 1;
    }
  }
  size_t bytes() const {
    size_t n = 0;
    for (const iovec& v : iov) n += v.iov_len;
    return n;
  }
  // The pieces' bytes in order.
  std::vector<uint8_t> joined() const {
    std::vector<uint8_t> out;
    for (const iovec& v : iov) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      out.insert(out.end(), p, p + v.iov_len);
    }
    return out;
  }
  void fill(const std::vector<uint8_t>& bytes) {
    size_t at = 0;
    for (const iovec& v : iov) {
      std::copy_n(bytes.begin() + at, v.iov_len, static_cast<uint8_t*>(v.iov_base));
      at += v.iov_len;
    }
  }
  // Every guard byte still kUntouched.
  bool guards_intact() const {
    size_t at = 0;
    for (const iovec& v : iov) {
      const size_t start =
          static_cast<size_t>(static_cast<const uint8_t*>(v.iov_base) - memory.data());
      if (memory[start - 1] != kUntouched) return false;
      at = start + v.iov_len;
      if (memory[at] != kUntouched) return false;
    }
    return true;
  }
};

struct Iov : Fabric {};

TEST_F(Iov, getinfo__offers_four_pieces_and_matches_hints_up_to_four) {
  EXPECT_EQ(info->tx_attr->iov_limit, 4u);
  EXPECT_EQ(info->rx_attr->iov_limit, 4u);
  for (const size_t want : {size_t{4}, size_t{5}}) {
    fi_info* hints = hints_for(FI_EP_RDM, FI_MSG);
    hints->tx_attr->iov_limit = want;
    hints->rx_attr->iov_limit = want;
    fi_info* got = getinfo(hints);
    EXPECT_EQ(got != nullptr, want == 4) << want;
    fi_freeinfo(got);
  }
}

// Sends of every size class from pieces into receives of differently cut pieces: eager
// (within a packet, several packets) and rendezvous (above 64 KiB), each byte in place.
TEST_F(Iov, sendv_into_recvv__every_byte_lands_in_its_piece) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  for (const size_t unit : {size_t{1}, size_t{300}, size_t{7000}, size_t{40000}}) {
    SCOPED_TRACE(unit);
    PieceBuffers out({unit, 0, 3 * unit, unit + 5});  // an empty piece among them
    PieceBuffers in({2 * unit + 1, unit, 2 * unit + 4});
    ASSERT_EQ(in.bytes(), out.bytes());
    const auto message = pattern(out.bytes(), static_cast<uint8_t>(unit));
    out.fill(message);
    int rctx = 0, sctx = 0;
    ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, in.iov.size(), FI_ADDR_UNSPEC, &rctx), 0);
    ASSERT_EQ(fi_sendv(a, out.iov.data(), nullptr, out.iov.size(), addrs[1], &sctx), 0);
    const auto done = wait(2);
    ASSERT_EQ(done.size(), 2u);
    for (const auto& e : done) {
      if (e.op_context == &rctx) {
        EXPECT_EQ(e.len, message.size());
        EXPECT_EQ(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
      } else {
        EXPECT_EQ(e.op_context, &sctx);
      }
    }
    EXPECT_EQ(in.joined(), message);
    EXPECT_TRUE(in.guards_intact());
    EXPECT_EQ(out.joined(), message);  // the source is only read
  }
}

TEST_F(Iov, tagged_msg_forms__carry_tag_and_data_and_take_one_piece_or_several) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  PieceBuffers out({10, 20000, 70000});
  const auto message = pattern(out.bytes(), 3);
  out.fill(message);
  std::vector<uint8_t> whole(message.size(), kUntouched);
  const iovec one{whole.data(), whole.size()};
  int rctx = 0, sctx = 0;
  fi_msg_tagged r{};
  r.msg_iov = &one;
  r.iov_count = 1;
  r.addr = FI_ADDR_UNSPEC;
  r.tag = 0x77;
  r.context = &rctx;
  ASSERT_EQ(fi_trecvmsg(b, &r, 0), 0);
  fi_msg_tagged s{};
  s.msg_iov = out.iov.data();
  s.iov_count = out.iov.size();
  s.addr = addrs[1];
  s.tag = 0x77;
  s.context = &sctx;
  s.data = 0xfeed;
  ASSERT_EQ(fi_tsendmsg(a, &s, FI_REMOTE_CQ_DATA), 0);
  for (const auto& e : wait(2)) {
    if (e.op_context != &rctx) continue;
    EXPECT_EQ(e.tag, 0x77u);
    EXPECT_EQ(e.data, 0xfeedu);
    EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
    EXPECT_EQ(e.len, message.size());
  }
  EXPECT_EQ(whole, message);
}

// FI_INJECT over pieces: they are gathered at the call, so the caller may change them
// at once; the receiver sees what they held at the call.
TEST_F(Iov, sendmsg_inject__pieces_are_reusable_at_once) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  PieceBuffers out({5, 11, 1, 30});
  const auto message = pattern(out.bytes(), 9);
  out.fill(message);
  PieceBuffers in({out.bytes()});
  int rctx = 0;
  ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, 1, FI_ADDR_UNSPEC, &rctx), 0);
  fi_msg s{};
  s.msg_iov = out.iov.data();
  s.iov_count = out.iov.size();
  s.addr = addrs[1];
  ASSERT_EQ(fi_sendmsg(a, &s, FI_INJECT), 0);
  out.fill(std::vector<uint8_t>(out.bytes(), 0));
  // The receive and the send: FI_INJECT on fi_sendmsg frees the buffer at once but, unlike
  // fi_inject, still reports the send. (This read one completion and took it for the
  // receive, which held only while the send's came later; a standby thread's pass can
  // put both in the CQ before the first read.)
  const auto done = wait(2);
  ASSERT_EQ(done.size(), 2u);
  const bool receive_first = done[0].op_context == &rctx;
  EXPECT_TRUE(done[receive_first ? 0 : 1].flags & FI_RECV);
  EXPECT_EQ(done[receive_first ? 0 : 1].op_context, &rctx);
  EXPECT_TRUE(done[receive_first ? 1 : 0].flags & FI_SEND);
  EXPECT_EQ(in.joined(), message);
}

TEST_F(Iov, truncated_recvv__fills_its_pieces_with_the_prefix) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  for (const size_t size : {size_t{3000}, size_t{200000}}) {
    SCOPED_TRACE(size);
    const auto message = pattern(size, 5);
    PieceBuffers in({size / 4, 1, size / 4});
    int rctx = 0;
    ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, in.iov.size(), FI_ADDR_UNSPEC, &rctx), 0);
    ASSERT_EQ(fi_send(a, message.data(), size, nullptr, addrs[1], nullptr), 0);
    fi_cq_err_entry err{};
    bool sent = false, truncated = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(sent && truncated) && std::chrono::steady_clock::now() < deadline) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      if (r == 1) sent = true;
      if (r == -FI_EAVAIL && fi_cq_readerr(cq, &err, 0) == 1) truncated = true;
    }
    ASSERT_TRUE(sent && truncated);
    EXPECT_EQ(err.err, FI_ETRUNC);
    EXPECT_EQ(err.op_context, &rctx);
    EXPECT_EQ(err.len, in.bytes());
    EXPECT_EQ(err.olen, size - in.bytes());
    EXPECT_EQ(in.joined(), std::vector<uint8_t>(message.begin(), message.begin() + in.bytes()));
    EXPECT_TRUE(in.guards_intact());
  }
}

TEST_F(Iov, cancelled_recvv__writes_none_of_its_pieces) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  PieceBuffers in({100, 100});
  int rctx = 0;
  ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, in.iov.size(), FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(fi_cancel(&b->fid, &rctx), 0);
  const fi_cq_err_entry err = wait_error();
  EXPECT_EQ(err.err, FI_ECANCELED);
  EXPECT_EQ(std::count(in.memory.begin(), in.memory.end(), kUntouched),
            static_cast<long>(in.memory.size()));
  // The endpoint goes on: a message sent now finds no receive and waits for the next.
  const auto message = pattern(150, 1);
  ASSERT_EQ(fi_send(a, message.data(), message.size(), nullptr, addrs[1], nullptr), 0);
  ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, in.iov.size(), FI_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(wait(2).size(), 2u);
  auto expected = message;
  expected.resize(in.bytes(), kUntouched);  // the second piece's last 50 bytes: untouched
  EXPECT_EQ(in.joined(), expected);
  EXPECT_TRUE(in.guards_intact());
}

// FI_PEEK|FI_CLAIM sets a message aside; FI_CLAIM then receives it into pieces.
TEST_F(Iov, claimed_message__lands_in_pieces) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const auto message = pattern(5000, 4);
  ASSERT_EQ(fi_tsend(a, message.data(), message.size(), nullptr, addrs[1], 0x5, nullptr), 0);
  ASSERT_EQ(wait(1).size(), 1u);  // sent: acknowledged, so it waits at b unexpected
  fi_context claim{};
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 0x5;
  m.context = &claim;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  fi_cq_tagged_entry e{};
  for (;;) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    ASSERT_EQ(fi_trecvmsg(b, &m, FI_PEEK | FI_CLAIM), 0);
    ssize_t r;
    while ((r = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN) {
    }
    if (r == 1) break;
    fi_cq_err_entry err{};
    ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
    ASSERT_EQ(err.err, FI_ENOMSG);
  }
  EXPECT_EQ(e.len, message.size());
  PieceBuffers in({1000, 3000, 1000});
  m.msg_iov = in.iov.data();
  m.iov_count = in.iov.size();
  ASSERT_EQ(fi_trecvmsg(b, &m, FI_CLAIM), 0);
  const auto done = wait(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].len, message.size());
  EXPECT_EQ(in.joined(), message);
  EXPECT_TRUE(in.guards_intact());
}

TEST_F(Iov, misuse__is_refused_at_the_call) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  PieceBuffers five({1, 1, 1, 1, 1});
  EXPECT_EQ(fi_sendv(a, five.iov.data(), nullptr, 5, addrs[1], nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_recvv(b, five.iov.data(), nullptr, 5, FI_ADDR_UNSPEC, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_tsendv(a, five.iov.data(), nullptr, 5, addrs[1], 1, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_trecvv(b, five.iov.data(), nullptr, 5, FI_ADDR_UNSPEC, 1, 0, nullptr), -FI_EINVAL);
  iovec no_address[2] = {{five.iov[0].iov_base, 1}, {nullptr, 8}};
  EXPECT_EQ(fi_sendv(a, no_address, nullptr, 2, addrs[1], nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_recvv(b, no_address, nullptr, 2, FI_ADDR_UNSPEC, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_sendv(a, nullptr, nullptr, 2, addrs[1], nullptr), -FI_EINVAL);
  // An empty piece may have no address: only bytes need one.
  iovec empty_first[2] = {{nullptr, 0}, {five.iov[0].iov_base, 1}};
  int rctx = 0;
  ASSERT_EQ(fi_recvv(b, empty_first, nullptr, 2, FI_ADDR_UNSPEC, &rctx), 0);
  const uint8_t x = 42;
  ASSERT_EQ(fi_send(a, &x, 1, nullptr, addrs[1], nullptr), 0);
  ASSERT_EQ(wait(2).size(), 2u);
  EXPECT_EQ(five.memory[1], 42);
  fi_cq_tagged_entry e;
  EXPECT_EQ(fi_cq_read(cq, &e, 1), -FI_EAGAIN);  // the refused calls reported nothing
}

struct IovMultiRecv : Fabric {
  void SetUp() override { open(FI_EP_RDM, FI_MSG | FI_MULTI_RECV); }
};

TEST_F(IovMultiRecv, pieces__are_refused_with_fi_multi_recv) {
  fid_ep* b = endpoint();
  PieceBuffers two({4096, 4096});
  fi_msg m{};
  m.msg_iov = two.iov.data();
  m.iov_count = 2;
  m.addr = FI_ADDR_UNSPEC;
  EXPECT_EQ(fi_recvmsg(b, &m, FI_MULTI_RECV), -FI_EINVAL);
  m.iov_count = 1;
  EXPECT_EQ(fi_recvmsg(b, &m, FI_MULTI_RECV), 0);
}

struct IovDgram : Fabric {
  void SetUp() override { open(FI_EP_DGRAM, FI_MSG); }
};

// A datagram gathered from pieces and scattered into pieces; the largest one, in pieces,
// arrives whole, and its pieces count against max_msg_size as one message.
TEST_F(IovDgram, datagrams__go_out_of_pieces_and_into_pieces) {
  fid_ep* a = endpoint();
  fid_ep* b = endpoint();
  const size_t largest = info->ep_attr->max_msg_size;
  PieceBuffers out({largest / 3, 0, largest - largest / 3});
  const auto bytes = pattern(largest, 8);
  out.fill(bytes);
  PieceBuffers in({7, largest - 7});
  ASSERT_EQ(fi_recvv(b, in.iov.data(), nullptr, in.iov.size(), FI_ADDR_UNSPEC, nullptr), 0);
  ASSERT_EQ(fi_sendv(a, out.iov.data(), nullptr, out.iov.size(), addrs[1], nullptr), 0);
  ASSERT_EQ(wait(2).size(), 2u);
  EXPECT_EQ(in.joined(), bytes);
  EXPECT_TRUE(in.guards_intact());
  PieceBuffers over({largest, 1});
  EXPECT_EQ(fi_sendv(a, over.iov.data(), nullptr, 2, addrs[1], nullptr), -FI_EMSGSIZE);
}

struct IovRma : RegisteringFabric {
  void SetUp() override {
    open(FI_EP_RDM, FI_MSG | FI_RMA | FI_ATOMIC, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
  }
};

TEST_F(IovRma, writev_then_readv__pieces_meet_one_remote_range) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(1 << 20, kUntouched);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(mr);
  for (const size_t unit : {size_t{3}, size_t{2000}, size_t{100000}}) {
    SCOPED_TRACE(unit);
    std::fill(target.begin(), target.end(), kUntouched);
    PieceBuffers out({unit, 2 * unit, 1});
    const auto bytes = pattern(out.bytes(), static_cast<uint8_t>(unit + 1));
    out.fill(bytes);
    ASSERT_EQ(fi_writev(a, out.iov.data(), nullptr, out.iov.size(), addrs[1],
                        remote(target.data(), 17), key, nullptr),
              0);
    ASSERT_EQ(wait(1).size(), 1u);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), target.begin() + 17));
    EXPECT_EQ(target[16], kUntouched);
    EXPECT_EQ(target[17 + bytes.size()], kUntouched);

    PieceBuffers back({1, unit, unit, unit});
    ASSERT_EQ(back.bytes(), bytes.size());
    fi_rma_iov where{remote(target.data(), 17), bytes.size(), key};
    fi_msg_rma m{};
    m.msg_iov = back.iov.data();
    m.iov_count = back.iov.size();
    m.addr = addrs[1];
    m.rma_iov = &where;
    m.rma_iov_count = 1;
    ASSERT_EQ(fi_readmsg(a, &m, 0), 0);
    ASSERT_EQ(wait(1).size(), 1u);
    EXPECT_EQ(back.joined(), bytes);
    EXPECT_TRUE(back.guards_intact());
  }
}

TEST_F(IovRma, refused_readv__writes_none_of_its_pieces_and_bad_shapes_are_refused) {
  fid_ep* a = endpoint();
  endpoint();
  std::vector<uint8_t> target(4096, 1);
  fid_mr* mr = reg(target.data(), target.size(), FI_REMOTE_READ | FI_REMOTE_WRITE);
  PieceBuffers back({100, 100});
  ASSERT_EQ(fi_readv(a, back.iov.data(), nullptr, 2, addrs[1], remote(target.data(), 4000),
                     fi_mr_key(mr), nullptr),
            0);  // past the end: the target refuses it
  EXPECT_EQ(wait_error().err, FI_EINVAL);
  EXPECT_EQ(std::count(back.memory.begin(), back.memory.end(), kUntouched),
            static_cast<long>(back.memory.size()));
  // The remote range must be as long as the pieces, and there is one (rma_iov_limit 1).
  fi_rma_iov where[2] = {{remote(target.data()), 150, fi_mr_key(mr)},
                         {remote(target.data(), 200), 50, fi_mr_key(mr)}};
  fi_msg_rma m{};
  m.msg_iov = back.iov.data();
  m.iov_count = 2;
  m.addr = addrs[1];
  m.rma_iov = where;
  m.rma_iov_count = 1;
  EXPECT_EQ(fi_writemsg(a, &m, 0), -FI_EINVAL);
  m.rma_iov_count = 2;
  EXPECT_EQ(fi_writemsg(a, &m, 0), -FI_EINVAL);
  PieceBuffers five({1, 1, 1, 1, 1});
  EXPECT_EQ(fi_writev(a, five.iov.data(), nullptr, 5, addrs[1], remote(target.data()),
                      fi_mr_key(mr), nullptr),
            -FI_EINVAL);
}

TEST_F(IovRma, atomic_iocs__operands_gathered_and_old_values_scattered) {
  fid_ep* a = endpoint();
  endpoint();
  alignas(8) uint64_t target[6] = {100, 200, 300, 400, 500, 600};
  fid_mr* mr = reg(target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(mr);
  // fi_atomicv: three iocs of operands (2 + 0 + 3 elements) add to five words.
  uint64_t first[2] = {1, 2}, second[3] = {3, 4, 5};
  const fi_ioc operands[3] = {{first, 2}, {nullptr, 0}, {second, 3}};
  ASSERT_EQ(fi_atomicv(a, operands, nullptr, 3, addrs[1], remote(target), key, FI_UINT64, FI_SUM,
                       nullptr),
            0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(target[0], 101u);
  EXPECT_EQ(target[4], 505u);
  EXPECT_EQ(target[5], 600u);
  // fi_fetch_atomicv: one ioc of operands, the old values scattered into three.
  const uint64_t tens[5] = {10, 10, 10, 10, 10};
  const fi_ioc add{const_cast<uint64_t*>(tens), 5};
  uint64_t old_a[1] = {}, old_b[3] = {}, old_c[1] = {};
  fi_ioc results[3] = {{old_a, 1}, {old_b, 3}, {old_c, 1}};
  ASSERT_EQ(fi_fetch_atomicv(a, &add, nullptr, 1, results, nullptr, 3, addrs[1], remote(target),
                             key, FI_UINT64, FI_SUM, nullptr),
            0);
  ASSERT_EQ(wait(1).size(), 1u);
  EXPECT_EQ(old_a[0], 101u);
  EXPECT_EQ(old_b[0], 202u);
  EXPECT_EQ(old_b[2], 404u);
  EXPECT_EQ(old_c[0], 505u);
  EXPECT_EQ(target[4], 515u);
  // Results naming fewer elements than the operands, or five iocs: refused at the call.
  results[2].count = 0;
  EXPECT_EQ(fi_fetch_atomicv(a, &add, nullptr, 1, results, nullptr, 3, addrs[1], remote(target),
                             key, FI_UINT64, FI_SUM, nullptr),
            -FI_EINVAL);
  const fi_ioc five[5] = {{first, 1}, {first, 1}, {first, 1}, {first, 1}, {first, 1}};
  EXPECT_EQ(
      fi_atomicv(a, five, nullptr, 5, addrs[1], remote(target), key, FI_UINT64, FI_SUM, nullptr),
      -FI_EINVAL);
  EXPECT_EQ(target[0], 111u);
}

}  // namespace
}  // namespace spray_fi_test
