// A peer that restarted at the same address: PDS's half of Ses's incarnations
// (transport/ses/ses_incarnation.cc tells a restart; the engine calls forget_peer).
//
// Every PDC with the peer belongs to its old incarnation, whichever end opened it: the
// new one knows none of them and would NACK them INVALID_DPDCID one by one, each NACK
// taken for a live peer that forgot one PDC (pds_orphan.cc reopens such a PDC and sends
// its packets again, which the new incarnation must not get). And what PDS remembers
// of the old incarnation must not hold the new one back: its SYNs reuse the PDC ids its
// predecessor's did (both count from 1), which closed_syn_ would refuse as late copies
// of closed PDCs, and a lost-answers notice would refuse them with INVALID_SYN.
//
// A restart seen late (fail_our_pdcs_with) is narrower: we learned the new incarnation
// from its own first request, so the PDCs it opened to us and its order are already
// its, and only what we opened to its predecessor is stale.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

void Pds::forget_peer(PeerIndex peer, Time now) {
  now_ = now;
  // Messages waiting for a PDC to it: sends whose ids are in the old incarnation's order,
  // answers to requests of the old incarnation. First, so that a PDC freed below cannot
  // open a new one for them (free_pdc opens PDCs for waiting runs).
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->peer != peer) {
      ++it;
      continue;
    }
    for (TxRun* r = it->head; r != nullptr;) {
      TxRun* following = r->next;
      r->next = nullptr;
      failed_.push_back({r->message, Status::kPeerUnreachable});
      r = following;
    }
    it = waiting_.erase(it);
  }
  if (waiting_.empty()) timers_.cancel(wait_timer_);
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i) || pdcs_[i].peer != peer) continue;
    ++stats_.pdcs_of_restarted_peers;
    (void)fail_messages_on(pdcs_[i], Status::kPeerUnreachable);
    // Its receive state, for what the new incarnation sends on it yet: a PDC of ours it
    // took the SYN of (the restart was seen after) asks, and hears what became of each
    // packet (pds_orphan.cc) rather than put its messages in doubt. Only ours: a PDC id
    // of ours names one engine's PDC, where the old incarnation's ids may be the new one's.
    if (pdcs_[i].initiator) remember_failed_pdc(pdcs_[i]);
    free_pdc(i);
  }
  failed_peers_.push_back(peer);  // what waits on the old incarnation fails in SES
  std::erase_if(lost_answers_, [peer](const LostAnswers& l) { return l.peer == peer; });
  for (uint64_t& key : closed_ring_) {
    if ((key & ~uint64_t{0xffff}) == syn_key(peer, 0)) {  // a PDC id of this peer's
      closed_syn_.erase(key);
      key = 0;
    }
  }
}

void Pds::fail_our_pdcs_with(PeerIndex peer, Time now) {
  now_ = now;
  // Sends waiting for a PDC to it carry ids of the predecessor's order; answers to it
  // answer the new incarnation's requests and keep waiting, in their order.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->peer != peer) {
      ++it;
      continue;
    }
    (void)fail_waiting_sends(*it, Status::kPeerUnreachable);
    it = it->head == nullptr ? waiting_.erase(it) : it + 1;
  }
  if (waiting_.empty()) timers_.cancel(wait_timer_);
  // The new incarnation would NACK each of these INVALID_DPDCID: fail them so now.
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i) || pdcs_[i].peer != peer || !pdcs_[i].initiator) continue;
    ++stats_.pdcs_of_restarted_peers;
    fail_pdc(i, {.why = PdcFailure::kUnknownAtPeer, .nack = wire::NackCode::kInvalidDpdcid}, now);
  }
  // What waits on answers from the predecessor fails, as when it is forgotten whole.
  failed_peers_.push_back(peer);
}

}  // namespace spray::pds
