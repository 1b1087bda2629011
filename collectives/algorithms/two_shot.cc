// Two-shot all-reduce: a reduce-scatter in which every rank sends block q of its buffer
// straight to rank q, then an all-gather in which every rank sends its reduced block
// straight to every other rank. Each rank sends 2(P - 1)/P of the buffer, as in the ring
// and Rabenseifner, but in two rounds of P - 1 concurrent messages instead of 2(P - 1)
// or 2 log2(P) rounds one after another.
//
// Whether fewer rounds make it faster where ranks share cores, only a measurement tells:
// a round ends only when all P - 1 peers have run, where a Rabenseifner step needs one
// partner. With 4 ranks on this 2-core machine over spray it lost to Rabenseifner from
// 4 KiB to 1 MiB on 2026-11-22 (1 MiB: 0.96-1.21 ms against 0.78-0.87) and won at every
// size from 64 KiB on 2026-11-28 (1 MiB: 0.61 ms against 0.92; 64 MiB: 62 ms against 92),
// until Rabenseifner's slow copies were found the same evening (scratch_buffer.h): then
// calibration timed Rabenseifner faster at 1 MiB again (536 against 656 us) and two-shot
// at 16 MiB (17.9 against 19.3 ms). So the tuner chooses it only where calibration timed
// it (tuner.h, MeasuredTimes); its formula, the ring's, is a stand-in.
//
// Block r is reduced on rank r alone, in a fixed order (its own values first, then
// ranks r - 1, r - 2, ...), so every rank ends with the same bits and reruns give the
// same result whatever order the messages arrived in.
//
// Out of place, the reduce-scatter reads the caller's send buffer and writes block r's
// reduction into the receive buffer, so the buffer is never copied as a whole first.
// In place, the reduce-scatter's sends read blocks that the all-gather then overwrites,
// so they are waited for before the all-gather's receives are posted; out of place, at
// the end.
#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {

void two_shot_all_reduce(Communicator& c, const void* send, void* recv, size_t count, DataType type,
                         ReduceOp op) {
  const int p = c.size(), r = c.rank();
  const size_t es = size_of(type);
  auto* buf = static_cast<uint8_t*>(recv);
  const auto* own = static_cast<const uint8_t*>(send);
  if (p == 1) return single_rank_all_reduce(send, recv, count * es);
  const std::vector<size_t> blocks = equal_blocks(count, p);
  // Block b's first element (block numbers, like ranks, are ints here).
  auto block_start = [&](int b) { return blocks[static_cast<size_t>(b)]; };
  auto block_bytes = [&](int q) { return (block_start(q + 1) - block_start(q)) * es; };
  const size_t mine = block_bytes(r);
  // Peer q's copy of block r lands at incoming + slot(q) * mine.
  auto slot = [&](int q) { return static_cast<size_t>(q < r ? q : q - 1); };
  uint8_t* incoming = c.scratch(0, static_cast<size_t>(p - 1) * mine);

  // Reduce-scatter: receives first, so what arrives lands in place.
  std::vector<Request> receives, sends;
  std::vector<size_t> first_receive(static_cast<size_t>(p), 0);  // per peer, into receives
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    first_receive[static_cast<size_t>(q)] = receives.size();
    post_recv_pieces(c, q, incoming + slot(q) * mine, mine, 1, receives);
  }
  for (int k = 1; k < p; ++k) {  // r + 1 first: rank q hears from q - 1 first, and so on
    const int q = (r + k) % p;
    bound_deferred_sends(c, sends);
    post_send_pieces(c, q, own + block_start(q) * es, block_bytes(q), 1, sends);
  }
  // Reduce piece by piece, peer by peer, each as soon as it is in. The order is fixed,
  // r - 1, r - 2, ..., r + 1: the order in which the peers send to this rank.
  uint8_t* target = buf + block_start(r) * es;
  const uint8_t* first = own + block_start(r) * es;  // the running sum's first operand
  const size_t pieces = piece_count(mine), piece_elems = piece_bytes(mine) / es;
  const size_t elems = block_start(r + 1) - block_start(r);
  for (int k = 1; k < p; ++k) {
    const int q = (r - k + p) % p;
    const uint8_t* from = incoming + slot(q) * mine;
    for (size_t piece = 0; piece < pieces; ++piece) {
      c.link().wait(receives[first_receive[static_cast<size_t>(q)] + piece], c.deadline());
      const size_t at = std::min(elems, piece * piece_elems);
      const size_t n = std::min(piece_elems, elems - at);
      reduce_into(target + at * es, first + at * es, from + at * es, n, type, op);
    }
    first = target;
  }
  // In place, the all-gather receives into the blocks these sends read: wait for them.
  // Out of place they read the caller's send buffer, so their acknowledgements are
  // waited for at the end, off the critical path.
  if (own == buf) {
    c.link().wait_all(sends, c.deadline());
    sends.clear();
  }
  receives.clear();

  // All-gather: every rank's reduced block to every other rank.
  for (int q = 0; q < p; ++q) {
    if (q != r) post_recv_pieces(c, q, buf + block_start(q) * es, block_bytes(q), 2, receives);
  }
  for (int k = 1; k < p; ++k) {
    bound_deferred_sends(c, sends);
    post_send_pieces(c, (r + k) % p, target, mine, 2, sends);
  }
  c.link().wait_all(receives, c.deadline());
  c.link().wait_all(sends, c.deadline());
}

}  // namespace spray::coll::algo
