// Double binary tree all-reduce (Sanders, Speck & Träff; NCCL's tree algorithm): the
// buffer is split in two halves, each reduced up one binary tree to its root and
// broadcast back down, in pieces, so a piece travels up while the next is still
// arriving. The second tree is the first mirrored (even P) or shifted by one (odd P),
// which makes the leaves of one tree the inner nodes of the other: every rank sends and
// receives about the same amount in total, and the latency grows with log2(P) rather
// than P as in the ring.
//
// The first tree over nodes 0..P-1: node n > 0 with lowest set bit b has children
// n - b/2 and n + b/2 (the latter, if it is not below P, replaced by n + b/4, n + b/8,
// ...), so odd nodes are leaves; node 0 is the root with the single child 2^floor(log2
// (P-1)).
#include <bit>

#include "collectives/algorithms/pieces.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll::algo {
namespace {

// Node numbering of the tree and back.
int node_of(int rank, int p, int tree) {
  if (tree == 0) return rank;
  return p % 2 == 0 ? p - 1 - rank : (rank + p - 1) % p;
}
int rank_of(int node, int p, int tree) {
  if (tree == 0) return node;
  return p % 2 == 0 ? p - 1 - node : (node + 1) % p;
}

// Links of `node` in the first tree, in node numbers.
TreeLinks tree_links_of_node(int node, int p) {
  TreeLinks t;
  if (node == 0) {
    if (p > 1) t.children[0] = static_cast<int>(std::bit_floor(static_cast<unsigned>(p - 1)));
    return t;
  }
  const int bit = node & -node;
  const int up = (node ^ bit) | (bit << 1);
  t.parent = up < p ? up : node ^ bit;
  if (bit == 1) return t;          // odd: a leaf
  t.children[0] = node - bit / 2;  // always within [0, P)
  for (int half = bit / 2; half >= 1; half /= 2) {
    if (node + half < p) {
      t.children[1] = node + half;
      break;
    }
  }
  return t;
}

// Bytes per piece of a half of `half_bytes`: small enough that a tree of depth log2(P)
// pipelines, large enough that per-message costs stay small; at most 192 pieces, so the
// requests of both trees fit the link's pool.
size_t tree_piece_bytes(size_t half_bytes) {
  const size_t floor = 64 * 1024, spread = (half_bytes + 191) / 192;
  return (std::max({floor, spread, half_bytes / 16}) + 7) / 8 * 8;
}

}  // namespace

TreeLinks double_binary_tree_links(int rank, int p, int tree) {
  TreeLinks t = tree_links_of_node(node_of(rank, p, tree), p);
  if (t.parent >= 0) t.parent = rank_of(t.parent, p, tree);
  for (int& child : t.children) {
    if (child >= 0) child = rank_of(child, p, tree);
  }
  return t;
}

void double_binary_tree_all_reduce(Communicator& c, void* data, size_t count, DataType type,
                                   ReduceOp op) {
  const int p = c.size();
  if (p == 1) return;
  const size_t es = size_of(type);
  auto* buf = static_cast<uint8_t*>(data);
  // Tree t reduces elements [first[t], first[t + 1]).
  const size_t first[3] = {0, count / 2, count};
  const size_t piece_elems = tree_piece_bytes((count - count / 2) * es) / es;
  const size_t pieces = std::max<size_t>(1, (count - count / 2 + piece_elems - 1) / piece_elems);
  TreeLinks links[2];
  for (int t = 0; t < 2; ++t) links[t] = double_binary_tree_links(c.rank(), p, t);
  auto piece_range = [&](int t, size_t k) {  // elements [begin, end) of piece k of tree t
    const size_t begin = std::min(first[t + 1], first[t] + k * piece_elems);
    return std::pair{begin, std::min(first[t + 1], begin + piece_elems)};
  };
  // Tags: step t carries tree t upwards, step 2 + t downwards.
  auto up_step = [](int t, size_t k) { return piece_step(static_cast<uint32_t>(t), k); };
  auto down_step = [](int t, size_t k) { return piece_step(static_cast<uint32_t>(2 + t), k); };

  // Post every receive first: children's partial sums into scratch (one region per
  // child and tree), the parent's result straight into the buffer.
  const size_t region_bytes = (count - count / 2) * es;
  uint8_t* scratch = c.scratch(0, 4 * region_bytes);
  // Where element `e` of tree t from child i lands: one region per tree and child.
  auto from_child = [&](int t, int i, size_t e) {
    return scratch + static_cast<size_t>(2 * t + i) * region_bytes + (e - first[t]) * es;
  };
  std::vector<Request> up_recvs[2][2], down_recvs[2], sends;
  for (int t = 0; t < 2; ++t) {
    for (size_t k = 0; k < pieces; ++k) {
      const auto [b, e] = piece_range(t, k);
      for (int i = 0; i < 2; ++i) {
        const int child = links[t].children[i];
        if (child < 0) continue;
        up_recvs[t][i].push_back(
            c.link().irecv(child, from_child(t, i, b), (e - b) * es, c.tag(child, up_step(t, k))));
      }
      if (links[t].parent >= 0) {
        down_recvs[t].push_back(c.link().irecv(links[t].parent, buf + b * es, (e - b) * es,
                                               c.tag(links[t].parent, down_step(t, k))));
      }
    }
  }
  auto send_down = [&](int t, size_t k) {
    const auto [b, e] = piece_range(t, k);
    for (int child : links[t].children) {
      if (child >= 0) {
        sends.push_back(
            c.link().isend(child, buf + b * es, (e - b) * es, c.tag(c.rank(), down_step(t, k))));
      }
    }
  };
  // Up: reduce the children's piece into ours and pass it on; a root turns it around.
  for (size_t k = 0; k < pieces; ++k) {
    for (int t = 0; t < 2; ++t) {
      const auto [b, e] = piece_range(t, k);
      for (int i = 0; i < 2; ++i) {
        if (up_recvs[t][i].empty()) continue;
        c.link().wait(up_recvs[t][i][k], c.deadline());
        reduce(buf + b * es, from_child(t, i, b), e - b, type, op);
      }
      if (links[t].parent >= 0) {
        sends.push_back(c.link().isend(links[t].parent, buf + b * es, (e - b) * es,
                                       c.tag(c.rank(), up_step(t, k))));
      } else {
        send_down(t, k);
      }
    }
  }
  // Down: forward the result as it arrives.
  for (size_t k = 0; k < pieces; ++k) {
    for (int t = 0; t < 2; ++t) {
      if (down_recvs[t].empty()) continue;
      c.link().wait(down_recvs[t][k], c.deadline());
      send_down(t, k);
    }
  }
  c.link().wait_all(sends, c.deadline());
}

}  // namespace spray::coll::algo
