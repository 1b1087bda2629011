#include "collectives/reduce_kernels.h"

#include <algorithm>
#include <cstring>

namespace spray::coll {
namespace {

struct Sum {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a + b);
  }
};
struct Prod {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(a * b);
  }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// Integer sums and products wrap: done in the unsigned type of the same width, so signed
// overflow is defined behaviour.
template <class T>
struct Wrapping {
  using type = T;
};
template <>
struct Wrapping<int8_t> {
  using type = uint8_t;
};
template <>
struct Wrapping<int32_t> {
  using type = uint32_t;
};
template <>
struct Wrapping<int64_t> {
  using type = uint64_t;
};

// d[i] = a[i] OP b[i]; `a` may be `d` (the in-place reduction).
template <class T, class Op>
[[gnu::always_inline]] inline void combine(void* dst, const void* left, const void* right, size_t n,
                                           Op op) {
  auto* d = static_cast<T*>(dst);
  const auto* a = static_cast<const T*>(left);
  const auto* b = static_cast<const T*>(right);
  if constexpr (std::is_integral_v<T> && (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>)) {
    using U = typename Wrapping<T>::type;
    for (size_t i = 0; i < n; ++i) {
      d[i] = static_cast<T>(op(static_cast<U>(a[i]), static_cast<U>(b[i])));
    }
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = op(a[i], b[i]);
  }
}

template <class T>
[[gnu::always_inline]] inline void combine_op(void* dst, const void* a, const void* b, size_t n,
                                              ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return combine<T>(dst, a, b, n, Sum{});
    case ReduceOp::kProd:
      return combine<T>(dst, a, b, n, Prod{});
    case ReduceOp::kMin:
      return combine<T>(dst, a, b, n, Min{});
    case ReduceOp::kMax:
      return combine<T>(dst, a, b, n, Max{});
  }
}

// IEEE binary16 and bfloat16 to and from f32 (round to nearest, ties to even); inline
// so that the kernels below compile them per instruction set.
[[gnu::always_inline]] inline float widen_half(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // zero
  } else {        // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while (!(mant & 0x400u));
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

[[gnu::always_inline]] inline uint16_t narrow_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {               // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

[[gnu::always_inline]] inline float widen_bf16(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

[[gnu::always_inline]] inline uint16_t narrow_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>(x >> 16);
}

// 16-bit floats: widen, operate in f32, round back. Blocks keep the widened values in
// registers/L1 so the loops stay simple.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
[[gnu::always_inline]] inline void combine_half(void* dst, const void* left, const void* right,
                                                size_t n, ReduceOp op) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* l = static_cast<const uint16_t*>(left);
  const auto* r = static_cast<const uint16_t*>(right);
  constexpr size_t kBlock = 256;
  float a[kBlock], b[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) {
      a[i] = Widen(l[base + i]);
      b[i] = Widen(r[base + i]);
    }
    combine_op<float>(a, a, b, m, op);
    for (size_t i = 0; i < m; ++i) d[base + i] = Narrow(a[i]);
  }
}

[[gnu::always_inline]] inline void combine_native(void* dst, const void* a, const void* b, size_t n,
                                                  DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kF32:
      return combine_op<float>(dst, a, b, n, op);
    case DataType::kF64:
      return combine_op<double>(dst, a, b, n, op);
    case DataType::kI8:
      return combine_op<int8_t>(dst, a, b, n, op);
    case DataType::kU8:
      return combine_op<uint8_t>(dst, a, b, n, op);
    case DataType::kI32:
      return combine_op<int32_t>(dst, a, b, n, op);
    case DataType::kU32:
      return combine_op<uint32_t>(dst, a, b, n, op);
    case DataType::kI64:
      return combine_op<int64_t>(dst, a, b, n, op);
    case DataType::kU64:
      return combine_op<uint64_t>(dst, a, b, n, op);
    case DataType::kF16:
      return combine_half<widen_half, narrow_half>(dst, a, b, n, op);
    case DataType::kBF16:
      return combine_half<widen_bf16, narrow_bf16>(dst, a, b, n, op);
  }
}

[[gnu::target("avx512f,avx512bw,avx512vl")]] void native_avx512(void* dst, const void* a,
                                                                const void* b, size_t n,
                                                                DataType type, ReduceOp op) {
  combine_native(dst, a, b, n, type, op);
}
[[gnu::target("avx2")]] void native_avx2(void* dst, const void* a, const void* b, size_t n,
                                         DataType type, ReduceOp op) {
  combine_native(dst, a, b, n, type, op);
}
void native_portable(void* dst, const void* a, const void* b, size_t n, DataType type,
                     ReduceOp op) {
  combine_native(dst, a, b, n, type, op);
}

using NativeKernel = void (*)(void*, const void*, const void*, size_t, DataType, ReduceOp);
struct Selected {
  NativeKernel kernel;
  std::string_view isa;
};
Selected select_kernel() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return {native_avx512, "avx512"};
  }
  if (__builtin_cpu_supports("avx2")) return {native_avx2, "avx2"};
  return {native_portable, "portable"};
}
const Selected& selected() {
  static const Selected s = select_kernel();
  return s;
}

template <class T>
void divide(void* data, size_t n, T by) {
  auto* d = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) d[i] = d[i] / by;
}

}  // namespace

float half_to_float(uint16_t h) {
  return widen_half(h);
}
uint16_t float_to_half(float f) {
  return narrow_half(f);
}
float bf16_to_float(uint16_t b) {
  return widen_bf16(b);
}
uint16_t float_to_bf16(float f) {
  return narrow_bf16(f);
}

void reduce(void* dst, const void* src, size_t count, DataType type, ReduceOp op) {
  if (count == 0) return;
  selected().kernel(dst, dst, src, count, type, op);
}

void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op) {
  if (count == 0) return;
  selected().kernel(dst, a, b, count, type, op);
}

void finish_average(void* data, size_t count, DataType type, int contributors) {
  switch (type) {
    case DataType::kF32:
      return divide<float>(data, count, static_cast<float>(contributors));
    case DataType::kF64:
      return divide<double>(data, count, static_cast<double>(contributors));
    case DataType::kF16:
    case DataType::kBF16: {
      const bool half = type == DataType::kF16;
      auto* d = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) {
        const float v =
            (half ? half_to_float(d[i]) : bf16_to_float(d[i])) / static_cast<float>(contributors);
        d[i] = half ? float_to_half(v) : float_to_bf16(v);
      }
      return;
    }
    default:
      return;  // not defined for integers (is_valid refuses it)
  }
}

std::string_view kernel_isa() {
  return selected().isa;
}

}  // namespace spray::coll
