// AesGcm against published AES-256-GCM known answers (McGrew and Viega, "The Galois/
// Counter Mode of Operation", test cases 13-16, the 256-bit-key ones), and its refusals:
// any altered bit of ciphertext, tag or additional data fails to open.
#include "transport/tss/aes_gcm.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/hex.h"

namespace spray::tss {
namespace {

using test_support::from_hex;

struct KnownAnswer {
  const char* name;
  const char* key;
  const char* iv;
  const char* plaintext;
  const char* aad;
  const char* ciphertext;
  const char* tag;
};

constexpr char kKey15[] = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
constexpr char kIv15[] = "cafebabefacedbaddecaf888";
constexpr char kPlain15[] =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6"
    "b525b16aedf5aa0de657ba637b391aafd255";
constexpr char kCipher15[] =
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056"
    "828838c5f61e6393ba7a0abcc9f662898015ad";

const KnownAnswer kAnswers[] = {
    {"case 13", "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {"case 14", "0000000000000000000000000000000000000000000000000000000000000000",
     "000000000000000000000000", "00000000000000000000000000000000", "",
     "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
    {"case 15", kKey15, kIv15, kPlain15, "", kCipher15, "b094dac5d93471bdec1a502270e3cc6c"},
};

Key key_of(const char* hex) {
  Key k{};
  const auto bytes = from_hex(hex);
  std::copy(bytes.begin(), bytes.end(), k.begin());
  return k;
}

Iv iv_of(const char* hex) {
  Iv iv{};
  const auto bytes = from_hex(hex);
  std::copy(bytes.begin(), bytes.end(), iv.begin());
  return iv;
}

TEST(AesGcm, seals_the_published_known_answers) {
  for (const KnownAnswer& a : kAnswers) {
    AesGcm gcm(key_of(a.key), AesGcm::Direction::kSeal);
    ASSERT_TRUE(gcm.valid());
    std::vector<uint8_t> text = from_hex(a.plaintext);
    std::array<uint8_t, kTagBytes> tag{};
    ASSERT_TRUE(gcm.seal(iv_of(a.iv), from_hex(a.aad), text, {}, tag)) << a.name;
    EXPECT_EQ(text, from_hex(a.ciphertext)) << a.name;
    EXPECT_EQ(std::vector<uint8_t>(tag.begin(), tag.end()), from_hex(a.tag)) << a.name;
  }
}

TEST(AesGcm, opens_the_published_known_answers_and_refuses_any_altered_bit) {
  for (const KnownAnswer& a : kAnswers) {
    AesGcm gcm(key_of(a.key), AesGcm::Direction::kOpen);
    const std::vector<uint8_t> cipher = from_hex(a.ciphertext);
    const std::vector<uint8_t> tag = from_hex(a.tag);
    std::array<uint8_t, kTagBytes> t{};
    std::copy(tag.begin(), tag.end(), t.begin());
    std::vector<uint8_t> text = cipher;
    ASSERT_TRUE(gcm.open(iv_of(a.iv), from_hex(a.aad), text, t)) << a.name;
    EXPECT_EQ(text, from_hex(a.plaintext)) << a.name;

    for (size_t bit = 0; bit < cipher.size() * 8; bit += 37) {
      text = cipher;
      text[bit / 8] = static_cast<uint8_t>(text[bit / 8] ^ (1u << (bit % 8)));
      EXPECT_FALSE(gcm.open(iv_of(a.iv), from_hex(a.aad), text, t)) << a.name << " bit " << bit;
    }
    for (size_t bit = 0; bit < kTagBytes * 8; bit += 11) {
      auto bad = t;
      bad[bit / 8] = static_cast<uint8_t>(bad[bit / 8] ^ (1u << (bit % 8)));
      text = cipher;
      EXPECT_FALSE(gcm.open(iv_of(a.iv), from_hex(a.aad), text, bad))
          << a.name << " tag bit " << bit;
    }
    // Still opens after all those failures: a failed open leaves the key as it was.
    text = cipher;
    EXPECT_TRUE(gcm.open(iv_of(a.iv), from_hex(a.aad), text, t)) << a.name;
  }
}

// Test case 16: 60 bytes of plaintext with 20 bytes of additional data.
TEST(AesGcm, additional_data_is_authenticated_not_encrypted) {
  const std::vector<uint8_t> aad = from_hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
  std::vector<uint8_t> text = from_hex(kPlain15);
  text.resize(60);
  AesGcm seal(key_of(kKey15), AesGcm::Direction::kSeal);
  std::array<uint8_t, kTagBytes> tag{};
  ASSERT_TRUE(seal.seal(iv_of(kIv15), aad, text, {}, tag));
  std::vector<uint8_t> expected = from_hex(kCipher15);
  expected.resize(60);
  EXPECT_EQ(text, expected);
  EXPECT_EQ(std::vector<uint8_t>(tag.begin(), tag.end()),
            from_hex("76fc6ece0f4e1768cddf8853bb2d551b"));

  AesGcm open(key_of(kKey15), AesGcm::Direction::kOpen);
  std::vector<uint8_t> copy = text;
  EXPECT_TRUE(open.open(iv_of(kIv15), aad, copy, tag));
  std::vector<uint8_t> other_aad = aad;
  other_aad[0] ^= 1;
  copy = text;
  EXPECT_FALSE(open.open(iv_of(kIv15), other_aad, copy, tag));
}

// What a gathering datapath would send from the sender's memory is sealed into the bytes
// behind the header part: the result is as if both had lain in one buffer.
TEST(AesGcm, gathered_bytes_seal_as_if_contiguous) {
  const Key key = key_of(kKey15);
  const std::vector<uint8_t> plain = from_hex(kPlain15);
  for (size_t split : {size_t{0}, size_t{1}, size_t{16}, size_t{17}, plain.size()}) {
    std::vector<uint8_t> whole = plain;
    std::array<uint8_t, kTagBytes> whole_tag{};
    ASSERT_TRUE(AesGcm(key, AesGcm::Direction::kSeal).seal(iv_of(kIv15), {}, whole, {}, whole_tag));

    std::vector<uint8_t> buffer(plain.begin(), plain.begin() + static_cast<ptrdiff_t>(split));
    buffer.resize(plain.size());
    const std::vector<uint8_t> gathered(plain.begin() + static_cast<ptrdiff_t>(split), plain.end());
    std::array<uint8_t, kTagBytes> tag{};
    ASSERT_TRUE(AesGcm(key, AesGcm::Direction::kSeal)
                    .seal(iv_of(kIv15), {}, std::span(buffer).first(split), gathered, tag));
    EXPECT_EQ(buffer, whole) << split;
    EXPECT_EQ(tag, whole_tag) << split;
  }
}

TEST(AesGcm, decrypts_a_trimmed_prefix_without_its_tag) {
  std::vector<uint8_t> text = from_hex(kCipher15);
  text.resize(24);  // the tag and most of the packet cut off
  ASSERT_TRUE(
      AesGcm(key_of(kKey15), AesGcm::Direction::kOpen).decrypt_unverified(iv_of(kIv15), text));
  std::vector<uint8_t> expected = from_hex(kPlain15);
  expected.resize(24);
  EXPECT_EQ(text, expected);
}

TEST(AesGcm, a_context_without_a_key_refuses_everything) {
  AesGcm none;
  EXPECT_FALSE(none.valid());
  std::vector<uint8_t> text(16);
  std::array<uint8_t, kTagBytes> tag{};
  EXPECT_FALSE(none.seal(Iv{}, {}, text, {}, tag));
  EXPECT_FALSE(none.open(Iv{}, {}, text, tag));
  EXPECT_FALSE(none.decrypt_unverified(Iv{}, text));
}

}  // namespace
}  // namespace spray::tss
