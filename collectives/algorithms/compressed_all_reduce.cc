// Compressed all-reduce (Flash Communication's scheme): the buffer is cut into one block
// per rank; every rank quantises the blocks of the others and sends them in an
// all-to-all (the reduce-scatter of quantised chunks); the owner of a block decodes the
// P - 1 contributions, sums them with its own exact values in f32, quantises the sum
// once more, and a ring all-gather spreads the quantised sums. Every rank, the owner
// included, decodes the same quantised sums, so all ranks hold the same bits.
//
// Error bound for an element (with s(x) = scale of x's group = range / (2^bits - 1)):
//   |result - exact| <= sum over other ranks i of s(input_i) / 2  +  s(partial sum) / 2
// plus f32 and output-type rounding. Wire bytes: 2 (P - 1) times the quantised size of
// the buffer in all, against 2 (P - 1) times its full size for the ring all-reduce.
#include <cstring>

#include "collectives/algorithms/pieces.h"
#include "collectives/quantize.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {
namespace {

void to_f32(const void* in, DataType t, size_t n, float* out) {
  if (n == 0) return;
  if (t == DataType::kF32) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  const auto* h = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i)
    out[i] = t == DataType::kF16 ? half_to_float(h[i]) : bf16_to_float(h[i]);
}

void from_f32(const float* in, size_t n, DataType t, void* out) {
  if (n == 0) return;
  if (t == DataType::kF32) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  auto* h = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < n; ++i)
    h[i] = t == DataType::kF16 ? float_to_half(in[i]) : float_to_bf16(in[i]);
}

// Byte offsets of the quantised blocks laid end to end.
std::vector<size_t> quantized_offsets(std::span<const size_t> blocks, const Compression& z) {
  std::vector<size_t> offsets(blocks.size());
  for (size_t b = 0; b + 1 < blocks.size(); ++b) {
    offsets[b + 1] = offsets[b] + quantized_bytes(blocks[b + 1] - blocks[b], z);
  }
  return offsets;
}

}  // namespace

size_t compressed_all_reduce_wire_bytes(size_t count, int ranks, const Compression& z) {
  const std::vector<size_t> q = quantized_offsets(equal_blocks(count, ranks), z);
  return 2 * static_cast<size_t>(ranks - 1) * q.back();
}

void compressed_all_reduce(Communicator& c, const void* send, void* recv, size_t count,
                           DataType type, const Compression& z) {
  const int p = c.size(), r = c.rank();
  const auto me = static_cast<size_t>(r), up = static_cast<size_t>(p);
  auto* values = reinterpret_cast<float*>(c.scratch(1, count * sizeof(float)));
  to_f32(send, type, count, values);
  const std::vector<size_t> blocks = equal_blocks(count, p);
  const std::vector<size_t> q = quantized_offsets(blocks, z);
  const size_t mine = blocks[me + 1] - blocks[me], my_q = q[me + 1] - q[me];

  // Stage 1: each block, quantised, to its owner.
  uint8_t* outgoing = c.scratch(2, q.back());
  uint8_t* incoming = c.scratch(3, up * my_q);
  std::vector<size_t> send_bytes(up), recv_bytes(up, my_q), recv_offsets(up);
  for (size_t b = 0; b < up; ++b) {
    recv_offsets[b] = b * my_q;
    if (b == me) continue;
    send_bytes[b] = q[b + 1] - q[b];
    quantize(values + blocks[b], blocks[b + 1] - blocks[b], z, outgoing + q[b]);
  }
  send_bytes[me] = recv_bytes[me] = 0;
  spread_out_all_to_all_v(c, outgoing, send_bytes, std::span(q).first(up), incoming, recv_bytes,
                          recv_offsets, kSpreadOutWindow);

  // Stage 2: sum my block, quantise the sum, gather everyone's.
  float* sum = values + blocks[me];  // my exact values, then the others' decoded
  for (size_t i = 0; i < up; ++i) {
    if (i != me) dequantize_add(incoming + i * my_q, mine, z, sum);
  }
  uint8_t* gathered = c.scratch(0, q.back());
  quantize(sum, mine, z, gathered + q[me]);
  ring_all_gather(c, gathered, q, 1, static_cast<uint32_t>(p));
  for (size_t b = 0; b < up; ++b) {
    dequantize(gathered + q[b], blocks[b + 1] - blocks[b], z, values + blocks[b]);
  }
  from_f32(values, count, type, recv);
}

}  // namespace spray::coll::algo
