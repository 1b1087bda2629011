// Binomial-tree broadcast and reduce: ceil(log2 P) rounds. Ranks are renumbered
// relative to the root (v = (rank - root) mod P); in broadcast, v receives from
// v - 2^k (its lowest set bit) and forwards to v + 2^j for every smaller j; reduce runs
// the same tree upwards. Pieces flow down (or up) the tree as they arrive.
#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {
namespace {

int real_rank(int v, int root, int p) {
  return (v + root) % p;
}

}  // namespace

void binomial_broadcast(Communicator& c, void* data, size_t bytes, int root) {
  const int p = c.size();
  if (p == 1) return;
  const int v = (c.rank() - root + p) % p;
  auto* buf = static_cast<uint8_t*>(data);
  int mask = 1;
  std::vector<Request> recvs;
  while (mask < p) {
    if (v & mask) {
      post_recv_pieces(c, real_rank(v - mask, root, p), buf, bytes, 0, recvs);
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < p) children.push_back(real_rank(v + mask, root, p));
  }
  // Forward each piece as soon as it is here (the root has them all from the start).
  const size_t piece = piece_bytes(bytes), n = piece_count(bytes);
  std::vector<Request> sends;
  for (size_t k = 0; k < n; ++k) {
    if (!recvs.empty()) c.link().wait(recvs[k], c.deadline());
    const size_t off = k * piece;
    const size_t len = std::min(piece, bytes - std::min(bytes, off));
    for (int child : children) {
      sends.push_back(c.link().isend(child, buf + off, len, c.tag(c.rank(), piece_step(0, k))));
    }
  }
  c.link().wait_all(sends, c.deadline());
}

void binomial_reduce(Communicator& c, void* data, size_t count, DataType type, ReduceOp op,
                     int root) {
  const int p = c.size();
  if (p == 1) return;
  const size_t es = size_of(type), bytes = count * es;
  const int v = (c.rank() - root + p) % p;
  auto* buf = static_cast<uint8_t*>(data);
  uint8_t* incoming = c.scratch(0, bytes);
  std::vector<Request> requests;
  const size_t piece_elems = piece_bytes(bytes) / es;
  for (int mask = 1; mask < p; mask <<= 1) {
    const auto step = static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    requests.clear();
    if (v & mask) {  // hand the partial result to the parent; done
      post_send_pieces(c, real_rank(v - mask, root, p), buf, bytes, step, requests);
      c.link().wait_all(requests, c.deadline());
      return;
    }
    if (v + mask >= p) continue;
    post_recv_pieces(c, real_rank(v + mask, root, p), incoming, bytes, step, requests);
    for (size_t k = 0; k < requests.size(); ++k) {
      c.link().wait(requests[k], c.deadline());
      const size_t first = k * piece_elems;
      const size_t n = std::min(piece_elems, count - std::min(count, first));
      reduce(buf + first * es, incoming + first * es, n, type, op);
    }
  }
}

}  // namespace spray::coll::algo
