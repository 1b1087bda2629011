// ScratchBuffer: small requests come from the heap, large ones from mappings advised for
// huge pages (their layout is tested with the datapath's huge_page_memory); both start
// half a page past a page boundary; the buffer only grows, and every byte it hands out is
// writable.
#include "collectives/scratch_buffer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace spray::coll {
namespace {

TEST(ScratchBuffer, small_requests_stay_on_the_heap_and_are_reused) {
  ScratchBuffer b;
  uint8_t* first = b.get(1000);
  ASSERT_NE(first, nullptr);
  std::memset(first, 0xab, 1000);
  EXPECT_FALSE(b.huge_page_backed());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % ScratchBuffer::kPage, ScratchBuffer::kPageOffset);
  EXPECT_EQ(b.get(10), first) << "a smaller request reuses the buffer";
  EXPECT_EQ(b.get(1000), first);
  EXPECT_EQ(b.capacity(), 1000u);
}

TEST(ScratchBuffer, large_requests_start_half_a_page_into_whole_huge_pages_and_are_writable) {
  ScratchBuffer b;
  const size_t bytes = ScratchBuffer::kHugeFrom + 12345;
  uint8_t* p = b.get(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(b.huge_page_backed());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % ScratchBuffer::kHugePage, ScratchBuffer::kPageOffset);
  EXPECT_EQ((ScratchBuffer::kPageOffset + b.capacity()) % ScratchBuffer::kHugePage, 0u);
  EXPECT_GE(b.capacity(), bytes);
  std::memset(p, 0x5a, b.capacity());  // all of it is mapped (ASan/segfault otherwise)
  EXPECT_EQ(p[b.capacity() - 1], 0x5a);
}

TEST(ScratchBuffer, grows_from_heap_to_mapping_and_between_mappings) {
  ScratchBuffer b;
  b.get(100);
  uint8_t* mapped = b.get(3 * ScratchBuffer::kHugePage + 1);
  EXPECT_TRUE(b.huge_page_backed());
  EXPECT_EQ(b.capacity(), 4 * ScratchBuffer::kHugePage - ScratchBuffer::kPageOffset);
  std::memset(mapped, 1, b.capacity());
  EXPECT_EQ(b.get(ScratchBuffer::kHugePage), mapped) << "within capacity: no new mapping";
  uint8_t* bigger = b.get(5 * ScratchBuffer::kHugePage);
  std::memset(bigger, 2, b.capacity());
  EXPECT_EQ(b.capacity(), 6 * ScratchBuffer::kHugePage - ScratchBuffer::kPageOffset)
      << "the half page in front takes the request past 5 huge pages";
}

}  // namespace
}  // namespace spray::coll
