#include "collectives/quantize.h"

#include <algorithm>
#include <cstring>

namespace spray::coll {
namespace {

constexpr size_t kGroupHeader = 2 * sizeof(float);  // min, scale

size_t code_bytes(size_t values, int bits) {
  return (values * static_cast<size_t>(bits) + 7) / 8;
}

// The group's minimum and step.
[[gnu::always_inline]] inline void group_range(const float* in, size_t n, int bits, float& min,
                                               float& scale) {
  float lo = in[0], hi = in[0];
  for (size_t i = 1; i < n; ++i) {
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  min = lo;
  scale = (hi - lo) / static_cast<float>((1u << bits) - 1);
}

// One group: header, then codes. Rounds half up by adding 0.5 and truncating
// (x - min >= 0): unlike nearbyint, a libm call per value on baseline x86-64, it
// vectorises.
template <int kBits>
[[gnu::always_inline]] inline uint8_t* encode_group(const float* v, size_t n, uint8_t* out) {
  float min, scale;
  group_range(v, n, kBits, min, scale);
  std::memcpy(out, &min, sizeof(float));
  std::memcpy(out + sizeof(float), &scale, sizeof(float));
  uint8_t* codes = out + kGroupHeader;
  const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
  constexpr float kTop = (1u << kBits) - 1;
  auto code = [&](size_t i) {
    return static_cast<uint8_t>(std::min((v[i] - min) * inverse + 0.5f, kTop));
  };
  if constexpr (kBits == 8) {
    for (size_t i = 0; i < n; ++i) codes[i] = code(i);
  } else {
    for (size_t i = 0; i + 1 < n; i += 2) {
      codes[i / 2] = static_cast<uint8_t>(code(i) | code(i + 1) << 4);
    }
    if (n % 2) codes[n / 2] = code(n - 1);
  }
  return codes + code_bytes(n, kBits);
}

template <int kBits, bool kAdd>
[[gnu::always_inline]] inline const uint8_t* decode_group(const uint8_t* in, size_t n, float* out) {
  float min, scale;
  std::memcpy(&min, in, sizeof(float));
  std::memcpy(&scale, in + sizeof(float), sizeof(float));
  const uint8_t* codes = in + kGroupHeader;
  for (size_t i = 0; i < n; ++i) {
    const unsigned code = kBits == 8 ? codes[i] : (codes[i / 2] >> (4 * (i % 2))) & 0xf;
    const float v = min + scale * static_cast<float>(code);
    if constexpr (kAdd) {
      out[i] += v;
    } else {
      out[i] = v;
    }
  }
  return codes + code_bytes(n, kBits);
}

template <int kBits, bool kAdd>
[[gnu::always_inline]] inline void decode_all(const uint8_t* in, size_t count, size_t group,
                                              float* out) {
  for (size_t first = 0; first < count; first += group) {
    in = decode_group<kBits, kAdd>(in, std::min(group, count - first), out + first);
  }
}

// The loops, compiled for AVX-512, AVX2 and baseline x86-64; the loader picks one.
[[gnu::target_clones("avx512f", "avx2", "default")]] void encode(const float* in, size_t count,
                                                                 size_t group, int bits,
                                                                 uint8_t* out) {
  for (size_t first = 0; first < count; first += group) {
    const size_t n = std::min(group, count - first);
    out = bits == 8 ? encode_group<8>(in + first, n, out) : encode_group<4>(in + first, n, out);
  }
}

[[gnu::target_clones("avx512f", "avx2", "default")]] void decode(const uint8_t* in, size_t count,
                                                                 size_t group, int bits, bool add,
                                                                 float* out) {
  if (bits == 8) {
    add ? decode_all<8, true>(in, count, group, out) : decode_all<8, false>(in, count, group, out);
  } else {
    add ? decode_all<4, true>(in, count, group, out) : decode_all<4, false>(in, count, group, out);
  }
}

}  // namespace

size_t quantized_bytes(size_t count, const Compression& c) {
  const size_t full = count / c.group_size, rest = count % c.group_size;
  return full * (kGroupHeader + code_bytes(c.group_size, c.bits)) +
         (rest ? kGroupHeader + code_bytes(rest, c.bits) : 0);
}

void quantize(const float* in, size_t count, const Compression& c, uint8_t* out) {
  encode(in, count, c.group_size, c.bits, out);
}

void dequantize(const uint8_t* in, size_t count, const Compression& c, float* out) {
  decode(in, count, c.group_size, c.bits, false, out);
}

void dequantize_add(const uint8_t* in, size_t count, const Compression& c, float* out) {
  decode(in, count, c.group_size, c.bits, true, out);
}

float quantization_error_bound(const float* values, size_t count, size_t i, const Compression& c) {
  const size_t first = i / c.group_size * c.group_size;
  float min, scale;
  group_range(values + first, std::min(c.group_size, count - first), c.bits, min, scale);
  return scale / 2;
}

}  // namespace spray::coll
