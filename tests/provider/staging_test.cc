// StagingBuffers (provider/staging.h): the buffers that operations of several pieces go
// through are reused by size, their idle memory stays within its bound, and gather and
// scatter move exactly the pieces' bytes, also at the short copy distances that
// copy_bytes cuts into pieces.
#include "provider/staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace spray::fi {
namespace {

constexpr size_t kKiB = 1024;

TEST(StagingBuffers, a_large_buffer_given_back_is_lent_again_without_new_memory) {
  StagingBuffers s;
  const uint32_t a = s.take(256 * kKiB);
  ASSERT_NE(a, StagingBuffers::kNone);
  uint8_t* memory = s.data(a);
  s.give_back(a);
  EXPECT_EQ(s.idle_bytes(), 256 * kKiB);
  const uint32_t b = s.take(200 * kKiB);
  ASSERT_NE(b, StagingBuffers::kNone);
  EXPECT_EQ(s.data(b), memory);
  EXPECT_EQ(s.idle_bytes(), 0u);
  EXPECT_EQ(s.in_use(), 1u);
}

TEST(StagingBuffers, take_lends_the_smallest_free_buffer_that_fits_else_grows_the_largest) {
  StagingBuffers s;
  const uint32_t small = s.take(64 * kKiB), large = s.take(kKiB * kKiB);
  uint8_t* const small_memory = s.data(small);
  uint8_t* const large_memory = s.data(large);
  s.give_back(small);
  s.give_back(large);
  // 100 KiB fits only the large one; 10 KiB fits both and takes the small one.
  const uint32_t fits_large = s.take(100 * kKiB);
  EXPECT_EQ(s.data(fits_large), large_memory);
  s.give_back(fits_large);
  const uint32_t fits_small = s.take(10 * kKiB);
  EXPECT_EQ(s.data(fits_small), small_memory);
  s.give_back(fits_small);
  // Larger than either: the large one grows; no third buffer.
  const uint32_t grown = s.take(2 * kKiB * kKiB);
  EXPECT_EQ(grown, large);
  EXPECT_EQ(s.idle_bytes(), 64 * kKiB);
  s.give_back(grown);
  EXPECT_EQ(s.idle_bytes(), 64 * kKiB + 2 * kKiB * kKiB);
}

TEST(StagingBuffers, idle_memory_stays_within_its_bound_after_a_burst_of_large_buffers) {
  StagingBuffers s;
  const size_t each = 4 * kKiB * kKiB;
  const size_t burst = StagingBuffers::kIdleBytes / each + 3;
  std::vector<uint32_t> lent;
  for (size_t i = 0; i < burst; ++i) lent.push_back(s.take(each));
  for (const uint32_t b : lent) s.give_back(b);
  EXPECT_EQ(s.in_use(), 0u);
  EXPECT_EQ(s.idle_bytes(), StagingBuffers::kIdleBytes / each * each);
  // Buffers freed for the bound are lent again (with new memory), none lost.
  lent.clear();
  for (size_t i = 0; i < burst; ++i) lent.push_back(s.take(each));
  EXPECT_EQ(s.in_use(), burst);
  EXPECT_EQ(s.idle_bytes(), 0u);
  for (uint32_t b : lent) std::fill_n(s.data(b), each, uint8_t{0x5a});  // memory is there
}

// Pieces at every distance 0-80 bytes from the staging buffer, modulo 4 KiB, long enough
// that copy_bytes cuts the short-distance ones: gather then scatter gives back exactly
// the bytes, and nothing past the pieces is written.
TEST(StagingBuffers, gather_and_scatter_move_exactly_the_pieces_bytes_at_every_distance) {
  StagingBuffers s;
  const size_t first = 5000, second = 9000, total = first + second;
  const uint32_t b = s.take(total);
  uint8_t* const staged = s.data(b);
  for (size_t distance = 0; distance <= 80; distance += 1) {
    std::vector<uint8_t> source(total + 2 * 4096), target(total + 2 * 4096 + 64, 0xee);
    for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 7 + distance);
    // The source's first piece lies `distance` bytes before the staging buffer, modulo a
    // page; so does the target's, the other way round.
    const auto at = [&](std::vector<uint8_t>& v, size_t want) {
      const uintptr_t have = reinterpret_cast<uintptr_t>(v.data()) % 4096;
      return v.data() + (want + 4096 - have) % 4096;
    };
    const uintptr_t staged_at = reinterpret_cast<uintptr_t>(staged) % 4096;
    uint8_t* const from = at(source, (staged_at + 4096 - distance) % 4096);
    uint8_t* const to = at(target, (staged_at + distance) % 4096);
    const iovec in[] = {{from, first}, {from + first + 32, second}};
    const iovec out[] = {{to, first}, {to + first + 32, second}};
    const auto gathered = pieces_of(in, 2);
    const auto scattered = pieces_of(out, 2);
    ASSERT_TRUE(gathered && scattered);
    gather(*gathered, staged);
    ASSERT_TRUE(std::equal(from, from + first, staged)) << distance;
    ASSERT_TRUE(std::equal(from + first + 32, from + first + 32 + second, staged + first))
        << distance;
    s.scatter_on_completion(b, *scattered, 0);
    s.complete(b, total);
    EXPECT_TRUE(std::equal(from, from + first, to)) << distance;
    EXPECT_TRUE(std::equal(from + first + 32, from + total + 32, to + first + 32)) << distance;
    const auto untouched = [](uint8_t v) { return v == 0xee; };
    EXPECT_TRUE(std::all_of(target.data(), to, untouched)) << distance;
    EXPECT_TRUE(std::all_of(to + first, to + first + 32, untouched)) << distance;
    EXPECT_TRUE(std::all_of(to + total + 32, target.data() + target.size(), untouched)) << distance;
  }
}

}  // namespace
}  // namespace spray::fi
