#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "transport/base/copy_bytes.h"
#include "transport/base/flat_map.h"
#include "transport/base/rng.h"
#include "transport/base/slot_pool.h"
#include "transport/base/timer_wheel.h"

namespace spray {
namespace {

TEST(FlatMap, insert_find_erase__agree_with_std_map_under_churn) {
  FlatMap m(500);
  std::map<uint64_t, uint32_t> ref;
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t key = rng.below(2000) * 0x9e3779b97f4a7c15ULL;  // clustered hashes
    if (rng.chance(0.5) && ref.size() < 500) {
      const auto v = static_cast<uint32_t>(rng.next());
      ASSERT_TRUE(m.insert(key, v));
      ref[key] = v;
    } else {
      ASSERT_EQ(m.erase(key), ref.erase(key) == 1);
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  for (const auto& [k, v] : ref) ASSERT_EQ(m.find(k), v);
}

TEST(FlatMap, insert__fails_only_when_full) {
  FlatMap m(4);
  for (uint64_t k = 0; k < 4; ++k) EXPECT_TRUE(m.insert(k, 1));
  EXPECT_FALSE(m.insert(99, 1));
  EXPECT_TRUE(m.insert(2, 7));  // overwrite is not growth
  EXPECT_EQ(m.find(2), 7u);
}

TEST(SlotPool, acquire_release__reuses_and_reports_exhaustion) {
  SlotPool<int> p(2);
  auto a = p.acquire();
  auto b = p.acquire();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(p.acquire());
  p[*a] = 5;
  p.release(*a);
  EXPECT_FALSE(p.in_use(*a));
  auto c = p.acquire();
  ASSERT_TRUE(c);
  EXPECT_EQ(p[*c], 0);  // fresh slots are value-initialized
}

TEST(TimerWheel, expire__fires_each_timer_once_at_or_after_its_deadline) {
  TimerWheel w(Duration::microseconds(1), 64);
  std::vector<TimerNode> nodes(100);
  Rng rng(1);
  std::vector<int64_t> deadline(100);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    nodes[i].owner = i;
    deadline[i] = static_cast<int64_t>(rng.below(500)) * 1'000'000 + 17;
    w.arm(nodes[i], Time{deadline[i]});  // some far beyond one revolution
  }
  w.cancel(nodes[5]);
  std::set<uint32_t> fired;
  for (int64_t t = 0; t <= 600'000'000; t += 3'000'000) {
    w.expire(Time{t}, [&](uint32_t owner) {
      EXPECT_LE(deadline[owner], t);
      EXPECT_GT(deadline[owner], t - 3'000'000 - 1'000'000);  // not late by more than a step
      EXPECT_TRUE(fired.insert(owner).second);
    });
  }
  EXPECT_EQ(fired.size(), 99u);
  EXPECT_FALSE(fired.count(5));
  EXPECT_EQ(w.armed_count(), 0u);
}

TEST(TimerWheel, arm__in_the_past_fires_on_next_expire) {
  TimerWheel w(Duration::microseconds(1), 8);
  w.expire(Time{50'000'000}, [](uint32_t) {});
  TimerNode n;
  w.arm(n, Time{1'000'000});
  int fired = 0;
  w.expire(Time{50'000'001}, [&](uint32_t) { ++fired; });
  EXPECT_EQ(fired, 1);
}

TEST(Rng, below__is_deterministic_and_in_range) {
  Rng a(9), b(9);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.below(7);
    EXPECT_EQ(x, b.below(7));
    EXPECT_LT(x, 7u);
  }
}

}  // namespace
}  // namespace spray

namespace spray {
namespace {

// copy_bytes goes in pieces only at short distances; either way it must copy exactly the
// bytes asked for: every distance around the slow window, lengths around a piece.
TEST(CopyBytes, copies_exactly_n_bytes_at_every_distance_and_length) {
  std::vector<uint8_t> from(3 * kCopyPage + 3 * kCopyPiece), to(from.size() + 2 * kCopyPage);
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<uint8_t>(i * 31 + 7);
  const uint8_t* src = from.data() + 5;
  const size_t lengths[] = {
      0, 1, kCopyPiece - 1, kCopyPiece, kCopyPiece + 1, 3 * kCopyPiece + 17, 2 * kCopyPage};
  for (size_t distance = 0; distance <= kShortCopyDistance + 2; ++distance) {
    // dst - src = distance, modulo a page.
    const uintptr_t want = (reinterpret_cast<uintptr_t>(src) + distance) % kCopyPage;
    const uintptr_t have = reinterpret_cast<uintptr_t>(to.data()) % kCopyPage;
    uint8_t* dst = to.data() + (want + kCopyPage - have) % kCopyPage;
    EXPECT_EQ(short_copy_distance(dst, src), distance > 0 && distance < kShortCopyDistance);
    for (size_t n : lengths) {
      std::fill(to.begin(), to.end(), 0xee);
      copy_bytes(dst, src, n);
      ASSERT_TRUE(std::equal(src, src + n, dst)) << "distance " << distance << ", n " << n;
      const auto outside = [](uint8_t b) { return b == 0xee; };
      ASSERT_TRUE(std::all_of(to.data(), dst, outside)) << "written before";
      ASSERT_TRUE(std::all_of(dst + n, to.data() + to.size(), outside)) << "written past";
    }
  }
}

// move_bytes is memmove: overlapping ranges, either way round and at short distances
// (where copy_bytes's pieces would read bytes already overwritten), come out as memmove's;
// ranges apart at a short distance are copied exactly.
TEST(CopyBytes, move_bytes_is_memmove_for_overlapping_and_separate_ranges) {
  const size_t n = 3 * kCopyPiece + 17;
  std::vector<uint8_t> buffer(2 * n + kCopyPage), want(buffer.size());
  const auto fill = [&] {
    for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i * 13 + 1);
    want = buffer;
  };
  for (const ptrdiff_t shift : {-2049, -16, -1, 0, 1, 16, 63, 2049}) {
    fill();
    uint8_t* src = buffer.data() + kCopyPage;
    std::memmove(want.data() + kCopyPage + shift, want.data() + kCopyPage, n);
    move_bytes(src + shift, src, n);
    ASSERT_EQ(buffer, want) << "overlapping, shifted by " << shift;
  }
  fill();
  uint8_t* src = buffer.data();
  uint8_t* dst = buffer.data() + n + 16 + ((kCopyPage - n % kCopyPage) % kCopyPage);
  ASSERT_TRUE(short_copy_distance(dst, src));
  std::memcpy(want.data() + (dst - src), want.data(), n);
  move_bytes(dst, src, n);
  EXPECT_EQ(buffer, want) << "apart, at a distance of 16";
}

}  // namespace
}  // namespace spray
