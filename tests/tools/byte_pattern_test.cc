// The tools' message pattern: a check that passes only on the exact bytes of the exact
// message, so spray-endpoint and spray-transfer cannot call a misplaced, duplicated,
// stale or corrupted packet intact.
#include "tools/common/byte_pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace spray::tools {
namespace {

TEST(BytePattern, AFilledMessageChecksIntactAtEverySize) {
  for (size_t size : {0u, 1u, 7u, 8u, 9u, 4095u, 65536u, 1000003u}) {
    std::vector<uint8_t> m(size);
    fill_pattern(m, 42);
    EXPECT_EQ(pattern_mismatches(m, 42), 0u) << size << " bytes";
  }
}

TEST(BytePattern, AnotherMessagesBytesDoNotPass) {
  std::vector<uint8_t> m(9001);  // 1125 words and a 1-byte tail
  fill_pattern(m, 7);
  EXPECT_EQ(pattern_mismatches(m, 8), 1126u);  // every word differs, the tail too
}

TEST(BytePattern, OneFlippedBitIsFoundAnywhere) {
  std::vector<uint8_t> m(1001);  // 125 words and a 1-byte tail
  fill_pattern(m, 3);
  for (size_t at : {size_t{0}, size_t{500}, size_t{999}, size_t{1000}}) {
    m[at] ^= 0x10;
    EXPECT_EQ(pattern_mismatches(m, 3), 1u) << "bit flipped at " << at;
    m[at] ^= 0x10;
  }
}

TEST(BytePattern, APacketAtTheWrongOffsetOrFromAnEarlierMessageIsFound) {
  constexpr size_t kPacket = 1024;
  std::vector<uint8_t> m(8 * kPacket), earlier(m.size());
  fill_pattern(m, 11);
  fill_pattern(earlier, 10);
  std::vector<uint8_t> moved = m;  // packet 2's payload written where packet 5 belongs
  std::copy_n(m.begin() + 2 * kPacket, kPacket, moved.begin() + 5 * kPacket);
  EXPECT_EQ(pattern_mismatches(moved, 11), kPacket / 8);
  std::vector<uint8_t> stale = m;  // packet 4 left over from the previous message
  std::copy_n(earlier.begin() + 4 * kPacket, kPacket, stale.begin() + 4 * kPacket);
  EXPECT_EQ(pattern_mismatches(stale, 11), kPacket / 8);
}

}  // namespace
}  // namespace spray::tools
