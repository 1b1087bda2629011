// Ring reduce-scatter, all-gather and all-reduce (Patarasuk & Yuan's bandwidth-optimal
// ring): P - 1 steps each; in step s a rank sends one block to its right neighbour and
// receives another from its left. Each block travels in pieces, and the receiver reduces
// piece k while piece k + 1 is still arriving.
//
// Steps wait for their receives only. A block once sent is never written again within
// the phase (reduce-scatter reduces into the next block down, all-gather receives into
// blocks it has not sent), so sends are waited for once, when the phase ends: a send
// completes when the peer acknowledges it, and waiting for that each step would add the
// peer's acknowledgement (and its turn on a CPU) to every step.
#include <cstring>

#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {

std::vector<size_t> equal_blocks(size_t total, int parts) {
  std::vector<size_t> offsets(static_cast<size_t>(parts) + 1);
  const size_t base = total / static_cast<size_t>(parts);
  const size_t extra = total % static_cast<size_t>(parts);
  for (size_t b = 0; b < static_cast<size_t>(parts); ++b) {
    offsets[b + 1] = offsets[b] + base + (b < extra ? 1 : 0);
  }
  return offsets;
}

std::vector<size_t> fixed_blocks(size_t per_block, int parts) {
  std::vector<size_t> offsets(static_cast<size_t>(parts) + 1);
  for (size_t b = 0; b < static_cast<size_t>(parts); ++b) offsets[b + 1] = offsets[b] + per_block;
  return offsets;
}

namespace {
size_t wrap(int b, int p) {
  return static_cast<size_t>(((b % p) + p) % p);
}
}  // namespace

void ring_reduce_scatter(Communicator& c, void* data, std::span<const size_t> blocks, DataType type,
                         ReduceOp op, uint32_t first_step) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  const size_t es = size_of(type);
  auto* bytes = static_cast<uint8_t*>(data);
  size_t largest = 0;
  for (size_t b = 0; b < static_cast<size_t>(p); ++b) {
    largest = std::max(largest, blocks[b + 1] - blocks[b]);
  }
  uint8_t* incoming = c.scratch(0, largest * es);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  std::vector<Request> recvs, sends;
  for (int s = 0; s < p - 1; ++s) {
    bound_deferred_sends(c, sends);
    // After step s, block r - s - 2 holds s + 2 contributions; the last step ends on r.
    const size_t send_b = wrap(r - s - 1, p), recv_b = wrap(r - s - 2, p);
    const size_t recv_count = blocks[recv_b + 1] - blocks[recv_b];
    const size_t send_bytes = (blocks[send_b + 1] - blocks[send_b]) * es;
    recvs.clear();
    const auto step = first_step + static_cast<uint32_t>(s);
    post_recv_pieces(c, left, incoming, recv_count * es, step, recvs);
    post_send_pieces(c, right, bytes + blocks[send_b] * es, send_bytes, step, sends);
    const size_t piece_elems = piece_bytes(recv_count * es) / es;
    uint8_t* target = bytes + blocks[recv_b] * es;
    for (size_t k = 0; k < recvs.size(); ++k) {
      c.link().wait(recvs[k], c.deadline());
      const size_t first = k * piece_elems;
      const size_t n = std::min(piece_elems, recv_count - std::min(recv_count, first));
      reduce(target + first * es, incoming + first * es, n, type, op);
    }
  }
  c.link().wait_all(sends, c.deadline());
}

void ring_all_gather(Communicator& c, void* data, std::span<const size_t> blocks, size_t elem_bytes,
                     uint32_t first_step) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  auto* bytes = static_cast<uint8_t*>(data);
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  std::vector<Request> recvs, sends;
  for (int s = 0; s < p - 1; ++s) {
    const size_t send_b = wrap(r - s, p), recv_b = wrap(r - s - 1, p);
    bound_deferred_sends(c, sends);
    recvs.clear();
    const auto step = first_step + static_cast<uint32_t>(s);
    post_recv_pieces(c, left, bytes + blocks[recv_b] * elem_bytes,
                     (blocks[recv_b + 1] - blocks[recv_b]) * elem_bytes, step, recvs);
    post_send_pieces(c, right, bytes + blocks[send_b] * elem_bytes,
                     (blocks[send_b + 1] - blocks[send_b]) * elem_bytes, step, sends);
    c.link().wait_all(recvs, c.deadline());
  }
  c.link().wait_all(sends, c.deadline());
}

void ring_all_reduce(Communicator& c, void* data, size_t count, DataType type, ReduceOp op) {
  const std::vector<size_t> blocks = equal_blocks(count, c.size());
  ring_reduce_scatter(c, data, blocks, type, op, 0);
  ring_all_gather(c, data, blocks, size_of(type), static_cast<uint32_t>(c.size()));
}

}  // namespace spray::coll::algo
