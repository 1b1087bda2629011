// Bruck's all-to-all (Bruck et al., 1997): ceil(log2 P) steps instead of P - 1, each
// moving about half of all blocks, so small blocks pay far fewer latencies than the
// pairwise exchange at the price of sending every block log2(P)/2 times. Uniform block
// sizes only.
//
// 1. Rotate: slot i holds the block for rank r + i.
// 2. For k = 1, 2, 4, ...: send every slot with bit k set to rank r + k, and take the
//    same slots from rank r - k. A block in slot i moves i ranks in all, staying in slot i.
// 3. Now slot i holds the block from rank r - i to this rank.

#include "collectives/algorithms/pieces.h"
#include "transport/base/copy_bytes.h"  // a memory helper: no transport in it

namespace spray::coll::algo {

void bruck_all_to_all(Communicator& c, const uint8_t* send, uint8_t* recv, size_t block_bytes) {
  const int p = c.size(), r = c.rank();
  const auto up = static_cast<size_t>(p);
  if (block_bytes == 0) return;  // every rank sees the same count: nothing to move
  uint8_t* slots = c.scratch(0, up * block_bytes);
  for (size_t i = 0; i < up; ++i) {
    const size_t dest = (static_cast<size_t>(r) + i) % up;
    copy_bytes(slots + i * block_bytes, send + dest * block_bytes, block_bytes);
  }
  const size_t half_bytes = (up / 2 + 1) * block_bytes;
  uint8_t* outgoing = c.scratch(1, half_bytes);
  uint8_t* incoming = c.scratch(2, half_bytes);
  std::vector<Request> requests;
  uint32_t step = 0;
  for (int k = 1; k < p; k <<= 1, ++step) {
    size_t packed = 0;
    for (size_t i = 0; i < up; ++i) {
      if (i & static_cast<size_t>(k)) {
        copy_bytes(outgoing + packed, slots + i * block_bytes, block_bytes);
        packed += block_bytes;
      }
    }
    requests.clear();
    post_recv_pieces(c, (r - k + p) % p, incoming, packed, step, requests);
    post_send_pieces(c, (r + k) % p, outgoing, packed, step, requests);
    c.link().wait_all(requests, c.deadline());
    size_t unpacked = 0;
    for (size_t i = 0; i < up; ++i) {
      if (i & static_cast<size_t>(k)) {
        copy_bytes(slots + i * block_bytes, incoming + unpacked, block_bytes);
        unpacked += block_bytes;
      }
    }
  }
  for (size_t i = 0; i < up; ++i) {
    const size_t source = (static_cast<size_t>(r) + up - i) % up;
    copy_bytes(recv + source * block_bytes, slots + i * block_bytes, block_bytes);
  }
}

}  // namespace spray::coll::algo
