// derive_key is NIST SP 800-108's counter mode with AES-256-CMAC: checked against that
// construction computed here step by step with the CMAC primitive alone,
//   K(i) = CMAC(secret, [i]_32 || label || 0x00 || context || [256]_32),  key = K(1) || K(2),
// and for the properties the traffic keys rely on.
#include "transport/tss/key_derivation.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <string>
#include <vector>

namespace spray::tss {
namespace {

std::array<uint8_t, 16> cmac(const Key& key, const std::vector<uint8_t>& message) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "CMAC", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  char cipher[] = "AES-256-CBC";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0),
                               OSSL_PARAM_construct_end()};
  std::array<uint8_t, 16> out{};
  size_t n = 0;
  EXPECT_EQ(EVP_MAC_init(ctx, key.data(), key.size(), params), 1);
  EXPECT_EQ(EVP_MAC_update(ctx, message.data(), message.size()), 1);
  EXPECT_EQ(EVP_MAC_final(ctx, out.data(), &n, out.size()), 1);
  EXPECT_EQ(n, 16u);
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  return out;
}

Key counter_mode_by_hand(const Key& secret, const std::string& label,
                         const std::vector<uint8_t>& context) {
  Key out{};
  for (uint8_t i = 1; i <= 2; ++i) {
    std::vector<uint8_t> m = {0, 0, 0, i};
    m.insert(m.end(), label.begin(), label.end());
    m.push_back(0x00);
    m.insert(m.end(), context.begin(), context.end());
    m.insert(m.end(), {0x00, 0x00, 0x01, 0x00});  // L = 256 bits
    const auto k = cmac(secret, m);
    std::copy(k.begin(), k.end(), out.begin() + (i - 1) * 16);
  }
  return out;
}

Key secret_of(uint8_t seed) {
  Key k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return k;
}

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(KeyDerivation, is_sp800_108_counter_mode_over_aes_256_cmac) {
  const std::string label = "spray UET TSS pair key v1";
  for (uint8_t seed : {uint8_t{0}, uint8_t{1}, uint8_t{200}}) {
    for (size_t context_bytes : {size_t{0}, size_t{5}, size_t{56}}) {
      std::vector<uint8_t> context(context_bytes);
      for (size_t i = 0; i < context.size(); ++i) context[i] = static_cast<uint8_t>(i ^ seed);
      Key derived{};
      ASSERT_TRUE(derive_key(secret_of(seed), bytes(label), context, derived));
      EXPECT_EQ(derived, counter_mode_by_hand(secret_of(seed), label, context))
          << "seed " << int{seed} << ", context of " << context_bytes << " bytes";
    }
  }
}

TEST(KeyDerivation, every_input_changes_the_key) {
  const std::vector<uint8_t> context = {1, 2, 3, 4};
  Key base{}, other{};
  ASSERT_TRUE(derive_key(secret_of(1), bytes("a"), context, base));
  ASSERT_TRUE(derive_key(secret_of(1), bytes("a"), context, other));
  EXPECT_EQ(base, other);  // deterministic
  ASSERT_TRUE(derive_key(secret_of(2), bytes("a"), context, other));
  EXPECT_NE(base, other);
  ASSERT_TRUE(derive_key(secret_of(1), bytes("b"), context, other));
  EXPECT_NE(base, other);
  ASSERT_TRUE(derive_key(secret_of(1), bytes("a"), std::vector<uint8_t>{1, 2, 3, 5}, other));
  EXPECT_NE(base, other);
}

TEST(KeyDerivation, wipe_leaves_nothing_of_a_key) {
  Key k = secret_of(9);
  wipe(k);
  EXPECT_EQ(k, Key{});
}

}  // namespace
}  // namespace spray::tss
