// Telling a peer that answers we owed it were given up.
//
// Answers (responses, read requests, read data: TxRun::answer) travel on a PDC between
// us and the peer, whichever of us opened it. When that PDC fails with an answer still
// unacknowledged, the peer has an operation waiting for it, and nothing but a failure
// of one of its PDCs to us ends that wait (Ses::on_peer_failed). Its liveness probes
// prove nothing while any PDC of ours answers them, so we answer nothing that would
// pass for proof, from the failure until lost_answers_notice() after we first refuse
// something of the peer's:
//   - the PDCs it opened to us are forgotten at once: its next packet on one is NACKed
//     INVALID_DPDCID;
//   - every SYN it sends is refused with INVALID_SYN, and a CLOSE for a PDC we no
//     longer know is NACKed INVALID_DPDCID rather than acknowledged as already closed;
//   - its probes (ACK_REQ) on a PDC we opened are NACKed INVALID_DPDCID, not ACKed.
// Each of those NACKs fails a PDC at its end; if all are lost, its retries run out
// within that time all the same. Either way it has failed a PDC, and its waiting
// operations with it, before we accept a new PDC from it.
// Found by sweeps of spray-transfer, each of which ran to its 60 s limit with sends
// waiting for responses:
//   - `--path-selection ecmp --path-down --seed 1052`: the peer's probes went on a PDC
//     we still held;
//   - `--all-to-all --max-pdcs 4 --path-selection bitmap --paths 2 --path-down --seed 9`:
//     the peer closed, for room, the PDC our answers were failing on; our stateless ACK
//     let its CLOSE finish, and the PDC its probes opened next was accepted;
//   - `--all-to-all --max-pdcs 5 --path-selection ecmp --paths 2 --path-down --seed 874`:
//     as the last, but with our NACK of the CLOSE lost on the dead path, and the SYN of
//     its next probe arriving before its CLOSE came again. (An earlier version stopped
//     refusing at the first NACK sent, or at a second SYN id.)
//   - `--all-to-all --max-pdcs 3 --path-selection bitmap --paths 2 --path-down --loss
//     0.05 --trim 0.01 --bytes 1048576 --messages 21 --seed 121` (4 hosts), once ACKs
//     returned on their request's EV: its probes went on a PDC we had opened to it,
//     and we ACKed them for the rest of the run.
//   - `--all-to-all --max-pdcs 2 --path-selection ecmp --paths 4 --path-down --reorder
//     0.21 --seed 2104` (10 hosts): the notice ran from the failure, and the peer, its
//     two-PDC table full, opened no PDC to us to probe on until it had passed. Its
//     first probe was then ACKed. The notice now runs from our first refusal; until
//     then the entry waits (one a peer, so a peer that never comes back costs 16 bytes).
// The cost: operations the peer starts toward us within that time fail too. Slow path:
// nothing here runs unless a PDC failed with answers aboard.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

void Pds::lost_answers_to(PeerIndex peer) {
  if (target_pdcs_of_peer_.find(peer)) {
    for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
      if (!pdcs_.in_use(i)) continue;
      Pdc& t = pdcs_[i];
      if (t.initiator || t.peer != peer) continue;
      ++stats_.pdcs_forgotten;
      (void)fail_messages_on(t, Status::kPeerUnreachable);  // what we sent on it too
      free_pdc(i);
    }
  }
  for (LostAnswers& l : lost_answers_) {
    if (l.peer == peer) {
      // Being told already: the rest of that notice tells it of these too. Starting it
      // over instead let two peers that refused each other's answer-laden PDCs keep
      // each other refused (ChaosFailures at 20 % loss: MSG_ERRs refused for 6 s).
      if (l.until <= now_) l.until = kNotToldYet;
      return;
    }
  }
  lost_answers_.push_back({peer, kNotToldYet});
}

bool Pds::still_telling(PeerIndex peer) {
  std::erase_if(lost_answers_, [&](const LostAnswers& l) { return l.until <= now_; });
  for (LostAnswers& l : lost_answers_) {
    if (l.peer != peer) continue;
    if (l.until == kNotToldYet) l.until = now_ + lost_answers_notice();
    return true;
  }
  return false;
}

}  // namespace spray::pds
