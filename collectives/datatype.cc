#include "collectives/datatype.h"

#include <algorithm>
#include <cstring>

#include "collectives/reduce_kernels.h"

namespace spray::coll {
namespace {
constexpr std::string_view kTypeNames[] = {"f32", "f64", "f16", "bf16", "i8",
                                           "u8",  "i32", "u32", "i64",  "u64"};
constexpr std::string_view kOpNames[] = {"sum", "prod", "min", "max", "avg"};
}  // namespace

void store_element(void* buf, size_t i, DataType t, double v) {
  auto* b = static_cast<uint8_t*>(buf);
  const auto wrapped = static_cast<uint64_t>(static_cast<int64_t>(v));
  switch (t) {
    case DataType::kF32: {
      const auto f = static_cast<float>(v);
      std::memcpy(b + i * 4, &f, 4);
      return;
    }
    case DataType::kF64:
      std::memcpy(b + i * 8, &v, 8);
      return;
    case DataType::kF16: {
      const uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(b + i * 2, &h, 2);
      return;
    }
    case DataType::kBF16: {
      const uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(b + i * 2, &h, 2);
      return;
    }
    case DataType::kI8:
    case DataType::kU8:
      b[i] = static_cast<uint8_t>(wrapped);
      return;
    case DataType::kI32:
    case DataType::kU32: {
      const auto x = static_cast<uint32_t>(wrapped);
      std::memcpy(b + i * 4, &x, 4);
      return;
    }
    case DataType::kI64:
    case DataType::kU64:
      std::memcpy(b + i * 8, &wrapped, 8);
      return;
  }
}

double load_element(const void* buf, size_t i, DataType t) {
  const auto* b = static_cast<const uint8_t*>(buf);
  switch (t) {
    case DataType::kF32: {
      float f;
      std::memcpy(&f, b + i * 4, 4);
      return f;
    }
    case DataType::kF64: {
      double d;
      std::memcpy(&d, b + i * 8, 8);
      return d;
    }
    case DataType::kF16:
    case DataType::kBF16: {
      uint16_t h;
      std::memcpy(&h, b + i * 2, 2);
      return t == DataType::kF16 ? half_to_float(h) : bf16_to_float(h);
    }
    case DataType::kI8:
      return static_cast<int8_t>(b[i]);
    case DataType::kU8:
      return b[i];
    case DataType::kI32: {
      int32_t x;
      std::memcpy(&x, b + i * 4, 4);
      return x;
    }
    case DataType::kU32: {
      uint32_t x;
      std::memcpy(&x, b + i * 4, 4);
      return x;
    }
    case DataType::kI64: {
      int64_t x;
      std::memcpy(&x, b + i * 8, 8);
      return static_cast<double>(x);
    }
    case DataType::kU64: {
      uint64_t x;
      std::memcpy(&x, b + i * 8, 8);
      return static_cast<double>(x);
    }
  }
  return 0;
}

double combine_scalar(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    default:
      return a + b;
  }
}

std::string_view name(DataType t) {
  return kTypeNames[static_cast<size_t>(t)];
}
std::string_view name(ReduceOp op) {
  return kOpNames[static_cast<size_t>(op)];
}
std::optional<DataType> parse_data_type(std::string_view s) {
  for (DataType t : kAllTypes) {
    if (name(t) == s) return t;
  }
  return std::nullopt;
}
std::optional<ReduceOp> parse_reduce_op(std::string_view s) {
  for (ReduceOp op : kAllOps) {
    if (name(op) == s) return op;
  }
  return std::nullopt;
}

}  // namespace spray::coll
