// Closing every PDC before the engine goes away (an endpoint's fi_close).
//
// Nothing else tells peers that an engine is gone. A peer then keeps its PDCs to us:
// the slots stay taken in its table, and when it closes one (to make room, or when
// asked) its CLOSE goes unanswered until its retries run out, seconds later. With
// two-PDC tables that stalled ranks of a 4-rank job for 3-6 s each time a rank that had
// finished first went away (tests/collectives/small_pdc_tables.sh under ASan: the rank
// waited, its one PDC of its own in CLOSING to the rank that had exited, to open one to
// a live rank).
//
// So an engine closes its PDCs first, as a TCP socket sends its FIN: ours with CTRL
// CLOSE, the peers' by asking with CTRL CLOSE_REQ, which their initiators honour once
// the PDC is idle there too (pds_rx.cc). Running the engine meanwhile also sends what
// is still owed: coalesced ACKs, which the peers' sends wait for, and answers.
// Slow path: runs only while an endpoint closes.
#include "transport/pds/pds.h"

namespace spray::pds {

uint32_t Pds::close_all(Time now) {
  now_ = now;
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i) || !reclaimable(pdcs_[i])) continue;  // busy, opening or closing
    const Pdc& p = pdcs_[i];
    if (p.initiator) {
      begin_close(i);
    } else if (p.close_asked.ps == 0 || now - p.close_asked >= cfg_.initial_rto) {
      ask_initiator_to_close(i, now);
    }
  }
  return pdcs_.used();
}

}  // namespace spray::pds
