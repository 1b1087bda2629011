// Group-wise asymmetric quantisation for the compressed all-reduce (in the style of
// Flash Communication, Li et al. 2024): values are cut into groups of `group_size`;
// each group is stored as its minimum and its step (scale) as two f32, followed by one
// code per value, code = round((x - min) / scale) in [0, 2^bits - 1], packed (INT8: one
// byte each; INT4: two per byte, low nibble first).
//
// Error: a value decodes to within scale / 2 of what was encoded, where
// scale = (max - min) / (2^bits - 1) of its group (plus f32 rounding). A group whose
// values are all equal decodes exactly. Non-finite inputs are not supported.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spray::coll {

struct Compression {
  int bits = 8;            // 8 or 4
  size_t group_size = 64;  // values per group; at least 1
};

// Bytes of the encoding of `count` values.
size_t quantized_bytes(size_t count, const Compression& c);
// Encodes `count` values of `in` into `out` (quantized_bytes(count, c) bytes).
void quantize(const float* in, size_t count, const Compression& c, uint8_t* out);
// out[i] = decoded value i.
void dequantize(const uint8_t* in, size_t count, const Compression& c, float* out);
// out[i] += decoded value i.
void dequantize_add(const uint8_t* in, size_t count, const Compression& c, float* out);
// Largest decoding error of the group holding value i of `values` if they were encoded
// (scale / 2): for bounds in tests and tools.
float quantization_error_bound(const float* values, size_t count, size_t i, const Compression& c);

}  // namespace spray::coll
