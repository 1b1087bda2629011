#include <gtest/gtest.h>

#include "transport/ses/ended_write_ids.h"
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
  EXPECT_FALSE(p.take_match(true, 1, 0xac12, 0));            // tag differs outside ignore bits
  EXPECT_EQ(p.take_match(true, 3, 0xab12, 0)->context, 1u);  // first posted wins
  EXPECT_EQ(p.take_match(true, 3, 0xab12, 0)->context, 2u);
  EXPECT_EQ(p.take_match(false, 9, 0, 0)->context, 4u);  // directed one skipped for source 9
  EXPECT_EQ(p.take_match(false, 5, 0, 0)->context, 3u);
  EXPECT_EQ(p.size(), 0u);
}

TEST(PostedReceives, cancel__removes_from_the_middle) {
  PostedReceives p(4);
  for (uint64_t c = 1; c <= 3; ++c) p.post({nullptr, 0, c});
  EXPECT_EQ(p.cancel(2)->context, 2u);
  EXPECT_FALSE(p.cancel(2));
  EXPECT_EQ(p.take_match(false, 0, 0, 0)->context, 1u);
  EXPECT_EQ(p.take_match(false, 0, 0, 0)->context, 3u);
  EXPECT_EQ(p.post({nullptr, 0, 9}), Status::kOk);
}

// A multi-receive buffer gives each message the next part of it and keeps its place in
// the queue (ahead of receives posted after it) until fewer than multi_min_free bytes
// remain; it is released once it left the queue and its last part completed.
TEST(PostedReceives, multi__carves_parts_in_place_and_releases_after_the_last_part) {
  PostedReceives p(4);
  uint8_t buf[1000];
  RecvSpec multi{.buffer = buf, .length = 1000, .context = 1, .multi = true, .multi_min_free = 300};
  ASSERT_EQ(p.post(multi), Status::kOk);
  ASSERT_EQ(p.post({nullptr, 0, 2}), Status::kOk);
  const auto a = p.take_match(false, 0, 0, 400);
  const auto b = p.take_match(false, 0, 0, 250);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->context, 1u);
  EXPECT_EQ(a->buffer, buf);
  EXPECT_EQ(a->length, 400u);
  EXPECT_EQ(b->buffer, buf + 400);
  EXPECT_EQ(b->length, 250u);
  EXPECT_TRUE(p.queued(a->multi_slot));            // 350 left: still first in line
  const auto c = p.take_match(false, 0, 0, 5000);  // longer than the rest: gets the rest
  ASSERT_TRUE(c);
  EXPECT_EQ(c->buffer, buf + 650);
  EXPECT_EQ(c->length, 350u);
  EXPECT_FALSE(p.queued(c->multi_slot));
  EXPECT_EQ(p.take_match(false, 0, 0, 1)->context, 2u);  // the next receive in line
  // Parts complete in any order; the last one releases the buffer.
  EXPECT_EQ(p.settle(b->multi_slot, true), MultiRecvState::kHeld);
  EXPECT_EQ(p.settle(c->multi_slot, true), MultiRecvState::kHeld);
  EXPECT_EQ(p.settle(a->multi_slot, true), MultiRecvState::kReleased);
}

TEST(PostedReceives, multi__cancel_releases_after_the_parts_still_landing) {
  PostedReceives p(2);
  uint8_t buf[100];
  RecvSpec multi{.buffer = buf, .length = 100, .context = 7, .multi = true};
  ASSERT_EQ(p.post(multi), Status::kOk);
  const auto part = p.take_match(false, 3, 0, 10);
  ASSERT_TRUE(part);
  const auto canceled = p.cancel(7);
  ASSERT_TRUE(canceled);
  EXPECT_FALSE(p.queued(part->multi_slot));
  EXPECT_FALSE(p.take_match(false, 3, 0, 10));
  EXPECT_EQ(p.settle(canceled->multi_slot, false), MultiRecvState::kHeld);
  EXPECT_EQ(p.settle(part->multi_slot, true), MultiRecvState::kReleasedCanceled);
  // Canceled with nothing landing: released at once.
  ASSERT_EQ(p.post(multi), Status::kOk);
  const auto idle = p.cancel(7);
  ASSERT_TRUE(idle);
  EXPECT_EQ(p.settle(idle->multi_slot, false), MultiRecvState::kReleasedCanceled);
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

// Ids of writes ended for a failed initiator: known per peer until their MSG_ERR, the
// oldest giving way when the ring is full, and a free entry (id 0) never matching.
TEST(EndedWriteIds, remember__forget__and_the_oldest_goes_when_full) {
  EndedWriteIds ids;
  EXPECT_FALSE(ids.contains(0, 0));  // what a free entry holds
  ids.remember(3, 0x8001);
  EXPECT_TRUE(ids.contains(3, 0x8001));
  EXPECT_FALSE(ids.contains(4, 0x8001));  // another peer's id
  EXPECT_FALSE(ids.contains(3, 0x8002));
  ids.forget(3, 0x8001);
  EXPECT_FALSE(ids.contains(3, 0x8001));
  EXPECT_EQ(ids.size(), 0u);
  for (uint16_t i = 0; i <= EndedWriteIds::kRemembered; ++i) {
    ids.remember(1, static_cast<uint16_t>(0x8000 + i));
  }
  EXPECT_EQ(ids.size(), EndedWriteIds::kRemembered);
  EXPECT_TRUE(ids.contains(1, 0x8000 + EndedWriteIds::kRemembered));
  // The loop's first kRemembered ids filled the ring (one of them the entry forget freed);
  // the last took the place of the oldest, and only of it.
  EXPECT_FALSE(ids.contains(1, 0x8000));
  EXPECT_TRUE(ids.contains(1, 0x8001));
}

}  // namespace
}  // namespace spray::ses
