#include <gtest/gtest.h>

#include "transport/ses/matching.h"
#include "transport/ses/memory_region.h"

namespace spray::ses {
namespace {

TEST(PostedReceives, take_match__fifo_per_list_with_source_and_tag_rules) {
  PostedReceives p(8);
  ASSERT_EQ(p.post({nullptr, 0, 1, true, 0xab00, 0x00ff, pds::kNoPeer}), Status::kOk);
  ASSERT_EQ(p.post({nullptr, 0, 2, true, 0xab12, 0, 3}), Status::kOk);
  ASSERT_EQ(p.post({nullptr, 0, 3, false, 0, 0, 5}), Status::kOk);
  ASSERT_EQ(p.post({nullptr, 0, 4, false, 0, 0, pds::kNoPeer}), Status::kOk);
  EXPECT_FALSE(p.take_match(true, 1, 0xac12));            // tag differs outside ignore bits
  EXPECT_EQ(p.take_match(true, 3, 0xab12)->context, 1u);  // first posted wins
  EXPECT_EQ(p.take_match(true, 3, 0xab12)->context, 2u);
  EXPECT_EQ(p.take_match(false, 9, 0)->context, 4u);  // directed one skipped for source 9
  EXPECT_EQ(p.take_match(false, 5, 0)->context, 3u);
  EXPECT_EQ(p.size(), 0u);
}

TEST(PostedReceives, cancel__removes_from_the_middle) {
  PostedReceives p(4);
  for (uint64_t c = 1; c <= 3; ++c) p.post({nullptr, 0, c});
  EXPECT_EQ(p.cancel(2)->context, 2u);
  EXPECT_FALSE(p.cancel(2));
  EXPECT_EQ(p.take_match(false, 0, 0)->context, 1u);
  EXPECT_EQ(p.take_match(false, 0, 0)->context, 3u);
  EXPECT_EQ(p.post({nullptr, 0, 9}), Status::kOk);
}

TEST(PostedReceives, post__reports_full) {
  PostedReceives p(1);
  EXPECT_EQ(p.post({}), Status::kOk);
  EXPECT_EQ(p.post({}), Status::kAgain);
}

TEST(MemoryRegionTable, resolve__checks_key_rights_and_bounds_without_overflow) {
  uint8_t mem[100];
  MemoryRegionTable t(4);
  ASSERT_EQ(t.add({mem, 100, 1000, 7, access::kRemoteRead}), Status::kOk);
  uint8_t* out = nullptr;
  EXPECT_EQ(t.resolve(7, 1000, 100, access::kRemoteRead, out), Status::kOk);
  EXPECT_EQ(out, mem);
  EXPECT_EQ(t.resolve(7, 1050, 50, access::kRemoteRead, out), Status::kOk);
  EXPECT_EQ(out, mem + 50);
  EXPECT_EQ(t.resolve(7, 1100, 0, access::kRemoteRead, out), Status::kOk);  // empty at the end
  EXPECT_EQ(t.resolve(7, 1050, 51, access::kRemoteRead, out), Status::kOutOfBounds);
  EXPECT_EQ(t.resolve(7, 999, 1, access::kRemoteRead, out), Status::kOutOfBounds);
  EXPECT_EQ(t.resolve(7, 1001, ~uint64_t{0}, access::kRemoteRead, out), Status::kOutOfBounds);
  EXPECT_EQ(t.resolve(7, ~uint64_t{0}, 2, access::kRemoteRead, out), Status::kOutOfBounds);
  EXPECT_EQ(t.resolve(7, 1000, 1, access::kRemoteWrite, out), Status::kAccessDenied);
  EXPECT_EQ(t.resolve(8, 1000, 1, access::kRemoteRead, out), Status::kBadKey);
  EXPECT_EQ(t.remove(7), Status::kOk);
  EXPECT_EQ(t.resolve(7, 1000, 1, access::kRemoteRead, out), Status::kBadKey);
}

}  // namespace
}  // namespace spray::ses
