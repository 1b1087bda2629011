// Dissemination barrier (Hensgen, Finkel & Manber): ceil(log2 P) rounds; in round k each
// rank signals rank + 2^k and waits for rank - 2^k. No rank leaves before every rank
// has entered, for any P.
#include "collectives/algorithms/pieces.h"

namespace spray::coll::algo {

void dissemination_barrier(Communicator& c) {
  const int p = c.size(), r = c.rank();
  std::vector<Request> requests;
  uint32_t round = 0;
  for (int k = 1; k < p; k <<= 1, ++round) {
    requests.clear();
    requests.push_back(c.link().irecv((r - k + p) % p, nullptr, 0, c.tag((r - k + p) % p, round)));
    requests.push_back(c.link().isend((r + k) % p, nullptr, 0, c.tag(r, round)));
    c.link().wait_all(requests, c.deadline());
  }
}

}  // namespace spray::coll::algo
