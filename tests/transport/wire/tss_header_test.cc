// The TSS security header: its bytes on the wire, and what the decoder refuses.
#include "transport/wire/tss_header.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/hex.h"

namespace spray::wire {
namespace {

TEST(TssHeader, encodes_the_uet_layout_with_and_without_ssi) {
  TssHeader h{.sdi = 0xabcdef,
              .association = true,
              .has_ssi = false,
              .ssi = 0,
              .epoch = 0x1234,
              .tsc = 0x0000a1a2a3a4a5a6};
  std::vector<uint8_t> out(16, 0xee);
  ASSERT_EQ(encode(h, out), kTssBytes);
  // type 0x01 in bits 31..27, AN (bit 24), SDI; then epoch | TSC.
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 12),
            test_support::from_hex("09abcdef1234a1a2a3a4a5a6"));
  EXPECT_EQ(out[12], 0xee);  // nothing past the header

  h.has_ssi = true;
  h.association = false;
  h.ssi = 0xdeadbeef;
  ASSERT_EQ(encode(h, out), kTssWithSsiBytes);
  EXPECT_EQ(out, test_support::from_hex("0cabcdefdeadbeef1234a1a2a3a4a5a6"));  // SP is bit 26

  TssHeader back;
  size_t consumed = 0;
  ASSERT_EQ(decode(out, back, &consumed), DecodeError::kOk);
  EXPECT_EQ(consumed, kTssWithSsiBytes);
  EXPECT_EQ(back, h);
}

TEST(TssHeader, refuses_what_does_not_fit) {
  std::vector<uint8_t> out(16);
  EXPECT_EQ(encode(TssHeader{.sdi = kMaxSdi + 1}, out), 0u);
  EXPECT_EQ(encode(TssHeader{.tsc = kMaxTsc + 1}, out), 0u);
  EXPECT_EQ(encode(TssHeader{.has_ssi = true}, std::span(out).first(15)), 0u);
  EXPECT_EQ(encode(TssHeader{}, std::span(out).first(11)), 0u);
}

TEST(TssHeader, decoder_refuses_short_wrong_type_and_reserved_bit) {
  TssHeader h;
  std::vector<uint8_t> in = test_support::from_hex("0cabcdefdeadbeef1234a1a2a3a4a5a6");
  EXPECT_EQ(decode(std::span(in).first(11), h), DecodeError::kTruncated);
  EXPECT_EQ(decode(std::span(in).first(15), h), DecodeError::kTruncated);  // SP promises 16
  std::vector<uint8_t> bad = in;
  bad[0] = 0x10;  // type 0x02: a RUD request, not TSS
  EXPECT_EQ(decode(bad, h), DecodeError::kWrongType);
  bad = in;
  bad[0] |= 0x02;  // bit 25
  EXPECT_EQ(decode(bad, h), DecodeError::kReservedBitsSet);
}

}  // namespace
}  // namespace spray::wire
