// Element types and reduction operators of the collectives, and their names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace spray::coll {

enum class DataType : uint8_t { kF32, kF64, kF16, kBF16, kI8, kU8, kI32, kU32, kI64, kU64 };
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };

inline constexpr DataType kAllTypes[] = {
    DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16, DataType::kI8,
    DataType::kU8,  DataType::kI32, DataType::kU32, DataType::kI64,  DataType::kU64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kAvg};

// Bytes per element.
constexpr size_t size_of(DataType t) {
  switch (t) {
    case DataType::kF64:
    case DataType::kI64:
    case DataType::kU64:
      return 8;
    case DataType::kF32:
    case DataType::kI32:
    case DataType::kU32:
      return 4;
    case DataType::kF16:
    case DataType::kBF16:
      return 2;
    case DataType::kI8:
    case DataType::kU8:
      return 1;
  }
  return 1;
}

constexpr bool is_floating(DataType t) {
  return t == DataType::kF32 || t == DataType::kF64 || t == DataType::kF16 || t == DataType::kBF16;
}

// avg is the mean, defined for floating types only (an integer mean would round).
constexpr bool is_valid(DataType t, ReduceOp op) {
  return op != ReduceOp::kAvg || is_floating(t);
}

// Element i of a buffer of type t as a double, and back (integers wrap like two's
// complement; f16/bf16 round to nearest even). For checks and tools, not fast paths.
double load_element(const void* buf, size_t i, DataType t);
void store_element(void* buf, size_t i, DataType t, double v);

// a OP b on doubles (avg combines as a sum), for references computed outside the kernels.
double combine_scalar(ReduceOp op, double a, double b);

std::string_view name(DataType t);
std::string_view name(ReduceOp op);
std::optional<DataType> parse_data_type(std::string_view s);  // "f32", "bf16", "u64", ...
std::optional<ReduceOp> parse_reduce_op(std::string_view s);  // "sum", "avg", ...

}  // namespace spray::coll
