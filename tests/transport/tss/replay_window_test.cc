// ReplayWindow: every TSC is accepted once; reordering within the span is fine; older
// than the span is refused; a jump ahead forgets what it passes over.
#include "transport/tss/replay_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace spray::tss {
namespace {

TEST(ReplayWindow, takes_each_counter_once_in_any_order_within_the_span) {
  std::vector<uint64_t> order(5000);
  std::iota(order.begin(), order.end(), 0);
  // Shuffle within blocks of half the span: reordered, never by a whole span.
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < order.size(); i += ReplayWindow::kSpan / 2) {
    const auto end =
        order.begin() + static_cast<ptrdiff_t>(std::min(order.size(), i + ReplayWindow::kSpan / 2));
    std::shuffle(order.begin() + static_cast<ptrdiff_t>(i), end, rng);
  }
  ReplayWindow w;
  for (uint64_t tsc : order) {
    ASSERT_TRUE(w.fresh(tsc)) << tsc;
    w.accept(tsc);
    ASSERT_FALSE(w.fresh(tsc)) << tsc;
  }
  for (uint64_t tsc = order.size() - ReplayWindow::kSpan; tsc < order.size(); ++tsc) {
    EXPECT_FALSE(w.fresh(tsc)) << tsc;
  }
}

TEST(ReplayWindow, refuses_counters_a_span_or_more_below_the_highest) {
  ReplayWindow w;
  w.accept(10000);
  EXPECT_FALSE(w.fresh(10000 - ReplayWindow::kSpan));
  EXPECT_FALSE(w.fresh(0));
  EXPECT_TRUE(w.fresh(10000 - ReplayWindow::kSpan + 1));  // not seen, inside the span
  EXPECT_TRUE(w.fresh(10001));
}

TEST(ReplayWindow, a_jump_ahead_clears_what_it_passes_over) {
  ReplayWindow w;
  for (uint64_t tsc = 0; tsc < 100; ++tsc) w.accept(tsc);
  // The bits of 100 .. 100 + span alias those of 0 .. span: they must read as unseen.
  w.accept(100 + ReplayWindow::kSpan - 1);
  for (uint64_t tsc = 100; tsc < 100 + ReplayWindow::kSpan - 1; ++tsc) {
    ASSERT_TRUE(w.fresh(tsc)) << tsc;
  }
  w.accept(10 * ReplayWindow::kSpan);  // a jump of more than a span
  EXPECT_TRUE(w.fresh(10 * ReplayWindow::kSpan - 1));
  EXPECT_FALSE(w.fresh(10 * ReplayWindow::kSpan));
}

}  // namespace
}  // namespace spray::tss
