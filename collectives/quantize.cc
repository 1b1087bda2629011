#include "collectives/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spray::coll {
namespace {

constexpr size_t kGroupHeader = 2 * sizeof(float);  // min, scale

size_t code_bytes(size_t values, int bits) {
  return (values * static_cast<size_t>(bits) + 7) / 8;
}

float levels(const Compression& c) {
  return static_cast<float>((1u << c.bits) - 1);
}

// The group's minimum and step.
void group_range(const float* in, size_t n, const Compression& c, float& min, float& scale) {
  float lo = in[0], hi = in[0];
  for (size_t i = 1; i < n; ++i) {
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  min = lo;
  scale = (hi - lo) / levels(c);
}

// Walks the encoding group by group: fn(values, n, min, scale, codes).
template <typename Fn>
void for_each_group(const uint8_t* in, size_t count, const Compression& c, Fn fn) {
  for (size_t first = 0; first < count; first += c.group_size) {
    const size_t n = std::min(c.group_size, count - first);
    float min, scale;
    std::memcpy(&min, in, sizeof(float));
    std::memcpy(&scale, in + sizeof(float), sizeof(float));
    fn(first, n, min, scale, in + kGroupHeader);
    in += kGroupHeader + code_bytes(n, c.bits);
  }
}

template <bool kAdd>
void decode(const uint8_t* in, size_t count, const Compression& c, float* out) {
  for_each_group(
      in, count, c, [&](size_t first, size_t n, float min, float scale, const uint8_t* codes) {
        float* o = out + first;
        for (size_t i = 0; i < n; ++i) {
          const unsigned code = c.bits == 8 ? codes[i] : (codes[i / 2] >> (4 * (i % 2))) & 0xf;
          const float v = min + scale * static_cast<float>(code);
          if constexpr (kAdd) {
            o[i] += v;
          } else {
            o[i] = v;
          }
        }
      });
}

}  // namespace

size_t quantized_bytes(size_t count, const Compression& c) {
  const size_t full = count / c.group_size, rest = count % c.group_size;
  return full * (kGroupHeader + code_bytes(c.group_size, c.bits)) +
         (rest ? kGroupHeader + code_bytes(rest, c.bits) : 0);
}

void quantize(const float* in, size_t count, const Compression& c, uint8_t* out) {
  const float top = levels(c);
  for (size_t first = 0; first < count; first += c.group_size) {
    const size_t n = std::min(c.group_size, count - first);
    const float* v = in + first;
    float min, scale;
    group_range(v, n, c, min, scale);
    std::memcpy(out, &min, sizeof(float));
    std::memcpy(out + sizeof(float), &scale, sizeof(float));
    uint8_t* codes = out + kGroupHeader;
    const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
    if (c.bits == 4) std::memset(codes, 0, code_bytes(n, 4));
    for (size_t i = 0; i < n; ++i) {
      const float q = std::clamp(std::nearbyint((v[i] - min) * inverse), 0.0f, top);
      const auto code = static_cast<uint8_t>(q);
      if (c.bits == 8) {
        codes[i] = code;
      } else {
        codes[i / 2] |= static_cast<uint8_t>(code << (4 * (i % 2)));
      }
    }
    out += kGroupHeader + code_bytes(n, c.bits);
  }
}

void dequantize(const uint8_t* in, size_t count, const Compression& c, float* out) {
  decode<false>(in, count, c, out);
}

void dequantize_add(const uint8_t* in, size_t count, const Compression& c, float* out) {
  decode<true>(in, count, c, out);
}

float quantization_error_bound(const float* values, size_t count, size_t i, const Compression& c) {
  const size_t first = i / c.group_size * c.group_size;
  float min, scale;
  group_range(values + first, std::min(c.group_size, count - first), c, min, scale);
  return scale / 2;
}

}  // namespace spray::coll
