// RCCC: the sender keeps what the receiver grants — at least a packet in flight, and
// below a packet per base RTT it paces, so many senders together send at the
// receiver's line rate. NsccRccc takes the smaller of the two windows.
#include "congestion/cc/rccc.h"

#include <gtest/gtest.h>

#include "tests/congestion/cc/test_config.h"

namespace spray::cc {
namespace {

AckSignal granted(uint32_t credit) {
  AckSignal s;
  s.acked_bytes = 4096;
  s.credit_bytes = credit;
  return s;
}

TEST(Rccc, starts_at_one_bdp_and_follows_the_grants) {
  Rccc r(test_config());
  EXPECT_TRUE(r.wants_credit());
  EXPECT_EQ(r.window_bytes(), 125000u);
  EXPECT_EQ(r.pacing_gap(), Duration{});
  r.on_ack(granted(31250));  // four senders share the receiver
  EXPECT_EQ(r.window_bytes(), 31250u);
  r.on_ack(granted(0));  // an ACK without credit changes nothing
  EXPECT_EQ(r.window_bytes(), 31250u);
  r.on_nack(NackKind::kTrimmed, Time{});  // the receiver, not the sender, reacts
  EXPECT_EQ(r.window_bytes(), 31250u);
}

TEST(Rccc, below_one_packet_per_rtt_it_paces_at_the_granted_rate) {
  Rccc r(test_config());
  r.on_ack(granted(125000 / 100));     // 100 senders: 1250 bytes per base RTT each
  EXPECT_EQ(r.window_bytes(), 4096u);  // one packet in flight
  // 4096 bytes every 4096 / 1250 base RTTs: 32.768 us, i.e. 1250 B per 10 us.
  EXPECT_EQ(r.pacing_gap(), Duration::picoseconds(32'768'000));
}

TEST(NsccRccc, the_smaller_window_wins_and_rcccs_pacing_applies) {
  NsccRccc both(test_config());
  EXPECT_TRUE(both.wants_credit());
  both.on_ack(granted(20000));
  EXPECT_EQ(both.window_bytes(), 20000u);               // NSCC is still at one BDP
  both.on_timeout(Time{Duration::milliseconds(1).ps});  // NSCC collapses
  EXPECT_LT(both.window_bytes(), 20000u);
  both.on_ack(granted(1000));
  EXPECT_GT(both.pacing_gap().ps, 0);
  EXPECT_EQ(make_congestion_control("nscc_rccc", test_config())->name(), "nscc_rccc");
  EXPECT_EQ(make_congestion_control("rccc", test_config())->name(), "rccc");
}

}  // namespace
}  // namespace spray::cc
