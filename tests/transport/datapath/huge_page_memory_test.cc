// huge_page_memory: mappings are whole 2 MiB-aligned pages of at least the size asked;
// warming leaves every byte of the range mapped, writable and zero; WarmHugePages owns a
// warmed mapping.
#include "transport/datapath/huge_page_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace spray::dp {
namespace {

TEST(HugePageMemory, mappings_are_whole_aligned_pages_of_at_least_the_size_asked) {
  for (size_t bytes : {size_t{1}, kHugePageBytes, kHugePageBytes + 1}) {
    const std::span<uint8_t> m = map_for_huge_pages(bytes);
    ASSERT_NE(m.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % kHugePageBytes, 0u);
    EXPECT_EQ(m.size() % kHugePageBytes, 0u);
    EXPECT_GE(m.size(), bytes);
    EXPECT_LT(m.size(), bytes + kHugePageBytes);
    std::memset(m.data(), 7, m.size());
    unmap_for_huge_pages(m.data(), bytes);
  }
}

TEST(HugePageMemory, warming_zeroes_the_whole_range_and_nothing_beside_it) {
  const std::span<uint8_t> m = map_for_huge_pages(3 * kHugePageBytes);
  std::memset(m.data(), 0xee, m.size());
  // An odd range inside the mapping: the kernel's write must cover it to the last byte.
  uint8_t* start = m.data() + 100;
  const size_t bytes = 2 * kHugePageBytes + 4097;
  warm_pages(start, bytes);
  EXPECT_TRUE(std::all_of(start, start + bytes, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(m[99], 0xee);
  EXPECT_EQ(start[bytes], 0xee);
  unmap_for_huge_pages(m.data(), 3 * kHugePageBytes);
}

TEST(HugePageMemory, an_owned_warm_mapping_is_aligned_zeroed_and_writable) {
  const size_t bytes = 129 * 65536;  // the UDP datapath's receive buffers by default
  WarmHugePages w(bytes);
  ASSERT_NE(w.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data()) % kHugePageBytes, 0u);
  EXPECT_TRUE(std::all_of(w.data(), w.data() + bytes, [](uint8_t b) { return b == 0; }));
  std::memset(w.data(), 0x5a, bytes);
  EXPECT_EQ(w.data()[bytes - 1], 0x5a);
}

}  // namespace
}  // namespace spray::dp
