#include "congestion/cc/nscc.h"

#include <gtest/gtest.h>

#include "tests/congestion/cc/test_config.h"

#include "congestion/cc/fixed_window.h"

namespace spray::cc {
namespace {

AckSignal ack(int64_t t_us, uint32_t bytes, int64_t rtt_us, bool ecn) {
  return {Time{Duration::microseconds(t_us).ps}, bytes, Duration::microseconds(rtt_us), ecn};
}

TEST(Nscc, start__at_one_bdp) {
  Nscc n(test_config());
  EXPECT_EQ(n.window_bytes(), 125000u);
  EXPECT_EQ(n.max_window(), 187500u);
}

TEST(Nscc, on_ack__low_delay_no_ecn_grows_proportionally) {
  Nscc n(test_config());
  n.on_timeout(Time{Duration::milliseconds(1).ps});  // drop to a small window first
  const uint32_t w0 = n.window_bytes();
  n.on_ack(ack(2000, 4096, 10, false));  // zero queuing delay: full proportional gain
  EXPECT_EQ(n.window_bytes(), w0 + 4096);
  const uint32_t w1 = n.window_bytes();
  n.on_ack(ack(2001, 4096, 12, false));  // 2 us of 5 us target: 60% of the gain
  EXPECT_NEAR(n.window_bytes(), w1 + 0.6 * 4096, 1.0);
}

TEST(Nscc, fast_increase__after_a_whole_window_with_empty_queues) {
  Nscc n(test_config());
  n.on_timeout(Time{Duration::milliseconds(1).ps});  // one MTU: 4096
  ASSERT_EQ(n.window_bytes(), 4096u);
  n.on_ack(ack(2000, 4096, 10, false));  // the run starts with a 4096-byte window:
  ASSERT_EQ(n.window_bytes(), 8192u);    // proportional for its first 4096 bytes
  n.on_ack(ack(2001, 4096, 10, false));  // a whole (starting) window later: fast
  EXPECT_EQ(n.window_bytes(), 8192u + 3 * 4096u);
  // Queueing above target/8 (0.625 us here) ends it, and the count starts again.
  const uint32_t w = n.window_bytes();
  n.on_ack(ack(2004, 4096, 11, false));  // 1 us of queueing: proportional, 80 % of the gain
  EXPECT_NEAR(n.window_bytes(), w + 0.8 * 4096, 1.0);
  const uint32_t w2 = n.window_bytes();
  n.on_ack(ack(2005, 4096, 10, false));
  EXPECT_EQ(n.window_bytes(), w2 + 4096u);
}

TEST(Nscc, on_ack__delay_above_target_without_ecn_is_fair_increase) {
  Nscc n(test_config());
  n.on_timeout(Time{Duration::milliseconds(1).ps});
  const uint32_t w = n.window_bytes();
  n.on_ack(ack(2000, 4096, 30, false));
  EXPECT_GT(n.window_bytes(), w);
  EXPECT_LE(n.window_bytes(), w + 4096);  // at most one MTU per window's worth of ACKs
}

TEST(Nscc, on_ack__ecn_with_high_delay_cuts_once_per_base_rtt) {
  Nscc n(test_config());
  const uint32_t w = n.window_bytes();
  n.on_ack(ack(100, 4096, 40, true));
  const uint32_t cut = n.window_bytes();
  EXPECT_LT(cut, w);
  EXPECT_GE(cut, w / 2);               // the multiplicative gain is bounded by one half
  n.on_ack(ack(105, 4096, 40, true));  // within the same base RTT: no second cut
  EXPECT_EQ(n.window_bytes(), cut);
  n.on_ack(ack(111, 4096, 40, true));
  EXPECT_LT(n.window_bytes(), cut);
}

TEST(Nscc, on_ack__ecn_with_low_delay_holds) {
  Nscc n(test_config());
  const uint32_t w = n.window_bytes();
  n.on_ack(ack(100, 4096, 11, true));
  EXPECT_EQ(n.window_bytes(), w);
}

TEST(Nscc, quick_adapt__trim_drops_to_delivered_bytes) {
  Nscc n(test_config());
  // 20 KB delivered in the last base RTT.
  for (int i = 0; i < 5; ++i) n.on_ack(ack(100 + i, 4096, 25, false));
  n.on_nack(NackKind::kTrimmed, Time{Duration::microseconds(106).ps});
  EXPECT_LE(n.window_bytes(), 5u * 4096 + 4096);
  EXPECT_GE(n.window_bytes(), n.min_window());
}

TEST(Nscc, on_timeout__with_nothing_delivered_falls_to_one_mtu) {
  Nscc n(test_config());
  n.on_timeout(Time{Duration::milliseconds(1).ps});
  EXPECT_EQ(n.window_bytes(), 4096u);
  for (int i = 0; i < 10000; ++i) n.on_ack(ack(2000 + i, 4096, 10, false));
  EXPECT_EQ(n.window_bytes(), n.max_window());  // and grows back, bounded
}

TEST(FixedWindow, ignores_every_signal) {
  CcConfig c = test_config();
  c.fixed_window_bytes = 50000;
  FixedWindow f(c);
  f.on_ack(ack(1, 4096, 100, true));
  f.on_nack(NackKind::kTrimmed, Time{});
  f.on_timeout(Time{});
  EXPECT_EQ(f.window_bytes(), 50000u);
}

TEST(Factory, by_name) {
  EXPECT_EQ(make_congestion_control("nscc", test_config())->name(), "nscc");
  EXPECT_EQ(make_congestion_control("fixed", test_config())->name(), "fixed");
  EXPECT_EQ(make_congestion_control("nope", test_config()), nullptr);
}

}  // namespace
}  // namespace spray::cc
