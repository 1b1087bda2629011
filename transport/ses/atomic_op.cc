// Applying UET atomic opcodes to memory (see atomic_op.h).
#include "transport/ses/atomic_op.h"

#include <atomic>
#include <bit>
#include <cstring>
#include <type_traits>

namespace spray::ses {
namespace {

using wire::AmoDatatype;
using wire::AmoOpcode;

bool is_integer(AmoDatatype t) {
  return t <= AmoDatatype::kUint64;
}

// Wrapping arithmetic for every integer type (signed overflow would be undefined).
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class T>
T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promoted to at least unsigned int, so that uint16 * uint16 cannot overflow an int.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

// The new value of an element that held `old`, for the operations that combine it with
// an operand.
template <class T>
T combine(AmoOpcode op, T old, T operand) {
  switch (op) {
    case AmoOpcode::kMin:
      return operand < old ? operand : old;
    case AmoOpcode::kMax:
      return operand > old ? operand : old;
    case AmoOpcode::kSum:
      return wrap_add(old, operand);
    case AmoOpcode::kDiff:
      return wrap_sub(old, operand);
    case AmoOpcode::kProd:
      return wrap_mul(old, operand);
    case AmoOpcode::kLogicalOr:
      return static_cast<T>((old != T{}) || (operand != T{}));
    case AmoOpcode::kLogicalAnd:
      return static_cast<T>((old != T{}) && (operand != T{}));
    case AmoOpcode::kLogicalXor:
      return static_cast<T>((old != T{}) != (operand != T{}));
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case AmoOpcode::kBitwiseOr:
        return static_cast<T>(old | operand);
      case AmoOpcode::kBitwiseAnd:
        return static_cast<T>(old & operand);
      case AmoOpcode::kBitwiseXor:
        return static_cast<T>(old ^ operand);
      default:
        break;
    }
  }
  return operand;  // kWrite
}

// Whether a compare-and-swap opcode swaps an element holding `current` (libfabric's
// order of operands: "compare OP current").
template <class T>
bool swaps(AmoOpcode op, T compare, T current) {
  switch (op) {
    case AmoOpcode::kCompareSwap:
      return compare == current;
    case AmoOpcode::kCompareSwapNotEqual:
      return compare != current;
    case AmoOpcode::kCompareSwapLessEqual:
      return compare <= current;
    case AmoOpcode::kCompareSwapLess:
      return compare < current;
    case AmoOpcode::kCompareSwapGreaterEqual:
      return compare >= current;
    case AmoOpcode::kCompareSwapGreater:
      return compare > current;
    default:
      return false;
  }
}

template <class T>
T from_bits(uint64_t bits) {
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  return std::bit_cast<T>(static_cast<Bits>(bits));
}

// One element: returns its value before the operation.
template <class T>
T apply_one(AmoOpcode op, T& target, T operand, T compare, T swap) {
  std::atomic_ref<T> word(target);
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case AmoOpcode::kSum:
        return word.fetch_add(operand);
      case AmoOpcode::kDiff:
        return word.fetch_sub(operand);
      case AmoOpcode::kBitwiseOr:
        return word.fetch_or(operand);
      case AmoOpcode::kBitwiseAnd:
        return word.fetch_and(operand);
      case AmoOpcode::kBitwiseXor:
        return word.fetch_xor(operand);
      case AmoOpcode::kMaskedSwap: {
        T old = word.load();
        while (!word.compare_exchange_weak(
            old, static_cast<T>((swap & compare) | (old & static_cast<T>(~compare))))) {
        }
        return old;
      }
      default:
        break;
    }
  }
  switch (op) {
    case AmoOpcode::kRead:
      return word.load();
    case AmoOpcode::kWrite:
      return word.exchange(operand);
    default:
      break;
  }
  T old = word.load();
  if (wire::is_compare_swap(op)) {
    // A failed exchange reloads `old`; the condition is judged again on the new value.
    while (swaps(op, compare, old)) {
      if (word.compare_exchange_weak(old, swap)) break;
    }
    return old;
  }
  while (!word.compare_exchange_weak(old, combine(op, old, operand))) {
  }
  return old;
}

template <class T>
void apply_all(AmoOpcode op, uint8_t* target, const uint8_t* operands, uint64_t compare,
               uint64_t swap, uint32_t count, uint8_t* old_values) {
  const T c = from_bits<T>(compare), s = from_bits<T>(swap);
  T* elements = reinterpret_cast<T*>(target);  // aligned: checked by the caller
  for (uint32_t i = 0; i < count; ++i) {
    T operand{};
    if (operands) std::memcpy(&operand, operands + i * sizeof(T), sizeof(T));
    const T old = apply_one(op, elements[i], operand, c, s);
    if (old_values) std::memcpy(old_values + i * sizeof(T), &old, sizeof(T));
  }
}

// Calls f with a value of the C++ type of `type` (its value is irrelevant: the type is the
// argument) and returns what f returns; `none` for a type Spray does not operate on. The
// one place that maps UET datatypes to C++ types.
template <class R, class F>
R with_type(AmoDatatype type, R none, F&& f) {
  switch (type) {
    case AmoDatatype::kInt8:
      return f(int8_t{});
    case AmoDatatype::kUint8:
      return f(uint8_t{});
    case AmoDatatype::kInt16:
      return f(int16_t{});
    case AmoDatatype::kUint16:
      return f(uint16_t{});
    case AmoDatatype::kInt32:
      return f(int32_t{});
    case AmoDatatype::kUint32:
      return f(uint32_t{});
    case AmoDatatype::kInt64:
      return f(int64_t{});
    case AmoDatatype::kUint64:
      return f(uint64_t{});
    case AmoDatatype::kFloat:
      return f(float{});
    case AmoDatatype::kDouble:
      return f(double{});
    default:
      return none;
  }
}

}  // namespace

size_t amo_element_bytes(AmoDatatype type) {
  return with_type(type, size_t{0}, [](auto t) { return sizeof t; });
}

wire::ReturnCode check_atomic(AmoOpcode op, AmoDatatype type, bool fetching) {
  if (static_cast<uint8_t>(op) > wire::kMaxAmoOpcode) return wire::ReturnCode::kAmoUnsupportedOp;
  if (amo_element_bytes(type) == 0) return wire::ReturnCode::kAmoUnsupportedDatatype;
  const bool fetch_only = op == AmoOpcode::kRead || wire::is_compare_swap(op);
  if (fetch_only && !fetching) return wire::ReturnCode::kAmoUnsupportedOp;
  const bool integer_only = op == AmoOpcode::kBitwiseOr || op == AmoOpcode::kBitwiseAnd ||
                            op == AmoOpcode::kBitwiseXor || op == AmoOpcode::kMaskedSwap;
  if (integer_only && !is_integer(type)) return wire::ReturnCode::kAmoUnsupportedOp;
  return wire::ReturnCode::kOk;
}

void apply_atomic(AmoOpcode op, AmoDatatype type, uint8_t* target, const uint8_t* operands,
                  uint64_t compare, uint64_t swap, uint32_t count, uint8_t* old_values) {
  with_type(type, false, [&](auto t) {
    apply_all<decltype(t)>(op, target, operands, compare, swap, count, old_values);
    return true;
  });
}

}  // namespace spray::ses
