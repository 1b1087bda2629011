// The event core: time order, insertion order among equal times, and a large random
// load popped in exactly sorted order.
#include "nic_sim/des/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "transport/base/rng.h"

namespace spray::des {
namespace {

TEST(EventQueue, PopsByTimeThenByPushOrder) {
  EventQueue q;
  q.push(Time{30}, 1, 0);
  q.push(Time{10}, 2, 1);
  q.push(Time{30}, 3, 2);
  q.push(Time{10}, 4, 3);
  q.push(Time{20}, 5, 4);
  std::vector<uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 4, 0, 2}));
}

TEST(EventQueue, MillionsOfInterleavedEventsComeOutInOrderExactlyOnce) {
  EventQueue q;
  Rng rng(42);
  std::vector<std::pair<int64_t, uint32_t>> pushed, popped;
  uint32_t id = 0;
  int64_t now = 0;
  auto take = [&] {
    const Event e = q.pop();
    ASSERT_GE(e.at_ps, now);  // virtual time never goes back
    if (!popped.empty() && popped.back().first == e.at_ps) {
      ASSERT_GT(e.a, popped.back().second);  // equal times: push order (ids grow)
    }
    now = e.at_ps;
    popped.emplace_back(e.at_ps, e.a);
  };
  // As in a simulation: events are pushed at or after the current time, popped in
  // between; coarse times make many ties.
  for (int round = 0; round < 2000; ++round) {
    for (int i = 0; i < 600; ++i) {
      const int64_t at = now + static_cast<int64_t>(rng.below(1000)) * 1000;
      q.push(Time{at}, 0, id);
      pushed.emplace_back(at, id++);
    }
    for (int i = 0; i < 500 && !q.empty(); ++i) take();
  }
  while (!q.empty()) take();
  EXPECT_EQ(q.pushed(), pushed.size());
  std::sort(popped.begin(), popped.end());
  std::sort(pushed.begin(), pushed.end());
  EXPECT_EQ(popped, pushed);  // every event exactly once
}

TEST(EventQueue, HeapEntriesAreFourToACacheLine) {
  EXPECT_EQ(sizeof(EventQueue::Entry), 16u);
}

TEST(EventQueue, TopTimeIsTheNextToPopAndBodiesSurviveSlotReuse) {
  EventQueue q;
  for (uint32_t round = 0; round < 3; ++round) {  // later rounds reuse freed body slots
    q.push(Time{50}, 7, 100 + round, 200 + round);
    q.push(Time{40}, 8, 300 + round, 400 + round);
    EXPECT_EQ(q.top_time(), Time{40});
    const Event first = q.pop();
    EXPECT_EQ(first.kind, 8);
    EXPECT_EQ(first.a, 300 + round);
    EXPECT_EQ(first.b, 400 + round);
    EXPECT_EQ(q.top_time(), Time{50});
    const Event second = q.pop();
    EXPECT_EQ(second.kind, 7);
    EXPECT_EQ(second.a, 100 + round);
    EXPECT_EQ(second.b, 200 + round);
    EXPECT_TRUE(q.empty());
  }
}

}  // namespace
}  // namespace spray::des
