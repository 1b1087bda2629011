// Recursive-doubling all-reduce: log2(P) exchange steps of the whole buffer, so small
// messages pay few latencies (the ring pays 2(P - 1)). For P not a power of two the
// first 2r ranks (r = P - 2^k) pair up first: each even one hands its data to its odd
// neighbour and sits out, then gets the result back at the end.
//
// No step waits for its own send. A send completes when the peer acknowledges it, so
// waiting for it at once would put the peer's acknowledgement (and, with more ranks than
// cores, the peer's turn on a CPU) on every step's critical path. Instead three buffers
// rotate: step k sends `current` and receives into `next`, then next = next OP current
// becomes current; a buffer sent at step k is received into again only at step k + 2,
// and its send is waited for just before that, by when the acknowledgement has long
// arrived.
#include <cstring>

#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {

void recursive_doubling_all_reduce(Communicator& c, void* data, size_t count, DataType type,
                                   ReduceOp op) {
  const int p = c.size(), r = c.rank();
  if (p == 1) return;
  const size_t es = size_of(type), bytes = count * es;
  auto* buf = static_cast<uint8_t*>(data);
  uint8_t* incoming = c.scratch(0, bytes);
  std::vector<Request> requests;
  int pow2 = 1;
  while (pow2 * 2 <= p) pow2 *= 2;
  const int extra = p - pow2;  // ranks [0, 2 * extra) fold in pairs
  uint32_t step = 0;

  // Fold: even ranks below 2 * extra give their data to r + 1 and wait for the result.
  if (r < 2 * extra) {
    requests.clear();
    if (r % 2 == 0) {
      post_send_pieces(c, r + 1, buf, bytes, step, requests);
      c.link().wait_all(requests, c.deadline());
      requests.clear();
      post_recv_pieces(c, r + 1, buf, bytes, kMaxSteps - 1, requests);  // the result
      c.link().wait_all(requests, c.deadline());
      return;
    }
    post_recv_pieces(c, r - 1, incoming, bytes, step, requests);
    c.link().wait_all(requests, c.deadline());
    reduce(buf, incoming, count, type, op);
  }
  ++step;
  // Ranks taking part: new rank v in [0, pow2).
  const int v = r < 2 * extra ? r / 2 : r - extra;
  auto real = [&](int w) { return w < extra ? 2 * w + 1 : w + extra; };
  uint8_t* const rotation[3] = {buf, incoming, c.scratch(2, bytes)};
  std::vector<Request> sends_from[3];  // sends still reading rotation[i]
  int current = 0;
  for (int mask = 1; mask < pow2; mask <<= 1, ++step) {
    const int partner = real(v ^ mask);
    const int next = (current + 1) % 3;
    c.link().wait_all(sends_from[next], c.deadline());  // sent two steps ago
    sends_from[next].clear();
    requests.clear();
    post_recv_pieces(c, partner, rotation[next], bytes, step, requests);
    post_send_pieces(c, partner, rotation[current], bytes, step, sends_from[current]);
    c.link().wait_all(requests, c.deadline());
    // Each partner computes theirs OP mine; every operator here is commutative in
    // IEEE and wrapping integer arithmetic, so the bits agree on every rank.
    reduce(rotation[next], rotation[current], count, type, op);
    current = next;
  }
  for (std::vector<Request>& sends : sends_from) c.link().wait_all(sends, c.deadline());
  if (current != 0 && bytes > 0) std::memcpy(buf, rotation[current], bytes);
  if (r < 2 * extra) {  // hand the result back to the folded partner
    requests.clear();
    post_send_pieces(c, r - 1, buf, bytes, kMaxSteps - 1, requests);
    c.link().wait_all(requests, c.deadline());
  }
}

}  // namespace spray::coll::algo
