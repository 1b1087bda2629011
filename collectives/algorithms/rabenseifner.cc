// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather
// by recursive doubling. Each rank sends about 2(P - 1)/P of the buffer, like the ring,
// but in 2 log2(P) steps instead of 2(P - 1), so it wins at medium sizes and large P.
// For P not a power of two the first 2r ranks (r = P - 2^k) fold in pairs first, as in
// recursive doubling, and get the result back at the end.
//
// Blocks: the buffer is cut into 2^k blocks; at halving step `mask` (2^(k-1) down to 1)
// a rank keeps the lower half of its range when bit `mask` of its (folded) number is 0,
// so it ends owning block v. The all-gather retraces the same steps upwards. Every block
// is reduced on exactly one rank, so all ranks end with the same bits.
//
// Steps wait for their receives only (as in the ring; see ring.cc for why). Halving
// sends ranges this rank never writes again until the all-gather receives into them, so
// they are waited for before the all-gather; all-gather sends ranges it only reads, so
// they are waited for at the end.
//
// Where the data lives: this rank's partial results are in `work`, communicator scratch
// backed by huge pages (scratch_buffer.h), and every message is sent from there. The
// first step copies the half it sends out of the caller's buffer into work and reduces
// the half it keeps straight from the caller's buffer into work; the all-gather's last
// step receives straight into the caller's receive buffer while this rank copies its
// own half there. Why not work in the receive buffer, as this file did before: peers on
// this host read each message out of the sender's memory (process_vm_readv), which pins
// the source page by page, and reading from huge pages costs far less. With 4 ranks on
// 2 cores at 1 MiB (8 interleaved runs of 200 calls), this took 376/406 us (best/median)
// against 442/511 for the same algorithm working in the caller's buffers, for two extra
// copies of half the buffer. The last step's copies, from scratch into the caller's
// buffer, ran 3-5x slower than they should until scratch moved half a page into its page
// (scratch_buffer.h): 1 MiB, 4 ranks, medians of 6 interleaved runs, 1397 against 636 us.
#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"
#include "transport/base/copy_bytes.h"  // a memory helper: no transport in it

namespace spray::coll::algo {

void rabenseifner_all_reduce(Communicator& c, const void* send, void* recv, size_t count,
                             DataType type, ReduceOp op) {
  const int p = c.size(), r = c.rank();
  const size_t es = size_of(type);
  auto* buf = static_cast<uint8_t*>(recv);
  // What this rank's next step reads its own values from: the caller's send buffer until
  // the first reduction has written them into work.
  const auto* own = static_cast<const uint8_t*>(send);
  if (p == 1) return single_rank_all_reduce(send, recv, count * es);
  int pow2 = 1;
  while (pow2 * 2 <= p) pow2 *= 2;
  const int extra = p - pow2;
  uint8_t* incoming = c.scratch(0, count * es);
  uint8_t* work = c.scratch(1, count * es);  // this rank's partial results
  std::vector<Request> requests;

  if (r < 2 * extra) {  // fold: even ranks hand their data to r + 1 and wait for the result
    if (r % 2 == 0) {
      post_send_pieces(c, r + 1, own, count * es, 0, requests);
      c.link().wait_all(requests, c.deadline());
      requests.clear();
      post_recv_pieces(c, r + 1, buf, count * es, kMaxSteps - 1, requests);
      c.link().wait_all(requests, c.deadline());
      return;
    }
    post_recv_pieces(c, r - 1, incoming, count * es, 0, requests);
    c.link().wait_all(requests, c.deadline());
    reduce_into(work, own, incoming, count, type, op);
    own = work;
  }
  const int v = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int w) { return w < extra ? 2 * w + 1 : w + extra; };
  const std::vector<size_t> blocks = equal_blocks(count, pow2);
  // Block b's first element (block numbers, like ranks, are ints here).
  auto block_start = [&](int b) { return blocks[static_cast<size_t>(b)]; };
  uint32_t step = 1;

  // Reduce-scatter by recursive halving: [lo, hi) is the range of blocks this rank
  // still reduces.
  int lo = 0, hi = pow2;
  std::vector<Request> sends;
  for (int mask = pow2 / 2; mask >= 1; mask /= 2, ++step) {
    bound_deferred_sends(c, sends);
    const int mid = (lo + hi) / 2;
    const bool keep_low = (v & mask) == 0;
    const int keep_lo = keep_low ? lo : mid, keep_hi = keep_low ? mid : hi;
    const int send_lo = keep_low ? mid : lo, send_hi = keep_low ? hi : mid;
    const int partner = real(v ^ mask);
    const size_t keep_count = block_start(keep_hi) - block_start(keep_lo);
    requests.clear();
    post_recv_pieces(c, partner, incoming, keep_count * es, step, requests);
    const size_t receives = requests.size();
    const size_t send_bytes = (block_start(send_hi) - block_start(send_lo)) * es;
    if (own != work && send_bytes > 0) {
      // The first step sends from the caller's buffer: stage it in work's half that this
      // rank does not reduce into, and send from there (huge pages, see above).
      copy_bytes(work + block_start(send_lo) * es, own + block_start(send_lo) * es, send_bytes);
    }
    post_send_pieces(c, partner, work + block_start(send_lo) * es, send_bytes, step, sends);
    // Reduce each piece as it arrives, while later ones are still on the wire.
    const size_t piece_elems = piece_bytes(keep_count * es) / es;
    uint8_t* target = work + block_start(keep_lo) * es;
    const uint8_t* mine = own + block_start(keep_lo) * es;
    for (size_t k = 0; k < receives; ++k) {
      c.link().wait(requests[k], c.deadline());
      const size_t first = k * piece_elems;
      const size_t n = std::min(piece_elems, keep_count - std::min(keep_count, first));
      reduce_into(target + first * es, mine + first * es, incoming + first * es, n, type, op);
    }
    own = work;
    lo = keep_lo;
    hi = keep_hi;
  }

  c.link().wait_all(sends, c.deadline());
  sends.clear();

  // All-gather by recursive doubling: swap ranges with the partner and merge them, in
  // `work` until the last step, which fills the caller's buffer.
  for (int mask = 1; mask < pow2; mask *= 2, ++step) {
    bound_deferred_sends(c, sends);
    const int partner = real(v ^ mask);
    const bool partner_below = (v & mask) != 0;
    const bool last = mask * 2 == pow2;
    const int other_lo = partner_below ? lo - mask : hi, other_hi = other_lo + mask;
    const size_t held = (block_start(hi) - block_start(lo)) * es;
    requests.clear();
    post_recv_pieces(c, partner, (last ? buf : work) + block_start(other_lo) * es,
                     (block_start(other_hi) - block_start(other_lo)) * es, step, requests);
    post_send_pieces(c, partner, work + block_start(lo) * es, held, step, sends);
    // The sends only read work, so this copy may run while the partner reads them.
    if (last && held > 0) copy_bytes(buf + block_start(lo) * es, work + block_start(lo) * es, held);
    c.link().wait_all(requests, c.deadline());
    lo = std::min(lo, other_lo);
    hi = std::max(hi, other_hi);
  }
  c.link().wait_all(sends, c.deadline());

  if (r < 2 * extra) {  // hand the result back to the folded partner
    requests.clear();
    post_send_pieces(c, r - 1, buf, count * es, kMaxSteps - 1, requests);
    c.link().wait_all(requests, c.deadline());
  }
}

}  // namespace spray::coll::algo
