// A target PDC its initiator no longer knows.
//
// A PDC carries traffic both ways, so an engine sends its own messages on the PDC a peer
// opened to it when it has none of its own (by_peer_). If the peer then failed that PDC
// (its packets went unanswered) and forgot it, our next packet on it comes back NACKed
// INVALID_DPDCID. Failing the PDC then, as for a PDC of ours, failed our sends as "peer
// unreachable", though the peer is alive and just answered, and failed every operation
// waiting on the peer with them (failed_peers_). It happened after any PDC failure
// between live hosts: a write cut until it failed, then its target's send (README's
// Known limits until this change).
//
// Instead the PDC reopens as one of ours, in place, and what was in flight on it goes
// again. That is safe only for packets the peer never delivered, since SES places
// packets by message and offset and counts them: one delivered twice would corrupt its
// message. Each packet in flight is, by what the peer said of it:
//   - SACKed: the peer had it. RUD delivered it (and we reported it acknowledged); ROD
//     held it behind a gap (see below).
//   - NACKed by a peer that remembers the PDC (the other end, below): the NACK says
//     whether it was delivered (wire::ForgottenPsn), whichever copy it answers.
//   - NACKed by one that does not (it restarted, or its record was overwritten), and
//     sent only once: its only copy arrived after the peer had forgotten the PDC, so it
//     was not delivered. (A packet refused for room and not sent again was not either.)
//   - anything else (resent, or not answered yet): it may have arrived before the peer
//     forgot the PDC, with its ACK lost.
// So at the first such NACK the PDC stops sending and waits, up to one plain RTO, for
// the peer's word on the rest of its window (it NACKs each packet). A peer that
// remembers is then asked again about the packets it said nothing of (they or their
// NACKs were lost), up to kOrphanAsks times. Then the PDC reopens. A message with a
// packet still in doubt fails (kPeerUnreachable, as when a PDC fails; its MSG_ERR ends
// what the peer holds of it), and its packets go as no-ops; the others go on.
//
// For ROD, a SACKed packet was held behind a gap. If every packet before it is known
// not delivered, the gap was never filled and the peer dropped it with the PDC: it goes
// again whole. Behind a packet in doubt, the gap may have been filled, and it is in doubt
// too.
//
// The other end: a PDC of ours that fails leaves its receive state (FailedPdc: the last
// kFailedPdcsKept, about 100 bytes each at the default window), and a packet that comes
// on it afterwards is NACKed with what became of it (what_became_of). Without that, a
// lost packet put its message in doubt: with 5 % loss (OrphanPdcUnderFaults, 48 sends a
// mode) 5 sends failed over RUD and 9 over ROD; with it, none. Before orphans reopened
// at all, 48 and 12 failed.
//
// A restarted peer forgets its PDCs too, and also its SES state. What this reopening
// resends to it still names its predecessor's incarnation, so the new one refuses it
// and we learn of the restart (transport/ses/ses_incarnation.cc): those messages fail,
// as everything meant for the old incarnation does, rather than land out of its order.
#include <algorithm>
#include <utility>

#include "transport/pds/pds.h"

namespace spray::pds {

namespace {
// Whether the peer is known not to have delivered the packet in `s`.
bool never_delivered(const TxSlot& s) {
  return s.refused && !s.retransmitted && s.twin == kTwinNone;
}
}  // namespace

void Pds::on_orphan_nack(uint32_t index, TxSlot& s, uint32_t psn, wire::ForgottenPsn word,
                         Time now) {
  Pdc& p = pdcs_[index];
  if (!s.in_flight || s.sacked) return;  // a late NACK of a copy the peer had
  if (word != wire::ForgottenPsn::kNoWord) p.peer_remembers = true;
  if (word == wire::ForgottenPsn::kDelivered) {
    // As an ACK would have said: RUD delivered it alone, ROD with every PSN before it.
    if (p.mode == Mode::kRud) {
      ack_psn(p, psn, false, paths::Feedback::kDelivered, psn);
    } else {
      for (; psn_diff(psn, p.snd_una) >= 0; ++p.snd_una) {
        ack_psn(p, p.snd_una, true, paths::Feedback::kDelivered, psn);
      }
    }
  } else {
    if (word == wire::ForgottenPsn::kNeverDelivered) {
      s.retransmitted = false;  // no copy was delivered: as if it went once
      s.twin = kTwinNone;
    }
    if (!s.refused) {
      // Answered, and not in the network: out of the congestion window. Delivered or not
      // is never_delivered's call.
      s.refused = true;
      p.inflight_bytes -= std::min(p.inflight_bytes, s.bytes);
    }
  }
  if (!p.orphaned) {
    p.orphaned = true;
    arm_orphan_deadline(p, now);  // for the answers to the rest of the window
  }
  settle_orphan(index, now, false);
}

void Pds::arm_orphan_deadline(Pdc& p, Time now) {
  timers_.arm(p.rto_timer, now + p.rtt.rto(cfg_.initial_rto, cfg_.min_rto, cfg_.max_rto));
}

void Pds::settle_orphan(uint32_t index, Time now, bool deadline) {
  Pdc& p = pdcs_[index];
  const auto unanswered = [&](const TxSlot& s) { return s.in_flight && !s.sacked && !s.refused; };
  if (!deadline) {
    for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
      if (unanswered(p.tx[ring_index(psn)])) return;  // its answer may still come
    }
  } else if (p.peer_remembers && p.orphan_asks < kOrphanAsks) {
    // A peer that remembers the PDC answers a resend exactly too: ask again about the
    // packets (or NACKs) lost on the way, rather than put their messages in doubt.
    bool asked = false;
    for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
      if (!unanswered(p.tx[ring_index(psn)])) continue;
      queue_retransmit(p, psn);
      asked = true;
    }
    if (asked) {
      ++p.orphan_asks;
      arm_orphan_deadline(p, now);
      return;
    }
  }
  // The SYN form names at most kMaxSynPsnOffset PSNs past the start (a window above 4096
  // packets, not the default): such a PDC fails as before.
  if (static_cast<uint32_t>(p.snd_nxt - p.snd_una) > wire::kMaxSynPsnOffset) {
    fail_pdc(index, {.why = PdcFailure::kUnknownAtPeer, .nack = wire::NackCode::kInvalidDpdcid},
             now);
    return;
  }
  reopen_orphan(index, now);
}

// The peer sends nothing more on the old PDC, so its receive side starts over too; ROD
// packets of the peer's held here go back to the owner, as when a PDC is freed (the peer
// failed their messages when it failed the PDC). The congestion and path state carry
// over: the network between us is the same.
void Pds::reopen_orphan(uint32_t index, Time now) {
  Pdc& p = pdcs_[index];
  // The messages in doubt fail. Their runs still queued go (SES reuses a failed message's
  // run with its slot), and answers among them end wherever else they travel
  // (end_answers_elsewhere); the peer waits for those, so it is told (lost_answers_to).
  std::vector<uint32_t> doubtful;  // slow path: once per orphan
  bool behind_doubt = false;       // ROD: a PSN before this one may have been delivered
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    const TxSlot& s = p.tx[ring_index(psn)];
    if (!s.in_flight) continue;
    const bool doubt = s.sacked ? p.mode == Mode::kRod && behind_doubt : !never_delivered(s);
    behind_doubt = behind_doubt || doubt;
    if (doubt && !is_control_ref(s.ref)) doubtful.push_back(s.ref.message);
  }
  std::sort(doubtful.begin(), doubtful.end());
  doubtful.erase(std::unique(doubtful.begin(), doubtful.end()), doubtful.end());
  const auto in_doubt = [&](uint32_t message) {
    return std::binary_search(doubtful.begin(), doubtful.end(), message);
  };
  bool answers_lost = false;
  for (const uint32_t message : doubtful) failed_.push_back({message, Status::kPeerUnreachable});
  stats_.orphan_messages_failed += doubtful.size();
  unlink_runs(p, [&](const TxRun* r) { return in_doubt(r->message); });

  // Transmit side: the new PDC starts at the old left edge, so each PSN keeps its slot and
  // its place in the order, and every one of them goes again, in order. The new PDC's
  // target must receive each PSN from its start, so a PSN whose packet must not go again
  // (RUD delivered, or in doubt) goes as a sequenced no-op (a CTRL ACK_REQ, reported to
  // nobody).
  uint32_t to_send = 0;  // packets and probes, not the no-ops
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    TxSlot& s = p.tx[ring_index(psn)];
    TxSlot fresh{};
    const bool doubtful_packet = !is_control_ref(s.ref) && in_doubt(s.ref.message);
    if (doubtful_packet && s.answer) {
      answers_lost = true;
      ended_answers_.push_back(s.ref.message);
    }
    if ((s.sacked && p.mode == Mode::kRud) || doubtful_packet) {
      fresh.ref = PacketRef{kProbeMessage, 0};
    } else {
      fresh.ref = s.ref;
      fresh.bytes = s.bytes;
      fresh.answer = s.answer;
      ++to_send;
    }
    fresh.entropy = s.entropy;
    fresh.sent = s.sent;
    fresh.in_flight = true;
    fresh.refused = true;  // not in the network until it is sent again
    s = fresh;
  }
  end_answers_elsewhere(p);
  const PeerIndex peer = p.peer;
  if (to_send == 0 && p.run_head == nullptr && !p.probe_pending) {
    ++stats_.orphan_pdcs_freed;  // nothing to send again
    free_pdc(index);
  } else {
    ++stats_.pdcs_reopened;
    become_ours(index, now);
  }
  if (answers_lost) lost_answers_to(peer);
}

void Pds::become_ours(uint32_t index, Time now) {
  Pdc& p = pdcs_[index];
  forget_peers_pdc(index);
  by_id_.erase(p.local_id);
  take_local_id(index);
  p.initiator = true;
  ++initiator_pdcs_;
  p.state = PdcState::kSynSent;
  p.remote_known = false;
  p.remote_id = 0;
  p.orphaned = p.peer_remembers = false;
  p.orphan_asks = 0;
  p.close_asked = Time{};
  p.syn_refused = false;
  p.backoff = 0;

  // Receive side.
  drop_receive_side(index);
  std::fill(p.rx_bitmap.begin(), p.rx_bitmap.end(), 0);
  p.rx_since_ack = 0;

  // Transmit side (its slots made ready by reopen_orphan).
  p.start_psn = p.snd_una;
  p.rcv_nxt = p.rod_pop = p.start_psn;
  p.inflight_bytes = 0;
  p.rtx_head = p.rtx_count = 0;
  bool answers = false;
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    answers = answers || p.tx[ring_index(psn)].answer;
    queue_retransmit(p, psn);
  }
  for (const TxRun* r = p.run_head; r != nullptr; r = r->next) answers = answers || r->answer;
  p.carries_answer = answers;
  if (p.snd_una != p.snd_nxt) arm_rto(p, now);
  mark_ready(index);
}

void Pds::remember_failed_pdc(const Pdc& p) {
  FailedPdc f;
  f.peer = p.peer;
  f.local_id = p.local_id;
  // Our ids are given in turn through all 65535, so ours alone names it while the peer's
  // is not known yet (nothing of the peer's came on it then: all it sends is new here).
  f.remote_id = p.remote_known ? p.remote_id : 0;
  f.mode = p.mode;
  f.delivered_below = p.mode == Mode::kRud ? p.rcv_nxt : p.rod_pop;
  if (p.mode == Mode::kRud) f.received = p.rx_bitmap;
  if (failed_pdcs_.size() < kFailedPdcsKept) {
    failed_pdcs_.push_back(std::move(f));
    return;
  }
  failed_pdcs_[failed_pdcs_next_] = std::move(f);
  failed_pdcs_next_ = (failed_pdcs_next_ + 1) % kFailedPdcsKept;
}

wire::ForgottenPsn Pds::what_became_of(PeerIndex peer, uint16_t our_id, uint16_t their_id,
                                       uint32_t psn) const {
  for (const FailedPdc& f : failed_pdcs_) {
    if (f.peer != peer || f.local_id != our_id || (f.remote_id != 0 && f.remote_id != their_id)) {
      continue;
    }
    const int32_t ahead = psn_diff(psn, f.delivered_below);
    bool delivered = ahead < 0;
    if (!delivered && !f.received.empty() && ahead < static_cast<int32_t>(window_)) {
      const uint32_t bit = ring_index(psn);
      delivered = ((f.received[bit / 64] >> (bit % 64)) & 1) != 0;
    }
    return delivered ? wire::ForgottenPsn::kDelivered : wire::ForgottenPsn::kNeverDelivered;
  }
  return wire::ForgottenPsn::kNoWord;
}

}  // namespace spray::pds
