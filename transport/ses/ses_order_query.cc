// What a receiver that waits on a sender's send order hears from the sender: which of
// its send ids have ended there. A repair for an order the two ends no longer agree on.
//
// A receiver matches a peer's sends in the order of their ids (send_seq_ there,
// expect_seq_ here) and holds those that arrive ahead of one missing. A missing id
// normally comes: it is in flight, or its sender fails it and sends a MSG_ERR, or the
// sender fails as a whole (ses_failed_sender.cc). One case is none of these: the sender
// has ended the id, OK, at an engine at our address that was not us. A new engine that
// takes a late copy of a sender's first request (which names no incarnation:
// ses_incarnation.cc) learns the sender from it, and then takes the sender's later
// requests, which say that an engine here acknowledged some of theirs, as meant for
// itself. The ids between went to its predecessor, and the sends behind them waited here
// for good while their sender had seen them delivered (restart_mid_flight_test seeds 2676
// and 4822, 2026-12-08).
//
// So the probe we send a peer we wait on (probe_peers) names the send id we wait for
// from it next. (That id never names a message here: one that arrives is admitted and
// the order moves past it.) The sender answers with a NO_OP of its own naming the id
// before which every send of its to us has ended (its oldest send still live, else its
// next id), when that is ahead of ours. Each of those ids ended at the sender: it was
// acknowledged by the engine that took it, which, had it been us, would have moved our
// order past it; or it failed, and its MSG_ERR is on the way or was taken by an earlier
// engine here. Nothing of them is still to come, so we pass over them as MSG_ERRs would
// (pass_over_ended_ids), and what waited behind them is matched.
//
// One exception, seen to by the engine: PDS acknowledges ROD packets it holds for order,
// or for want of SES room, before SES sees them, so the word is applied only while PDS
// holds nothing of that peer's (a later probe asks again). A stale answer (our order
// moved on after the probe left) finds its ids behind ours and changes nothing. An
// answer that reaches a successor of ours names our incarnation, and is refused as any
// request meant for a predecessor is.
#include <algorithm>

#include "transport/ses/ses.h"

namespace spray::ses {

RxResult Ses::on_no_op(PeerIndex peer, uint64_t word, Time now) {
  if (peer >= cfg_.max_peers) return RxResult::kAccepted;
  const auto id = static_cast<uint16_t>(word & 0x7fff);
  if ((word & kNoOpWaitsFor) != 0) answer_order_query(peer, id, now);
  if ((word & kNoOpEndedBefore) != 0) {
    // One word a peer is enough: a later one supersedes it.
    auto same = std::find_if(order_words_.begin(), order_words_.end(),
                             [peer](const auto& w) { return w.first == peer; });
    if (same != order_words_.end()) {
      same->second = id;
    } else {
      order_words_.emplace_back(peer, id);
    }
  }
  return RxResult::kAccepted;
}

void Ses::answer_order_query(PeerIndex peer, uint16_t waits_for, Time now) {
  if (answering_order_[peer]) return;  // the answer in flight says it (or the next will)
  const auto next = static_cast<uint16_t>(send_seq_[peer] & 0x7fff);
  // The oldest of our sends to the peer still live: the one farthest behind the next id.
  uint16_t live_behind = 0;
  for (uint32_t i = 0; i < tx_.capacity(); ++i) {
    if (!tx_.in_use(i)) continue;
    const TxMessage& m = tx_[i];
    if (m.peer != peer || !m.user_op ||
        (m.kind != TxKind::kEager && m.kind != TxKind::kRendezvous)) {
      continue;
    }
    live_behind = std::max(live_behind, static_cast<uint16_t>((next - m.msg_id) & 0x7fff));
  }
  const auto ended_before = static_cast<uint16_t>((next - live_behind) & 0x7fff);
  // How far that is ahead of what the peer waits for: 0 when it waits for a send still
  // live here, and half the id space or more when for one we have not sent.
  const auto ahead = static_cast<uint16_t>((ended_before - waits_for) & 0x7fff);
  if (ahead == 0 || ahead >= 0x4000 || !tx_room_for(1)) return;  // (the next probe asks again)
  if (start_no_op(TxKind::kOrderAnswer, peer, now, kNoOpEndedBefore | ended_before) ==
      Status::kOk) {
    answering_order_[peer] = 1;
    ++stats_.order_answers_sent;
  }
}

void Ses::pass_over_ended_ids(PeerIndex peer, uint16_t before, Time now) {
  now_ = now;
  // Each pass skips the next id expected, which never names a message here, and matches
  // what waited right behind it; the loop ends at `before`, or at once if our order has
  // already moved past it (a stale word).
  while (expect_seq_[peer] != before && !behind_order(peer, before)) {
    ++stats_.ended_ids_passed_over;
    (void)on_skip(peer, expect_seq_[peer]);
  }
}

}  // namespace spray::ses
