// The target's atomic kernel (transport/ses/atomic_op.h) against results worked out by
// hand: every opcode on integers and floating point, the order of compare-and-swap's
// operands, wrapping arithmetic, old values, and which pairs it refuses.
#include "transport/ses/atomic_op.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace spray::ses {
namespace {

using wire::AmoDatatype;
using wire::AmoOpcode;
using wire::ReturnCode;

// Applies `op` to one element holding `start` with `operand`; returns {new, old}.
template <class T>
std::pair<T, T> one(AmoOpcode op, AmoDatatype type, T start, T operand, T compare = T{},
                    T swap = T{}) {
  alignas(8) T target = start;
  T old{};
  uint64_t c = 0, s = 0;
  std::memcpy(&c, &compare, sizeof(T));
  std::memcpy(&s, &swap, sizeof(T));
  apply_atomic(op, type, reinterpret_cast<uint8_t*>(&target),
               reinterpret_cast<const uint8_t*>(&operand), c, s, 1,
               reinterpret_cast<uint8_t*>(&old));
  return {target, old};
}

TEST(AtomicOp, integer_operations_give_the_results_worked_out_by_hand) {
  using P = std::pair<int32_t, int32_t>;
  const auto i32 = AmoDatatype::kInt32;
  EXPECT_EQ(one<int32_t>(AmoOpcode::kMin, i32, 5, -3), P(-3, 5));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kMin, i32, -7, 3), P(-7, -7));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kMax, i32, 5, -3), P(5, 5));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kSum, i32, 40, 2), P(42, 40));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kDiff, i32, 40, 2), P(38, 40));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kProd, i32, -6, 7), P(-42, -6));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kLogicalOr, i32, 0, 9), P(1, 0));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kLogicalAnd, i32, 4, 0), P(0, 4));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kLogicalAnd, i32, 4, 2), P(1, 4));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kLogicalXor, i32, 4, 2), P(0, 4));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kLogicalXor, i32, 0, 2), P(1, 0));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kBitwiseOr, i32, 0x0c, 0x03), P(0x0f, 0x0c));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kBitwiseAnd, i32, 0x0c, 0x06), P(0x04, 0x0c));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kBitwiseXor, i32, 0x0c, 0x06), P(0x0a, 0x0c));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kRead, i32, 77, 0), P(77, 77));
  EXPECT_EQ(one<int32_t>(AmoOpcode::kWrite, i32, 77, 5), P(5, 77));
}

TEST(AtomicOp, integer_arithmetic_wraps_in_twos_complement) {
  EXPECT_EQ((one<int8_t>(AmoOpcode::kSum, AmoDatatype::kInt8, 127, 1).first), -128);
  EXPECT_EQ((one<uint8_t>(AmoOpcode::kDiff, AmoDatatype::kUint8, 0, 1).first), 255);
  EXPECT_EQ((one<uint16_t>(AmoOpcode::kProd, AmoDatatype::kUint16, 300, 300).first),
            static_cast<uint16_t>(90000 % 65536));
  EXPECT_EQ(
      (one<int64_t>(AmoOpcode::kProd, AmoDatatype::kInt64, std::numeric_limits<int64_t>::max(), 2)
           .first),
      -2);
  // Unsigned comparisons are unsigned: 200 is the larger uint8.
  EXPECT_EQ((one<uint8_t>(AmoOpcode::kMax, AmoDatatype::kUint8, 100, 200).first), 200);
  EXPECT_EQ((one<int8_t>(AmoOpcode::kMax, AmoDatatype::kInt8, 100, -56).first), 100);
}

TEST(AtomicOp, compare_and_swap_reads_compare_op_target_as_libfabric_does) {
  const auto u64 = AmoDatatype::kUint64;
  using P = std::pair<uint64_t, uint64_t>;
  // target 10, swap value 99: "compare OP 10" decides.
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwap, u64, 10, 0, 10, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwap, u64, 10, 0, 11, 99), P(10, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapNotEqual, u64, 10, 0, 11, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapNotEqual, u64, 10, 0, 10, 99), P(10, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapLessEqual, u64, 10, 0, 10, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapLessEqual, u64, 10, 0, 11, 99), P(10, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapLess, u64, 10, 0, 9, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapLess, u64, 10, 0, 10, 99), P(10, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapGreaterEqual, u64, 10, 0, 10, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapGreaterEqual, u64, 10, 0, 9, 99), P(10, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapGreater, u64, 10, 0, 11, 99), P(99, 10));
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kCompareSwapGreater, u64, 10, 0, 10, 99), P(10, 10));
  // Masked swap: the mask's bits come from the swap value, the others stay.
  EXPECT_EQ(one<uint64_t>(AmoOpcode::kMaskedSwap, u64, 0xff00, 0, 0x0ff0, 0xabcd),
            P(0xfbc0, 0xff00));
}

TEST(AtomicOp, floating_point_sums_products_and_swaps_by_value) {
  using D = std::pair<double, double>;
  const auto f64 = AmoDatatype::kDouble;
  EXPECT_EQ(one<double>(AmoOpcode::kSum, f64, 1.5, 2.25), D(3.75, 1.5));
  EXPECT_EQ(one<double>(AmoOpcode::kProd, f64, -1.5, 4.0), D(-6.0, -1.5));
  EXPECT_EQ(one<double>(AmoOpcode::kMin, f64, -1.5, 4.0), D(-1.5, -1.5));
  EXPECT_EQ(one<double>(AmoOpcode::kCompareSwap, f64, 2.0, 0, 2.0, 8.0), D(8.0, 2.0));
  EXPECT_EQ((one<float>(AmoOpcode::kSum, AmoDatatype::kFloat, 0.5f, 0.25f).first), 0.75f);
  EXPECT_EQ((one<float>(AmoOpcode::kMax, AmoDatatype::kFloat, 0.5f, 0.25f).first), 0.5f);
}

TEST(AtomicOp, several_elements_take_their_own_operands_and_report_their_own_old_values) {
  alignas(8) uint16_t target[5] = {1, 2, 3, 4, 5};
  const uint16_t operands[5] = {10, 20, 30, 40, 50};
  uint8_t operand_bytes[sizeof operands + 1];  // operands need no alignment
  std::memcpy(operand_bytes + 1, operands, sizeof operands);
  uint16_t old[5] = {};
  apply_atomic(AmoOpcode::kSum, AmoDatatype::kUint16, reinterpret_cast<uint8_t*>(target),
               operand_bytes + 1, 0, 0, 5, reinterpret_cast<uint8_t*>(old));
  EXPECT_EQ(std::vector<uint16_t>(target, target + 5), (std::vector<uint16_t>{11, 22, 33, 44, 55}));
  EXPECT_EQ(std::vector<uint16_t>(old, old + 5), (std::vector<uint16_t>{1, 2, 3, 4, 5}));
}

TEST(AtomicOp, check_refuses_what_has_no_meaning_and_the_types_it_does_not_apply) {
  EXPECT_EQ(check_atomic(AmoOpcode::kSum, AmoDatatype::kUint64, false), ReturnCode::kOk);
  EXPECT_EQ(check_atomic(AmoOpcode::kSum, AmoDatatype::kDouble, true), ReturnCode::kOk);
  // Reading and compare-and-swap only exist as fetching operations.
  EXPECT_EQ(check_atomic(AmoOpcode::kRead, AmoDatatype::kUint64, false),
            ReturnCode::kAmoUnsupportedOp);
  EXPECT_EQ(check_atomic(AmoOpcode::kCompareSwap, AmoDatatype::kUint64, false),
            ReturnCode::kAmoUnsupportedOp);
  EXPECT_EQ(check_atomic(AmoOpcode::kCompareSwap, AmoDatatype::kUint64, true), ReturnCode::kOk);
  // Bitwise operations and masked swap have no meaning on floating point.
  for (auto op : {AmoOpcode::kBitwiseOr, AmoOpcode::kBitwiseAnd, AmoOpcode::kBitwiseXor,
                  AmoOpcode::kMaskedSwap}) {
    EXPECT_EQ(check_atomic(op, AmoDatatype::kFloat, true), ReturnCode::kAmoUnsupportedOp);
    EXPECT_EQ(check_atomic(op, AmoDatatype::kInt8, true), ReturnCode::kOk);
  }
  for (auto t : {AmoDatatype::kInt128, AmoDatatype::kUint128, AmoDatatype::kFloatComplex,
                 AmoDatatype::kDoubleComplex, AmoDatatype::kLongDouble,
                 AmoDatatype::kLongDoubleComplex, AmoDatatype::kBf16, AmoDatatype::kFp16}) {
    EXPECT_EQ(check_atomic(AmoOpcode::kSum, t, true), ReturnCode::kAmoUnsupportedDatatype);
    EXPECT_EQ(amo_element_bytes(t), 0u);
  }
  EXPECT_EQ(check_atomic(static_cast<AmoOpcode>(0x14), AmoDatatype::kInt8, true),
            ReturnCode::kAmoUnsupportedOp);
}

}  // namespace
}  // namespace spray::ses
