// Reduction kernels: every type x op against a scalar reference, integer wrap-around,
// odd lengths (vector tails), and the f16/bf16 conversions at their edges.
#include "collectives/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace spray::coll {
namespace {

template <class T>
std::vector<T> iota_mod(size_t n, int mul, int mod, int off) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int>(i) * mul % mod + off);
  return v;
}

template <class T>
void check_native(DataType t) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{1000}, size_t{4099}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      auto a = iota_mod<T>(n, 7, 50, 1), b = iota_mod<T>(n, 13, 40, 2);
      std::vector<T> want(n);
      for (size_t i = 0; i < n; ++i) {
        switch (op) {
          case ReduceOp::kSum:
            want[i] = static_cast<T>(a[i] + b[i]);
            break;
          case ReduceOp::kProd:
            want[i] = static_cast<T>(a[i] * b[i]);
            break;
          case ReduceOp::kMin:
            want[i] = std::min(a[i], b[i]);
            break;
          default:
            want[i] = std::max(a[i], b[i]);
            break;
        }
      }
      reduce(a.data(), b.data(), n, t, op);
      EXPECT_EQ(a, want) << name(t) << " " << name(op) << " n=" << n;
    }
  }
}

TEST(ReduceKernels, native_types_match_a_scalar_reference) {
  check_native<float>(DataType::kF32);
  check_native<double>(DataType::kF64);
  check_native<uint8_t>(DataType::kU8);
  check_native<int32_t>(DataType::kI32);
  check_native<uint32_t>(DataType::kU32);
  check_native<int64_t>(DataType::kI64);
  check_native<uint64_t>(DataType::kU64);
  SUCCEED() << "kernels: " << kernel_isa();
}

TEST(ReduceKernels, integers_wrap_like_twos_complement) {
  int8_t a[3] = {127, -128, 100}, b[3] = {1, -1, 100};
  reduce(a, b, 3, DataType::kI8, ReduceOp::kSum);
  EXPECT_EQ(a[0], -128);
  EXPECT_EQ(a[1], 127);
  EXPECT_EQ(a[2], static_cast<int8_t>(200));
  int64_t x = std::numeric_limits<int64_t>::max(), y = 2;
  reduce(&x, &y, 1, DataType::kI64, ReduceOp::kProd);
  EXPECT_EQ(x, -2);
  int8_t lo[2] = {-5, 7}, hi[2] = {3, -9};
  reduce(lo, hi, 2, DataType::kI8, ReduceOp::kMin);
  EXPECT_EQ(lo[0], -5);
  EXPECT_EQ(lo[1], -9);
}

TEST(ReduceKernels, half_types_operate_in_f32_and_round_to_nearest_even) {
  std::vector<uint16_t> a(1001), b(1001);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float_to_half(static_cast<float>(i % 97) * 0.5f);
    b[i] = float_to_half(static_cast<float>(i % 89) * 0.25f);
  }
  auto want = a;
  for (size_t i = 0; i < a.size(); ++i) {
    want[i] = float_to_half(half_to_float(a[i]) + half_to_float(b[i]));
  }
  reduce(a.data(), b.data(), a.size(), DataType::kF16, ReduceOp::kSum);
  EXPECT_EQ(a, want);
  uint16_t x = float_to_bf16(3.0f), y = float_to_bf16(5.0f);
  reduce(&x, &y, 1, DataType::kBF16, ReduceOp::kMax);
  EXPECT_EQ(bf16_to_float(x), 5.0f);
  float avg[2] = {6.0f, 9.0f};
  finish_average(avg, 2, DataType::kF32, 3);
  EXPECT_EQ(avg[0], 2.0f);
  EXPECT_EQ(avg[1], 3.0f);
}

TEST(HalfConversions, known_bit_patterns) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);            // largest finite
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);            // rounds to infinity
  EXPECT_EQ(float_to_half(5.960464477539063e-08f), 1);   // smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // tie: to even (down)
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);  // tie: to even (up)
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);  // tie: to even (down)
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82);  // tie: to even (up)
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives the round trip
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DataTypes, names_round_trip) {
  for (DataType t : kAllTypes) EXPECT_EQ(parse_data_type(name(t)), t);
  for (ReduceOp op : kAllOps) EXPECT_EQ(parse_reduce_op(name(op)), op);
  EXPECT_FALSE(parse_data_type("f8"));
  EXPECT_FALSE(is_valid(DataType::kI32, ReduceOp::kAvg));
  EXPECT_TRUE(is_valid(DataType::kBF16, ReduceOp::kAvg));
}

}  // namespace
}  // namespace spray::coll
