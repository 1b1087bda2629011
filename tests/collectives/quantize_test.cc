// Group-wise quantisation: sizes of the encoding, the scale/2 error bound per group for
// INT8 and INT4, exact constant groups, short last groups, and decode-add.
#include "collectives/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace spray::coll {
namespace {

TEST(Quantize, EncodedSizeIsHeadersPlusPackedCodes) {
  EXPECT_EQ(quantized_bytes(0, {8, 64}), 0u);
  EXPECT_EQ(quantized_bytes(64, {8, 64}), 8u + 64);
  EXPECT_EQ(quantized_bytes(65, {8, 64}), 8u + 64 + 8 + 1);
  EXPECT_EQ(quantized_bytes(64, {4, 64}), 8u + 32);
  EXPECT_EQ(quantized_bytes(3, {4, 64}), 8u + 2);  // odd count: last byte half used
  // INT8 in groups of 64 is 1.125 bytes a value (28% of f32), INT4 0.625 (16%).
  EXPECT_EQ(quantized_bytes(1 << 20, {8, 64}), (1u << 20) * 9 / 8);
  EXPECT_EQ(quantized_bytes(1 << 20, {4, 64}), (1u << 20) * 5 / 8);
}

TEST(Quantize, RoundTripStaysWithinHalfAStepOfItsGroup) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int bits : {8, 4}) {
    for (size_t group : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}}) {
      for (size_t n : {size_t{1}, size_t{63}, size_t{1001}, size_t{5000}}) {
        std::vector<float> x(n);
        for (float& v : x) v = dist(rng);
        const Compression z{bits, group};
        std::vector<uint8_t> enc(quantized_bytes(n, z));
        quantize(x.data(), n, z, enc.data());
        std::vector<float> y(n, 0.0f);
        dequantize(enc.data(), n, z, y.data());
        double worst_step = 0;
        for (size_t i = 0; i < n; ++i) {
          const float bound = quantization_error_bound(x.data(), n, i, z);
          ASSERT_LE(std::fabs(y[i] - x[i]), bound * 1.0001f + 1e-6f)
              << "bits " << bits << " group " << group << " n " << n << " i " << i;
          worst_step = std::max(worst_step, double(bound));
        }
        if (group > 1 && n > 1) {
          EXPECT_GT(worst_step, 0.0);  // it really quantised
        }
      }
    }
  }
}

TEST(Quantize, ConstantGroupsAndExtremesDecodeExactly) {
  const Compression z{4, 4};
  const std::vector<float> x = {2.5f, 2.5f, 2.5f, 2.5f, -1.0f, 7.0f, 3.0f, -1.0f};
  std::vector<uint8_t> enc(quantized_bytes(x.size(), z));
  quantize(x.data(), x.size(), z, enc.data());
  std::vector<float> y(x.size());
  dequantize(enc.data(), x.size(), z, y.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(y[i], 2.5f);
  EXPECT_FLOAT_EQ(y[4], -1.0f);  // a group's minimum and maximum survive
  EXPECT_FLOAT_EQ(y[5], 7.0f);
}

TEST(Quantize, DequantizeAddAccumulates) {
  const Compression z{8, 16};
  std::vector<float> x(40), acc(40, 10.0f), decoded(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
  std::vector<uint8_t> enc(quantized_bytes(x.size(), z));
  quantize(x.data(), x.size(), z, enc.data());
  dequantize(enc.data(), x.size(), z, decoded.data());
  dequantize_add(enc.data(), x.size(), z, acc.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(acc[i], 10.0f + decoded[i]);
}

}  // namespace
}  // namespace spray::coll
