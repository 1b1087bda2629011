// Cutting one transfer into pieces (see kPieceBytes) and tagging each: the tag's step
// field holds (step << 12 | piece), so a step may carry up to 4096 pieces and a call up
// to 4096 steps.
#pragma once

#include <algorithm>
#include <vector>

#include "collectives/algorithms/algorithms.h"

namespace spray::coll::algo {

inline constexpr uint32_t kMaxPieces = 4096;
inline constexpr uint32_t kMaxSteps = 4096;

// Bytes per piece for a transfer of `bytes` cut into pieces of `preferred` bytes (a
// multiple of 8): `preferred`, or more if that would need more than kMaxPieces pieces;
// always a multiple of 8, so no element (at most 8 bytes) straddles two pieces. Both sides
// compute the same from the same size and preference.
inline size_t piece_bytes(size_t bytes, size_t preferred = kPieceBytes) {
  const size_t spread = (bytes + kMaxPieces - 1) / kMaxPieces;
  return std::max(preferred, (spread + 7) / 8 * 8);
}
inline size_t piece_count(size_t bytes, size_t preferred = kPieceBytes) {
  const size_t piece = piece_bytes(bytes, preferred);
  return bytes == 0 ? 1 : (bytes + piece - 1) / piece;  // 0 B: one empty
}

inline uint32_t piece_step(uint32_t step, size_t piece) {
  if (step >= kMaxSteps) throw CollectiveError("collective needs more than 4096 steps");
  return step << 12 | static_cast<uint32_t>(piece);
}

// Sends a step has not waited for. Waiting for them only when their buffer is written
// again keeps the peers' acknowledgements off each step's critical path, but every
// request holds one of FabricLink's slots: past kMaxDeferredSends (huge buffers, many
// pieces per step) they are waited for at once.
inline constexpr size_t kMaxDeferredSends = 1024;
inline void bound_deferred_sends(Communicator& c, std::vector<Request>& sends) {
  if (sends.size() < kMaxDeferredSends) return;
  c.link().wait_all(sends, c.deadline());
  sends.clear();
}

// Posts the pieces of one transfer to / from `peer`, appending their requests. Sender and
// receiver must cut with the same `preferred` piece size.
inline void post_send_pieces(Communicator& c, int peer, const uint8_t* data, size_t bytes,
                             uint32_t step, std::vector<Request>& out,
                             size_t preferred = kPieceBytes) {
  const size_t piece = piece_bytes(bytes, preferred);
  for (size_t i = 0, n = piece_count(bytes, preferred); i < n; ++i) {
    const size_t off = std::min(bytes, i * piece);
    out.push_back(c.link().isend(peer, data + off, std::min(piece, bytes - off),
                                 c.tag(c.rank(), piece_step(step, i))));
  }
}
inline void post_recv_pieces(Communicator& c, int peer, uint8_t* data, size_t bytes, uint32_t step,
                             std::vector<Request>& out, size_t preferred = kPieceBytes) {
  const size_t piece = piece_bytes(bytes, preferred);
  for (size_t i = 0, n = piece_count(bytes, preferred); i < n; ++i) {
    const size_t off = std::min(bytes, i * piece);
    out.push_back(c.link().irecv(peer, data + off, std::min(piece, bytes - off),
                                 c.tag(peer, piece_step(step, i))));
  }
}

}  // namespace spray::coll::algo
