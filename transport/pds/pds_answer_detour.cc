// Answers that must not wait behind requests the peer refused.
//
// One PDC to a peer carries both our requests (sends, writes, reads) and our answers to
// the peer's (responses, read data, rendezvous reads), in one PSN window. A target short
// of message slots refuses a request (NO_SES_MSG_AVAIL and the like) and keeps refusing
// it until a message of its own finishes; the refused PSN holds the window's left edge.
// When what that message waits for is one of our answers queued behind the refused PSN,
// neither side moves again: the chaos case tiny_tables (4 message slots, three hosts,
// seed 1042) stalled this way with 511 PSNs SACKed behind a refused read request.
//
// Answers then go on a PDC the peer opened to us, if it did (answers_by_peer_): the
// peer accepts packets there on its own PSN window, which our requests do not share.
// Only a PDC held by a refusal detours; sending every answer that way (tried in 0624b11)
// split each pair's traffic over two PDCs, each with its own congestion state, and 1 MiB
// collectives looked slower for it.
#include "transport/pds/pds.h"

namespace spray::pds {

std::optional<uint32_t> Pds::detour_for(uint32_t index) const {
  const Pdc& p = pdcs_[index];
  const auto other = answers_by_peer_.find(pdc_key(p.peer, p.mode));
  if (!other || *other == index || held_by_refusal(pdcs_[*other])) return std::nullopt;
  return *other;
}

uint32_t Pds::answer_pdc(uint32_t index) {
  if (!held_by_refusal(pdcs_[index])) return index;
  const auto other = detour_for(index);
  if (!other) return index;
  ++stats_.answer_detours;
  return *other;
}

void Pds::detour_answers(uint32_t index) {
  const auto other = detour_for(index);
  if (!other) return;
  Pdc& p = pdcs_[index];
  Pdc& q = pdcs_[*other];
  // Unlink the answer runs from p, in order, and append them to q. A run partly sent
  // goes on from its next packet: SES places packets by message and offset, not by PDC.
  bool moved = false;
  unlink_runs(p, [&](TxRun* r) {
    if (!r->answer) return false;
    (q.run_tail != nullptr ? q.run_tail->next : q.run_head) = r;
    q.run_tail = r;
    moved = true;
    ++stats_.answer_detours;
    return true;
  });
  if (moved) mark_ready(*other);
}

}  // namespace spray::pds
