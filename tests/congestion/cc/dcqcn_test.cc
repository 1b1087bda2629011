// DCQCN: a cut per notification (at most one per 50 us), alpha rising under congestion
// and decaying without, recovery back to line rate through fast recovery and additive
// increase, and pacing at the current rate.
#include "congestion/cc/dcqcn.h"

#include <gtest/gtest.h>

#include "tests/congestion/cc/test_config.h"

namespace spray::cc {
namespace {

AckSignal ack_at(int64_t us, bool ecn) {
  AckSignal s;
  s.now = Time{Duration::microseconds(us).ps};
  s.acked_bytes = 4096;
  s.ecn_marked = ecn;
  return s;
}

TEST(Dcqcn, starts_at_line_rate_unpaced) {
  Dcqcn d(test_config());
  EXPECT_EQ(d.rate_gbps(), 100);
  EXPECT_EQ(d.pacing_gap(), Duration{});
  EXPECT_EQ(d.window_bytes(), 2 * test_config().bdp_bytes());
}

TEST(Dcqcn, a_notification_halves_the_rate_at_most_once_per_interval) {
  Dcqcn d(test_config());
  d.on_ack(ack_at(0, false));
  d.on_ack(ack_at(1, true));
  EXPECT_DOUBLE_EQ(d.rate_gbps(), 50);  // alpha starts at 1: Rc * (1 - 1/2)
  EXPECT_DOUBLE_EQ(d.target_gbps(), 100);
  EXPECT_EQ(d.pacing_gap(), serialization_time(4096, 50));
  d.on_ack(ack_at(20, true));  // within 50 us of the last: ignored
  EXPECT_DOUBLE_EQ(d.rate_gbps(), 50);
  d.on_ack(ack_at(52, true));  // next interval: cut again (alpha still near 1)
  EXPECT_LT(d.rate_gbps(), 26);
  EXPECT_GT(d.alpha(), 0.99);
}

TEST(Dcqcn, without_notifications_alpha_decays_and_the_rate_recovers) {
  Dcqcn d(test_config());
  d.on_ack(ack_at(0, false));
  d.on_ack(ack_at(1, true));
  const double alpha = d.alpha();
  // Fast recovery: five periods, each halfway back to the 100 Gbit/s target.
  d.on_ack(ack_at(1 + 5 * 55, false));
  EXPECT_GT(d.rate_gbps(), 98);
  EXPECT_LT(d.alpha(), alpha);
  d.on_ack(ack_at(5000, false));  // long after: back at line rate, unpaced
  EXPECT_DOUBLE_EQ(d.rate_gbps(), 100);
  EXPECT_EQ(d.pacing_gap(), Duration{});
  EXPECT_EQ(make_congestion_control("dcqcn", test_config())->name(), "dcqcn");
}

TEST(Dcqcn, trims_and_timeouts_count_as_congestion) {
  Dcqcn d(test_config());
  d.on_ack(ack_at(0, false));
  d.on_nack(NackKind::kTrimmed, Time{Duration::microseconds(1).ps});
  EXPECT_LT(d.rate_gbps(), 100);
  Dcqcn t(test_config());
  t.on_ack(ack_at(0, false));
  t.on_timeout(Time{Duration::microseconds(1).ps});
  EXPECT_LT(t.rate_gbps(), 100);
}

}  // namespace
}  // namespace spray::cc
