// Element-wise reduction kernels: dst[i] = dst[i] OP src[i] (or a[i] OP b[i]) for `count`
// elements.
//
// Native types (f32, f64, integers) run in loops the compiler vectorises, compiled three
// times (AVX-512, AVX2, portable) and chosen once at start-up from the CPU's features.
// f16 and bf16 are widened to f32 for each operation and rounded back to nearest-even, so
// each pairwise step is exact to the type's precision. Integer arithmetic wraps (two's
// complement), like MPI's and NCCL's. avg reduces as a sum; finish_average divides by the
// number of contributions at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectives/datatype.h"

namespace spray::coll {

// kAvg is reduced as kSum. Buffers may not overlap partially (dst == src is allowed).
void reduce(void* dst, const void* src, size_t count, DataType type, ReduceOp op);
// dst[i] = a[i] OP b[i]: a reduction that also moves the result (dst may be a or b; no
// partial overlaps).
void reduce_into(void* dst, const void* a, const void* b, size_t count, DataType type, ReduceOp op);

// Divides every element by `contributors` (the last step of an average).
void finish_average(void* data, size_t count, DataType type, int contributors);

// Which kernel variant reduce() uses on this CPU: "avx512", "avx2" or "portable".
std::string_view kernel_isa();

// IEEE half and bfloat16 conversions (round to nearest, ties to even; NaN preserved).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace spray::coll
