// Forged and mutated packets aimed at a provider endpoint's real UDP socket while a
// genuine transfer runs, through the public libfabric API and a plain UDP socket only.
//
// The forger is a UDP socket entered into the sender's AV: the sender's genuine packets
// to it (eager, multi-packet and rendezvous sends, with retransmissions) are captured,
// then mutated (bit flips, byte overwrites, truncation, extension, pure garbage, replays)
// and fired at the receiver from the forger's address. Meanwhile the receiver takes
// genuine messages with receives directed at the genuine sender. The test passes when
// nothing crashes or hangs, every genuine message arrives once with every byte intact,
// nothing forged completes a directed receive, and the receiver still works afterwards.
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

struct ForgedInput : Fabric, ::testing::WithParamInterface<uint32_t> {
  int forger = -1;
  sockaddr_in forger_addr{};
  sockaddr_storage receiver_addr{};
  socklen_t receiver_len = 0;
  std::vector<std::vector<uint8_t>> captured;
  fi_context2 capture_ctx[4]{};  // sends to the forger: they may fail (never acknowledged)

  void SetUp() override {
    Fabric::SetUp();
    forger = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(forger, 0);
    forger_addr.sin_family = AF_INET;
    forger_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(forger, reinterpret_cast<sockaddr*>(&forger_addr), sizeof(forger_addr)), 0);
    socklen_t len = sizeof(forger_addr);
    ASSERT_EQ(getsockname(forger, reinterpret_cast<sockaddr*>(&forger_addr), &len), 0);
  }
  void TearDown() override {
    if (forger >= 0) close(forger);
    Fabric::TearDown();
  }

  bool is_capture(void* ctx) const {
    return ctx >= static_cast<const void*>(&capture_ctx[0]) &&
           ctx < static_cast<const void*>(&capture_ctx[4]);
  }

  // Drains the CQ once. Genuine completions go to `done`; the forger's sends may only
  // fail with FI_EHOSTUNREACH (it never acknowledges); anything else fails the test.
  void drain(std::vector<fi_cq_tagged_entry>& done) {
    fi_cq_tagged_entry e[16];
    const ssize_t r = fi_cq_read(cq, e, 16);
    for (ssize_t i = 0; i < r; ++i) {
      if (!is_capture(e[i].op_context)) done.push_back(e[i]);
    }
    if (r == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      EXPECT_TRUE(is_capture(err.op_context))
          << "genuine operation failed: " << fi_strerror(err.err);
      EXPECT_EQ(err.err, FI_EHOSTUNREACH);
    }
  }

  // The sender's genuine packets to the forger: a small tagged send, an untagged one,
  // a three-packet message with immediate data and a rendezvous-sized one.
  void capture(fid_ep* sender) {
    fi_addr_t to = FI_ADDR_NOTAVAIL;
    ASSERT_EQ(fi_av_insert(av, &forger_addr, 1, &to, 0, nullptr), 1);
    static std::vector<uint8_t> small = pattern(64, 1), mid = pattern(3000, 2),
                                multi = pattern(20000, 3), large = pattern(100000, 4);
    ASSERT_EQ(fi_tsend(sender, small.data(), small.size(), nullptr, to, 0x77, &capture_ctx[0]), 0);
    ASSERT_EQ(fi_send(sender, mid.data(), mid.size(), nullptr, to, &capture_ctx[1]), 0);
    ASSERT_EQ(fi_tsenddata(sender, multi.data(), multi.size(), nullptr, 0xfeed, to, 0x78,
                           &capture_ctx[2]),
              0);
    ASSERT_EQ(fi_tsend(sender, large.data(), large.size(), nullptr, to, 0x79, &capture_ctx[3]), 0);
    std::vector<fi_cq_tagged_entry> none;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    std::vector<uint8_t> buf(65536);
    while (std::chrono::steady_clock::now() < until) {
      drain(none);
      const ssize_t n = recv(forger, buf.data(), buf.size(), 0);
      if (n >= 0) captured.emplace_back(buf.begin(), buf.begin() + n);
    }
    EXPECT_TRUE(none.empty());
  }

  // One forged datagram: a captured packet mutated one to four times, or garbage.
  std::vector<uint8_t> forge(std::mt19937& rng) {
    auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
    std::vector<uint8_t> p;
    if (captured.empty() || pick(10) == 0) {
      p.resize(pick(9000));
      for (auto& b : p) b = static_cast<uint8_t>(rng());
      return p;
    }
    p = captured[pick(captured.size())];
    const size_t mutations = 1 + pick(4);
    for (size_t m = 0; m < mutations; ++m) {
      switch (pick(6)) {
        case 0:  // flip one bit in the first 96 bytes (the headers)
          if (!p.empty())
            p[pick(std::min<size_t>(p.size(), 96))] ^= static_cast<uint8_t>(1u << pick(8));
          break;
        case 1:  // overwrite one byte anywhere
          if (!p.empty()) p[pick(p.size())] = static_cast<uint8_t>(rng());
          break;
        case 2:  // truncate
          p.resize(pick(p.size() + 1));
          break;
        case 3:  // extend with garbage
          for (size_t k = pick(64); k > 0; --k) p.push_back(static_cast<uint8_t>(rng()));
          break;
        case 4:  // overwrite a 32-bit field at a header offset with an extreme value
          if (p.size() >= 4) {
            const uint32_t v = pick(2) ? 0xffffffffu : 0x80000000u;
            std::memcpy(&p[pick(std::min<size_t>(p.size(), 96) - 3)], &v, 4);
          }
          break;
        default:  // leave it whole: a replay
          break;
      }
    }
    return p;
  }
};

TEST_P(ForgedInput, MutatedAndReplayedPacketsLoseNothingGenuine) {
  fid_ep* sender = endpoint();
  fid_ep* receiver = endpoint();
  const fi_addr_t sender_addr = addrs[0], receiver_fi = addrs[1];
  size_t len = sizeof(receiver_addr);
  ASSERT_EQ(fi_getname(&receiver->fid, &receiver_addr, &len), 0);
  receiver_len = static_cast<socklen_t>(len);

  capture(sender);
  ASSERT_GE(captured.size(), 4u) << "the sender's packets to the forger were not captured";

  // Genuine traffic: directed tagged receives (the forger cannot match them) for
  // messages of 0 B to 200 KB, sent while forged datagrams pour in.
  constexpr size_t kMessages = 40;
  // Forged datagrams in all, fired 16 per progress step: a flood the receiver can drain.
  // (A flood faster than the receiver reads its socket drops genuine packets in the
  // kernel like any other overload; the sender then fails with FI_EHOSTUNREACH.)
  constexpr size_t kForged = 20000;
  std::vector<std::vector<uint8_t>> sent(kMessages), got(kMessages);
  std::vector<fi_context2> rx_ctx(kMessages), tx_ctx(kMessages);
  for (size_t i = 0; i < kMessages; ++i) {
    const size_t size = i == 0 ? 0 : (i * 5113) % 200000 + i;
    sent[i] = pattern(size, static_cast<uint8_t>(i));
    got[i].assign(size + 16, 0xee);  // 16 guard bytes must stay untouched
    ASSERT_EQ(fi_trecv(receiver, got[i].data(), got[i].size(), nullptr, sender_addr, 0x1000 + i, 0,
                       &rx_ctx[i]),
              0);
  }
  std::mt19937 rng(GetParam());
  std::vector<fi_cq_tagged_entry> done;
  size_t posted = 0, forged = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((done.size() < 2 * kMessages || forged < kForged) &&
         std::chrono::steady_clock::now() < deadline) {
    if (posted < kMessages) {
      const ssize_t rc = fi_tsend(sender, sent[posted].data(), sent[posted].size(), nullptr,
                                  receiver_fi, 0x1000 + posted, &tx_ctx[posted]);
      if (rc == 0) ++posted;
      ASSERT_TRUE(rc == 0 || rc == -FI_EAGAIN) << fi_strerror(static_cast<int>(-rc));
    }
    for (int k = 0; k < 16 && forged < kForged; ++k, ++forged) {
      const std::vector<uint8_t> p = forge(rng);
      (void)sendto(forger, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&receiver_addr),
                   receiver_len);
    }
    uint8_t sink[65536];
    while (recv(forger, sink, sizeof(sink), 0) >= 0) {  // the receiver's replies to the forger
    }
    drain(done);
  }
  ASSERT_EQ(forged, kForged);
  ASSERT_EQ(done.size(), 2 * kMessages) << "genuine completions missing after 30 s";

  std::vector<int> received(kMessages, 0), completed(kMessages, 0);
  for (const fi_cq_tagged_entry& e : done) {
    if (e.flags & FI_RECV) {
      const auto* ctx = static_cast<fi_context2*>(e.op_context);
      const size_t i = static_cast<size_t>(ctx - rx_ctx.data());
      ASSERT_LT(i, kMessages) << "a receive completed with a foreign context";
      ++received[i];
      EXPECT_EQ(e.len, sent[i].size());
      EXPECT_EQ(e.tag, 0x1000 + i);
      EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(), got[i].begin())) << "message " << i;
      EXPECT_TRUE(std::all_of(got[i].begin() + static_cast<ptrdiff_t>(sent[i].size()), got[i].end(),
                              [](uint8_t b) { return b == 0xee; }))
          << "bytes past message " << i << " were written";
    } else {
      const auto* ctx = static_cast<fi_context2*>(e.op_context);
      const size_t i = static_cast<size_t>(ctx - tx_ctx.data());
      ASSERT_LT(i, kMessages);
      ++completed[i];
    }
  }
  for (size_t i = 0; i < kMessages; ++i) {
    EXPECT_EQ(received[i], 1) << "message " << i;
    EXPECT_EQ(completed[i], 1) << "send " << i;
  }

  // The receiver still works both ways after the storm.
  std::vector<uint8_t> back = pattern(50000, 9), back_got(50000);
  fi_context2 c1, c2;
  ASSERT_EQ(fi_trecv(sender, back_got.data(), back_got.size(), nullptr, receiver_fi, 5, 0, &c1), 0);
  ASSERT_EQ(fi_tsend(receiver, back.data(), back.size(), nullptr, sender_addr, 5, &c2), 0);
  std::vector<fi_cq_tagged_entry> last;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (last.size() < 2 && std::chrono::steady_clock::now() < until) drain(last);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(back_got, back);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ForgedInput, ::testing::Values(1u, 20261122u, 77u));

}  // namespace
}  // namespace spray_fi_test
