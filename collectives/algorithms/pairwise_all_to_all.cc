// Pairwise-exchange all-to-all(v): P - 1 steps; in step s rank r sends its block for
// r + s and receives the block of r - s, so every rank has one partner per step and no
// receiver is hit by all senders at once (the incast a naive all-to-all makes).
#include <cstring>

#include "collectives/algorithms/pieces.h"

namespace spray::coll::algo {

void pairwise_all_to_all_v(Communicator& c, const uint8_t* send, std::span<const size_t> send_bytes,
                           std::span<const size_t> send_offsets, uint8_t* recv,
                           std::span<const size_t> recv_bytes,
                           std::span<const size_t> recv_offsets) {
  const int p = c.size(), r = c.rank();
  const auto me = static_cast<size_t>(r);
  if (recv_bytes[me] != send_bytes[me]) {
    throw CollectiveError(
        "all_to_all_v: this rank sends itself a different count than it receives");
  }
  if (send_bytes[me] > 0)
    std::memmove(recv + recv_offsets[me], send + send_offsets[me], send_bytes[me]);
  std::vector<Request> requests;
  for (int s = 1; s < p; ++s) {
    const auto to = static_cast<size_t>((r + s) % p), from = static_cast<size_t>((r - s + p) % p);
    requests.clear();
    const auto step = static_cast<uint32_t>(s);
    post_recv_pieces(c, static_cast<int>(from), recv + recv_offsets[from], recv_bytes[from], step,
                     requests);
    post_send_pieces(c, static_cast<int>(to), send + send_offsets[to], send_bytes[to], step,
                     requests);
    c.link().wait_all(requests, c.deadline());
  }
}

}  // namespace spray::coll::algo
