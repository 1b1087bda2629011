#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>

#include "congestion/paths/ecmp.h"
#include "congestion/paths/ecmp_repath.h"
#include "congestion/paths/oblivious.h"
#include "congestion/paths/penalty_bitmap.h"
#include "congestion/paths/reps.h"

namespace spray::paths {
namespace {

TEST(Ecmp, next_entropy__is_one_value_per_flow) {
  EcmpSelector a({256, 1}), b({256, 2});
  const uint16_t ev = a.next_entropy();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_entropy(), ev);
  a.on_feedback(ev, Feedback::kTimeout);
  EXPECT_EQ(a.next_entropy(), ev);  // ECMP does not react
  std::set<uint16_t> flows;
  for (uint64_t s = 0; s < 50; ++s) flows.insert(EcmpSelector({256, s}).next_entropy());
  EXPECT_GT(flows.size(), 30u);  // different flows hash to different paths
  (void)b;
}

TEST(EcmpRepath, keeps_one_ev_until_congestion_is_signalled_on_it) {
  EcmpRepathSelector e({64, 5});
  const uint16_t first = e.next_entropy();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(e.next_entropy(), first);
    e.on_feedback(first, i % 2 ? Feedback::kGood : Feedback::kDelivered);
  }
  e.on_feedback(first, Feedback::kEcn);
  const uint16_t second = e.next_entropy();
  EXPECT_NE(second, first);
  EXPECT_EQ(e.repaths(), 1u);
  // Late marks for packets still in flight on the old EV do not move it again.
  e.on_feedback(first, Feedback::kEcn);
  e.on_feedback(first, Feedback::kLost);
  EXPECT_EQ(e.next_entropy(), second);
  // Every kind of bad news on the current EV does.
  uint16_t current = second;
  for (const Feedback f : {Feedback::kNack, Feedback::kLost, Feedback::kTimeout}) {
    e.on_feedback(current, f);
    EXPECT_NE(e.next_entropy(), current);
    current = e.next_entropy();
  }
  EXPECT_EQ(e.repaths(), 4u);
}

TEST(EcmpRepath, a_single_ev_has_nowhere_to_go) {
  EcmpRepathSelector e({1, 5});
  e.on_feedback(0, Feedback::kEcn);
  EXPECT_EQ(e.next_entropy(), 0);
}

TEST(Oblivious, next_entropy__covers_all_values_evenly) {
  ObliviousSelector o({8, 3});
  std::map<uint16_t, int> count;
  for (int i = 0; i < 8000; ++i) ++count[o.next_entropy()];
  ASSERT_EQ(count.size(), 8u);
  for (const auto& [ev, n] : count) EXPECT_NEAR(n, 1000, 150) << ev;
}

TEST(Reps, explores_when_cache_is_empty_and_recycles_good_evs) {
  RepsSelector r({256, 1});
  EXPECT_EQ(r.cached(), 0u);
  const uint16_t a = r.next_entropy();
  const uint16_t b = r.next_entropy();
  r.on_feedback(a, Feedback::kGood);
  r.on_feedback(b, Feedback::kGood);
  EXPECT_EQ(r.cached(), 2u);
  EXPECT_EQ(r.next_entropy(), a);  // FIFO reuse of good EVs
  EXPECT_EQ(r.next_entropy(), b);
  EXPECT_EQ(r.cached(), 0u);
}

// Delivered only (its ACK came back on another EV): recycled and a resend's choice like
// an EV good both ways, but not a freeze's, which keeps to EVs whose ACKs came back on
// them.
TEST(Reps, delivered_only__is_recycled_and_resent_on_but_not_frozen_onto) {
  RepsSelector r({256, 1});
  r.on_feedback(7, Feedback::kGood);
  r.on_feedback(8, Feedback::kDelivered);
  EXPECT_EQ(r.cached(), 2u);
  std::array<uint16_t, 4> good{};
  ASSERT_EQ(r.good_entropies(good), 2u);
  EXPECT_EQ(good[0], 8);
  EXPECT_EQ(good[1], 7);
  EXPECT_EQ(r.retransmit_entropy(), 8);  // newest first
  EXPECT_EQ(r.retransmit_entropy(), 7);
  r.on_feedback(9, Feedback::kTimeout);
  ASSERT_TRUE(r.frozen());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(r.next_entropy(), 7);
}

// With no EV known good both ways, a freeze cycles over the newest delivered ones: what
// is known to get there beats a random draw, half of which may go to a dead path.
TEST(Reps, freeze_with_evs_only_delivered__cycles_over_them) {
  RepsSelector r({256, 1});
  for (uint16_t ev = 1; ev <= 6; ++ev) r.on_feedback(ev, Feedback::kDelivered);
  r.on_feedback(9, Feedback::kTimeout);
  ASSERT_TRUE(r.frozen());
  std::set<uint16_t> used;
  for (int i = 0; i < 20; ++i) used.insert(r.next_entropy());
  EXPECT_EQ(used, (std::set<uint16_t>{3, 4, 5, 6}));  // the kFreshEvs newest
}

TEST(Reps, ecn_and_nack__are_not_recycled) {
  RepsSelector r({256, 1});
  r.on_feedback(10, Feedback::kEcn);
  r.on_feedback(11, Feedback::kNack);
  EXPECT_EQ(r.cached(), 0u);
  r.on_feedback(12, Feedback::kGood);
  EXPECT_EQ(r.next_entropy(), 12);
}

TEST(Reps, timeout__freezes_onto_recent_good_evs_and_evicts_the_bad_one) {
  RepsSelector r({256, 1});
  for (int ev = 1; ev <= 3; ++ev) r.on_feedback(static_cast<uint16_t>(ev), Feedback::kGood);
  r.on_feedback(1, Feedback::kTimeout);
  EXPECT_TRUE(r.frozen());
  std::set<uint16_t> used;
  for (int i = 0; i < 100; ++i) used.insert(r.next_entropy());
  EXPECT_EQ(used, (std::set<uint16_t>{2, 3}));  // no exploration, never the suspect EV
  for (uint32_t i = 0; i < RepsSelector::kFreezePackets; ++i) r.next_entropy();
  EXPECT_FALSE(r.frozen());
}

TEST(Reps, cache__is_bounded) {
  RepsSelector r({256, 1});
  for (uint16_t ev = 0; ev < 100; ++ev) r.on_feedback(ev, Feedback::kGood);
  EXPECT_EQ(r.cached(), RepsSelector::kCacheSize);
  // UET's 8-entry ring, by configuration; out-of-range sizes are clamped.
  for (const auto& [asked, held] : {std::pair{8, 8}, std::pair{0, 1}, std::pair{500, 32}}) {
    RepsSelector small({256, 1, static_cast<uint16_t>(asked)});
    for (uint16_t ev = 0; ev < 100; ++ev) small.on_feedback(ev, Feedback::kGood);
    EXPECT_EQ(small.cached(), static_cast<size_t>(held)) << asked;
    EXPECT_EQ(small.next_entropy(), 0);  // the first good EVs stay; the rest are dropped
  }
}

TEST(Reps, explore__steers_clear_of_evs_recently_reported_bad) {
  // A quarter of the EVs reported bad (lost, marked, NACKed, timed out): a plain random
  // draw lands on one 25 % of the time, four draws all on bad ones 0.4 %.
  RepsSelector r({64, 7});
  const Feedback kinds[] = {Feedback::kLost, Feedback::kEcn, Feedback::kNack, Feedback::kLost};
  for (uint16_t ev = 0; ev < 16; ++ev) r.on_feedback(ev, kinds[ev % 4]);
  ASSERT_EQ(r.cached(), 0u);
  int on_bad = 0;
  for (int i = 0; i < 2000; ++i) on_bad += r.next_entropy() < 16 ? 1 : 0;
  EXPECT_LT(on_bad, 40);  // ~8 expected; 500 without steering
  // Good news clears an EV: once 0..15 came back unmarked they are drawn again.
  for (uint16_t ev = 0; ev < 16; ++ev) r.on_feedback(ev, Feedback::kGood);
  for (uint16_t ev = 0; ev < 16; ++ev) EXPECT_EQ(r.next_entropy(), ev);  // recycled first
  on_bad = 0;
  for (int i = 0; i < 2000; ++i) on_bad += r.next_entropy() < 16 ? 1 : 0;
  EXPECT_GT(on_bad, 350);
}

TEST(Reps, retransmit__takes_recent_good_evs_newest_first_and_drops_marked_ones) {
  RepsSelector r({256, 1});
  for (const uint16_t ev : {uint16_t{10}, uint16_t{11}, uint16_t{12}})
    r.on_feedback(ev, Feedback::kGood);
  EXPECT_EQ(r.retransmit_entropy(), 12);
  EXPECT_EQ(r.retransmit_entropy(), 11);
  EXPECT_EQ(r.retransmit_entropy(), 10);
  r.on_feedback(11, Feedback::kEcn);  // no longer a place to resend to
  for (int i = 0; i < 6; ++i) EXPECT_NE(r.retransmit_entropy(), 11);
  // The recycling ring is untouched by retransmissions: 10, 11, 12 are still queued.
  EXPECT_EQ(r.cached(), 3u);
}

// After paths die, the older good EVs are evidence from before the failure: a freeze and
// retransmissions use only the newest few, where ACKs since the failure land.
TEST(Reps, freeze_and_retransmit__use_only_the_freshest_good_evs) {
  RepsSelector r({256, 1});
  for (uint16_t ev = 1; ev <= 20; ++ev) r.on_feedback(ev, Feedback::kGood);
  std::vector<uint16_t> resent;
  for (int i = 0; i < 8; ++i) resent.push_back(r.retransmit_entropy());
  EXPECT_EQ(resent, (std::vector<uint16_t>{20, 19, 18, 17, 20, 19, 18, 17}));
  r.on_feedback(100, Feedback::kTimeout);  // an explored EV died
  ASSERT_TRUE(r.frozen());
  std::set<uint16_t> used, retransmitted;
  for (int i = 0; i < 100; ++i) used.insert(r.next_entropy());
  for (int i = 0; i < 20; ++i) retransmitted.insert(r.retransmit_entropy());
  EXPECT_EQ(used, (std::set<uint16_t>{17, 18, 19, 20}));
  EXPECT_EQ(retransmitted, used);
  static_assert(RepsSelector::kFreshEvs == 4);
}

// A timed-out EV came back good at some point; every EV that last came back good before
// it did is older evidence still, so it goes too. Else each timeout exposed the next
// older EV, from before the paths died: in an all-to-all over two paths, one dying,
// PSNs failed their PDC with eleven of twelve tries on the dead path.
TEST(Reps, timeout__drops_the_good_evs_older_than_the_timed_out_one) {
  RepsSelector r({256, 1});
  for (uint16_t ev = 1; ev <= 20; ++ev) r.on_feedback(ev, Feedback::kGood);
  r.on_feedback(18, Feedback::kTimeout);
  std::set<uint16_t> used;
  for (int i = 0; i < 100; ++i) used.insert(r.retransmit_entropy());
  EXPECT_EQ(used, (std::set<uint16_t>{19, 20}));
  std::array<uint16_t, 4> good{};
  EXPECT_EQ(r.good_entropies(good), 2u);  // what a closing PDC would pass on
  // The newest times out too: nothing fresh is left, so the freeze explores, away from
  // the EVs reported bad.
  r.on_feedback(20, Feedback::kTimeout);
  EXPECT_EQ(r.good_entropies(good), 0u);
  used.clear();
  for (int i = 0; i < 100; ++i) used.insert(r.next_entropy());
  EXPECT_GT(used.size(), 50u);
  EXPECT_FALSE(used.count(18) || used.count(20));
}

TEST(Reps, good_entropies__are_the_newest_good_evs_and_seed_a_new_selector) {
  RepsSelector r({256, 3});
  std::array<uint16_t, 4> out{};
  EXPECT_EQ(r.good_entropies(out), 0u);  // nothing learned yet
  for (const uint16_t ev : std::array<uint16_t, 5>{10, 11, 12, 13, 14}) {
    r.on_feedback(ev, Feedback::kGood);
  }
  r.on_feedback(13, Feedback::kEcn);  // marked: no longer fresh evidence
  ASSERT_EQ(r.good_entropies(out), 4u);
  EXPECT_EQ(out, (std::array<uint16_t, 4>{14, 12, 11, 10}));
  // Reported good to a fresh selector, oldest first, they are what it sends on first.
  RepsSelector fresh({256, 4});
  for (size_t i = out.size(); i-- > 0;) fresh.on_feedback(out[i], Feedback::kGood);
  std::set<uint16_t> first;
  for (int i = 0; i < 4; ++i) first.insert(fresh.next_entropy());
  EXPECT_EQ(first, (std::set<uint16_t>{10, 11, 12, 14}));
  EXPECT_EQ(fresh.retransmit_entropy(), 14);
}

TEST(PenaltyBitmap, round_robin_skips_penalised_evs_for_one_pass) {
  PenaltyBitmapSelector s({8, 0});
  for (uint16_t ev = 0; ev < 8; ++ev) EXPECT_EQ(s.next_entropy(), ev);  // in turn
  s.on_feedback(2, Feedback::kEcn);
  s.on_feedback(5, Feedback::kTimeout);
  EXPECT_TRUE(s.is_penalised(2));
  std::vector<uint16_t> pass;
  for (int i = 0; i < 6; ++i) pass.push_back(s.next_entropy());
  EXPECT_EQ(pass, (std::vector<uint16_t>{0, 1, 3, 4, 6, 7}));
  EXPECT_FALSE(s.is_penalised(2));  // served: tried again on the next pass
  EXPECT_EQ(s.next_entropy(), 0);
  EXPECT_EQ(s.next_entropy(), 1);
  EXPECT_EQ(s.next_entropy(), 2);
  s.on_feedback(3, Feedback::kNack);
  s.on_feedback(3, Feedback::kGood);  // a clean ACK clears the penalty at once
  EXPECT_EQ(s.next_entropy(), 3);
  s.on_feedback(4, Feedback::kLost);
  s.on_feedback(4, Feedback::kDelivered);  // so does delivery shown by an ACK on another EV
  EXPECT_EQ(s.next_entropy(), 4);
}

TEST(PenaltyBitmap, all_penalised_still_sends) {
  PenaltyBitmapSelector s({4, 1});
  for (uint16_t ev = 0; ev < 4; ++ev) s.on_feedback(ev, Feedback::kTimeout);
  const uint16_t ev = s.next_entropy();
  EXPECT_LT(ev, 4);
  s.on_feedback(9, Feedback::kTimeout);  // out of range: ignored
}

TEST(Factory, by_name) {
  EXPECT_EQ(make_path_selector("reps", {})->name(), "reps");
  EXPECT_EQ(make_path_selector("oblivious", {})->name(), "oblivious");
  EXPECT_EQ(make_path_selector("ecmp", {})->name(), "ecmp");
  EXPECT_EQ(make_path_selector("ecmp_repath", {})->name(), "ecmp_repath");
  EXPECT_EQ(make_path_selector("bitmap", {})->name(), "bitmap");
  EXPECT_EQ(make_path_selector("bogus", {}), nullptr);
}

}  // namespace
}  // namespace spray::paths
