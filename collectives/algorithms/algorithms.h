// The collective algorithms, one per file. Each works for any number of ranks and any
// count (including 0), in place on the buffers it is given; Communicator validates
// arguments and does the copies in and out.
//
// Large transfers are cut into pieces of at most kPieceBytes, so a receiver reduces or
// forwards one piece while the next is still on the wire. The pairwise and spread-out
// all-to-all, which reduce and forward nothing, cut them into kAllToAllPieceBytes
// (spread_out_all_to_all.cc); Bruck's, which forwards, keeps kPieceBytes.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "collectives/communicator.h"

namespace spray::coll::algo {

inline constexpr size_t kPieceBytes = 512 * 1024;
inline constexpr size_t kAllToAllPieceBytes = 4 * 1024 * 1024;

// Block boundaries (in elements) of a ring over `parts` blocks: block b is
// [offsets[b], offsets[b + 1]).
std::vector<size_t> equal_blocks(size_t total, int parts);
std::vector<size_t> fixed_blocks(size_t per_block, int parts);

// Ring reduce-scatter over `data` (all blocks): afterwards block rank() holds the
// reduction of every rank's block rank(). Other blocks hold partial results.
void ring_reduce_scatter(Communicator& c, void* data, std::span<const size_t> blocks, DataType type,
                         ReduceOp op, uint32_t first_step);
// Ring all-gather: block rank() of `data` is this rank's; afterwards every block is.
void ring_all_gather(Communicator& c, void* data, std::span<const size_t> blocks, size_t elem_bytes,
                     uint32_t first_step);
// The two above back to back (all-reduce in place).
void ring_all_reduce(Communicator& c, void* data, size_t count, DataType type, ReduceOp op);
// log2(P) whole-buffer exchanges (non-powers of two fold the extra ranks first).
void recursive_doubling_all_reduce(Communicator& c, void* data, size_t count, DataType type,
                                   ReduceOp op);

void binomial_broadcast(Communicator& c, void* data, size_t bytes, int root);
// In place: `data` at root ends as the reduction; other ranks' data is clobbered.
void binomial_reduce(Communicator& c, void* data, size_t count, DataType type, ReduceOp op,
                     int root);
// The all-reduce of one rank, for the algorithms that read `send` themselves: the result
// is its own values.
inline void single_rank_all_reduce(const void* send, void* recv, size_t bytes) {
  if (send != recv && bytes > 0) std::memmove(recv, send, bytes);
}
// Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling.
// Reads `send` (which may be `recv`: in place) and leaves the result in `recv`.
void rabenseifner_all_reduce(Communicator& c, const void* send, void* recv, size_t count,
                             DataType type, ReduceOp op);
// Two-shot: reduce-scatter and all-gather, each one round of direct messages to every
// rank. Reads `send` (which may be `recv`: in place) and leaves the result in `recv`.
void two_shot_all_reduce(Communicator& c, const void* send, void* recv, size_t count, DataType type,
                         ReduceOp op);
// Two complementary binary trees, each reducing and broadcasting half of the buffer.
void double_binary_tree_all_reduce(Communicator& c, void* data, size_t count, DataType type,
                                   ReduceOp op);
// A rank's place in tree 0 or 1 of the double binary tree: ranks, -1 where none.
struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
};
TreeLinks double_binary_tree_links(int rank, int p, int tree);

// All-to-all(v), byte counts and displacements one per rank. Spread-out keeps up to
// `window` pairwise steps in flight; window 1 is the classic pairwise exchange.
void spread_out_all_to_all_v(Communicator& c, const uint8_t* send,
                             std::span<const size_t> send_bytes,
                             std::span<const size_t> send_offsets, uint8_t* recv,
                             std::span<const size_t> recv_bytes,
                             std::span<const size_t> recv_offsets, int window);
// Quantised all-reduce (sum over f32, f16 or bf16; the result in `recv`, which may be
// `send`), and the bytes all ranks together put on the wire for it.
void compressed_all_reduce(Communicator& c, const void* send, void* recv, size_t count,
                           DataType type, const Compression& z);
size_t compressed_all_reduce_wire_bytes(size_t count, int ranks, const Compression& z);
// Bruck: log2(P) steps; every block `block_bytes` long.
void bruck_all_to_all(Communicator& c, const uint8_t* send, uint8_t* recv, size_t block_bytes);
void dissemination_barrier(Communicator& c);

}  // namespace spray::coll::algo
