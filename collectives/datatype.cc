#include "collectives/datatype.h"

namespace spray::coll {
namespace {
constexpr std::string_view kTypeNames[] = {"f32", "f64", "f16", "bf16", "i8",
                                           "u8",  "i32", "u32", "i64",  "u64"};
constexpr std::string_view kOpNames[] = {"sum", "prod", "min", "max", "avg"};
}  // namespace

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
