// The receiving side of a PDC: PDC lookup or creation on SYN, duplicate suppression,
// the receive window, ROD reordering, ACK coalescing with SACK bitmaps, and CTRL.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

bool Pds::rx_received(const Pdc& p, uint32_t psn) const {
  const uint32_t bit = ring_index(psn);
  return (p.rx_bitmap[bit / 64] >> (bit % 64)) & 1;
}

RxClass Pds::classify_request(PeerIndex peer, const wire::PdsRequest& h, bool trimmed,
                              uint16_t entropy, Time now) {
  now_ = now;
  arrival_entropy_ = entropy;
  target_open_pending_ = false;
  ++stats_.rx_packets;
  RxClass c;
  c.psn = h.psn;
  c.retransmitted = (h.flags & wire::request_flags::kRetransmit) != 0;
  c.ack_requested = (h.flags & wire::request_flags::kAckRequested) != 0;
  c.has_backlog = h.has_cc_state;
  c.backlog = h.cc_state;
  c.entropy = entropy;
  const Mode mode = h.ordered ? Mode::kRod : Mode::kRud;
  uint32_t index = 0;

  if (h.is_syn()) {
    const uint64_t key = syn_key(peer, h.spdcid);
    const uint32_t start_psn = h.psn - h.syn.psn_offset;
    auto found = by_syn_.find(key);
    if (found && start_psn != pdcs_[*found].start_psn) {
      // Another PDC under the id of one the peer opened to us. An engine gives its PDCs
      // ids in turn through all 65535, so this one's initiator is gone: a process that
      // restarted at the peer's address, whose engine numbers its PDCs from 1 again.
      // Until it was seen, its SYNs fell in the old PDC's window and were refused, or,
      // behind it, taken for duplicates. Those were seen only where the restart was not
      // (Engine::restart_peer forgets the peer's PDCs): the predecessor had opened the
      // PDC with a packet that named no incarnation (a response, a probe). What we sent
      // on the old PDC fails with it; nothing of the new one's waits for it.
      ++stats_.pdcs_superseded;
      (void)fail_messages_on(pdcs_[*found], Status::kPeerUnreachable);
      free_pdc(*found);
      found = std::nullopt;
    }
    if (found) {
      index = *found;
    } else {
      if (closed_syn_.find(key) == start_psn) {  // a late duplicate of a PDC already closed
        ++stats_.rx_duplicates;
        return c;
      }
      if (trimmed) {  // no state yet: just ask for the packet again
        send_nack(peer, wire::NackCode::kTrimmed, h.psn, 0, h.spdcid);
        return c;
      }
      if (tell_of_lost_answers(peer)) {
        ++stats_.syns_refused_after_lost_answers;
        send_nack(peer, wire::NackCode::kInvalidSyn, h.psn, 0, h.spdcid);
        return c;
      }
      const bool full = pdcs_.used() >= pdcs_.capacity() || !syn_may_open(key, now);
      if (full || target_pdcs_of_peer_.find(peer).value_or(0) >= cfg_.max_target_pdcs_per_peer) {
        ++stats_.pdcs_refused;
        send_nack(peer, wire::NackCode::kNoPdcAvailable, h.psn, 0, h.spdcid);
        if (full) {  // room for the SYN's next try, which is kept its turn
          note_refused_syn(key, now);
          reclaim_idle_pdc(now, false);
        }
        return c;
      }
      // A new PDC: nothing exists until commit_request; the window is empty and
      // starts at the start PSN the SYN reveals.
      c.open_on_commit = true;
      c.peer = peer;
      c.remote_id = h.spdcid;
      c.start_psn = start_psn;
      c.mode = mode;
      c.verdict =
          (mode == Mode::kRod && h.psn != c.start_psn) ? RxVerdict::kHold : RxVerdict::kDeliver;
      target_open_pending_ = true;
      target_open_peer_ = peer;
      return c;
    }
  } else {
    const auto found = by_id_.find(h.dpdcid);
    Pdc* p = found ? &pdcs_[*found] : nullptr;
    if (p != nullptr && p->peer == peer && !p->remote_known && p->initiator &&
        static_cast<uint32_t>(psn_diff(h.psn, p->rcv_nxt)) < window_) {
      // Our ACK-borne id reached the peer before its ACK reached us: learn it here. Only
      // from a PSN in our receive window (the target numbers its packets on our PDC from
      // our start PSN): a late packet of a PDC the peer had with our predecessor, whose
      // id we took again, is not its answer to ours, and the id it names would lead our
      // packets to a PDC that is gone.
      establish(*p, h.spdcid);
    }
    if (p == nullptr || p->peer != peer || p->remote_id != h.spdcid) {
      ++stats_.bad_packets;
      // A PDC we forgot (lost_answers_to): this NACK tells the peer. One of ours that
      // failed: the NACK says whether this PSN was delivered (pds_orphan.cc).
      (void)tell_of_lost_answers(peer);
      send_nack(peer, wire::NackCode::kInvalidDpdcid, h.psn, h.dpdcid, h.spdcid,
                static_cast<uint8_t>(what_became_of(peer, h.dpdcid, h.spdcid, h.psn)));
      return c;
    }
    // The sender's left edge (clear_psn_offset back from this PSN): every PSN before it
    // was acknowledged to the sender. Past the next PSN we expect, that was not by us:
    // this PDC is a phantom, opened here by a late copy of the sender's SYN after our
    // engine started (a restarted process numbers its PDCs from 1 again, so the sender's
    // packets name its id), while the sender's PDC lives on with our predecessor's
    // acknowledgements. Taken here, its packets were delivered while the sender, which
    // heard no ACK it could use (ours name PSNs behind its left edge), failed them
    // (restart_mid_flight_test seeds 2357, 5186; 2026-12-08). So the phantom goes, as a
    // PDC we never knew: the sender fails its PDC (INVALID_DPDCID), and what it sent on
    // it is not delivered. (A PSN outside our window is refused as such, below.)
    if (const Pdc& q = pdcs_[*found];
        static_cast<uint32_t>(psn_diff(h.psn, q.rcv_nxt)) < window_ &&
        psn_diff(h.psn + static_cast<uint32_t>(static_cast<int32_t>(h.clear_psn_offset)),
                 q.rcv_nxt) > 0) {
      ++stats_.bad_packets;
      ++stats_.phantom_pdcs;
      const uint16_t local_id = q.local_id;
      (void)fail_messages_on(pdcs_[*found], Status::kPeerUnreachable);
      free_pdc(*found);
      send_nack(peer, wire::NackCode::kInvalidDpdcid, h.psn, local_id, h.spdcid);
      return c;
    }
    index = *found;
  }

  Pdc& p = pdcs_[index];
  c.pdc = index;
  if (p.mode != mode) {
    ++stats_.bad_packets;
    send_nack(peer, wire::NackCode::kPdcModeMismatch, h.psn, p.local_id, p.remote_id);
    return c;
  }
  const int32_t d = psn_diff(h.psn, p.rcv_nxt);
  if (d < 0 || rx_received(p, h.psn)) {
    ++stats_.rx_duplicates;
    c.verdict = RxVerdict::kDuplicate;
    p.last_rx_psn = h.psn;
    p.last_rx_entropy = entropy;
    p.ack_lost = true;
    // The sender missed our ACK; tell it again, now: the ACK built at the next flush
    // reports the newest PSN, and its SACK bits may no longer reach back to this one
    // (see emit_ack). The sender then resent it until its retries ran out.
    emit_ack(p);
    return c;
  }
  if (d >= static_cast<int32_t>(window_)) {
    ++stats_.bad_packets;
    send_nack(peer, wire::NackCode::kPsnOutOfWindow, h.psn, p.local_id, p.remote_id);
    return c;
  }
  if (trimmed) {
    send_nack(peer, wire::NackCode::kTrimmed, h.psn, p.local_id, p.remote_id);
    return c;
  }
  // ROD delivers straight through only when nothing is waiting ahead of it: an early
  // packet (d != 0) or a stalled line of held packets (rod_pop behind rcv_nxt) holds.
  const bool hold = p.mode == Mode::kRod && (d != 0 || p.rod_pop != p.rcv_nxt);
  c.verdict = hold ? RxVerdict::kHold : RxVerdict::kDeliver;
  return c;
}

void Pds::commit_request(RxClass& c, bool ecn_marked, uint64_t held) {
  target_open_pending_ = false;
  if (c.open_on_commit) {
    uint32_t index = 0;
    if (!open_pdc(c.peer, c.mode, false, index, now_)) return;  // capacity was checked
    Pdc& fresh = pdcs_[index];
    fresh.remote_id = c.remote_id;
    fresh.remote_known = true;
    fresh.start_psn = c.start_psn;
    fresh.rcv_nxt = fresh.rod_pop = fresh.snd_una = fresh.snd_nxt = c.start_psn;
    by_syn_.insert(syn_key(c.peer, c.remote_id), index);
    target_pdcs_of_peer_.insert(c.peer, target_pdcs_of_peer_.find(c.peer).value_or(0) + 1);
    c.pdc = index;
    c.open_on_commit = false;
  }
  Pdc& p = pdcs_[c.pdc];
  p.last_active = now_;
  if (c.retransmitted) p.ack_lost = true;
  const uint32_t bit = ring_index(c.psn);
  p.rx_bitmap[bit / 64] |= uint64_t{1} << (bit % 64);
  if (p.mode == Mode::kRod) p.rod_held[bit] = held;
  // Slide the window past every PSN now received in order.
  while (rx_received(p, p.rcv_nxt)) {
    const uint32_t b = ring_index(p.rcv_nxt);
    p.rx_bitmap[b / 64] &= ~(uint64_t{1} << (b % 64));
    ++p.rcv_nxt;
  }
  if (p.mode == Mode::kRod && c.verdict == RxVerdict::kDeliver) {
    // Delivered straight through: skip over it when popping held buffers.
    if (p.rod_pop == c.psn) ++p.rod_pop;
  }
  p.last_rx_psn = c.psn;
  p.last_rx_entropy = c.entropy;
  p.last_rx_ecn = p.last_rx_ecn || ecn_marked;
  if (ecn_marked) ++stats_.rx_ecn_marked;
  if (c.has_backlog) note_backlog(p, c.backlog);
  ++p.rx_since_ack;
  if (!p.ack_pending) {
    p.ack_may_wait = true;
    p.ack_held_since = now_;
  }
  p.ack_may_wait = p.ack_may_wait && !c.ack_requested && !c.retransmitted;
  queue_ack(c.pdc);
  if (ecn_marked || p.rx_since_ack >= cfg_.ack_every_packets) emit_ack(p);
}

bool Pds::received_before(PeerIndex peer, const wire::PdsRequest& h) const {
  std::optional<uint32_t> found;
  if (h.is_syn()) {
    found = by_syn_.find(syn_key(peer, h.spdcid));
    if (found && pdcs_[*found].start_psn != h.psn - h.syn.psn_offset) return false;
  } else {
    found = by_id_.find(h.dpdcid);
    if (found && (pdcs_[*found].peer != peer || pdcs_[*found].remote_id != h.spdcid)) return false;
  }
  if (!found) return false;
  const Pdc& p = pdcs_[*found];
  return psn_diff(h.psn, p.rcv_nxt) < 0 || rx_received(p, h.psn);
}

bool Pds::holds_unseen_from(PeerIndex peer) const {
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i) || pdcs_[i].peer != peer || pdcs_[i].mode != Mode::kRod) continue;
    const std::vector<uint64_t>& held = pdcs_[i].rod_held;
    if (std::any_of(held.begin(), held.end(), [](uint64_t h) { return h != 0; })) return true;
  }
  return false;
}

bool Pds::pop_in_order(uint32_t index, uint64_t& held) {
  Pdc& p = pdcs_[index];
  while (psn_diff(p.rcv_nxt, p.rod_pop) > 0) {
    uint64_t& slot = p.rod_held[ring_index(p.rod_pop)];
    ++p.rod_pop;
    if (slot != 0) {
      held = slot;
      slot = 0;
      return true;
    }
  }
  if (p.free_when_drained) {  // closed while these waited (see on_ack)
    finish_close(index);
  } else if (p.state == PdcState::kClosing && !p.close_sent) {
    mark_ready(index);  // its CLOSE waited for the line to drain (next_tx_now)
  }
  return false;
}

void Pds::unpop_in_order(uint32_t index, uint64_t held) {
  Pdc& p = pdcs_[index];
  --p.rod_pop;
  p.rod_held[ring_index(p.rod_pop)] = held;
}

void Pds::refuse_request(PeerIndex peer, const wire::PdsRequest& h, wire::NackCode code) {
  const auto found = h.is_syn() ? by_syn_.find(syn_key(peer, h.spdcid)) : by_id_.find(h.dpdcid);
  if (!found) {
    // A SYN whose PDC was never opened (it opens on commit): refused all the same, as a
    // trimmed SYN is, or the initiator would hear nothing and spend its retries.
    if (h.is_syn()) send_nack(peer, code, h.psn, 0, h.spdcid);
    return;
  }
  const Pdc& p = pdcs_[*found];
  send_nack(peer, code, h.psn, p.local_id, p.remote_id);
}

void Pds::refuse_request(PeerIndex peer, const wire::PdsRequest& h, uint16_t entropy,
                         wire::NackCode code, uint8_t vendor_code, uint32_t payload) {
  arrival_entropy_ = entropy;
  // The ids the request named, echoed: the sender's PDC is found by them whether or not
  // one is open here (a PDC of a predecessor's is not).
  send_nack(peer, code, h.psn, h.is_syn() ? 0 : h.dpdcid, h.spdcid, vendor_code, payload);
}

void Pds::queue_ack(uint32_t index) {
  Pdc& p = pdcs_[index];
  p.ack_pending = true;
  if (!p.in_ack_list) {
    p.in_ack_list = true;
    ack_list_.push_back(index);
  }
}

// The receive bits for PSNs base .. base + 63, read a word at a time from the ring
// (whose size is a multiple of 64). When base is rcv_nxt, bit 0 is missing by definition.
uint64_t Pds::sack_bitmap(const Pdc& p, uint32_t base) const {
  const uint32_t start = ring_index(base);
  const uint32_t word = start / 64, shift = start % 64;
  const size_t words = p.rx_bitmap.size();
  uint64_t bits = p.rx_bitmap[word] >> shift;
  if (shift != 0) bits |= p.rx_bitmap[(word + 1) % words] << (64 - shift);
  return base == p.rcv_nxt ? bits & ~uint64_t{1} : bits;
}

void Pds::emit_ack(Pdc& p) {
  wire::PdsAck a;
  a.has_cc = true;
  a.cack_psn = p.rcv_nxt - 1;
  a.ack_psn_offset =
      static_cast<int16_t>(std::clamp(psn_diff(p.last_rx_psn, a.cack_psn), -32768, 32767));
  if (p.last_rx_ecn) a.flags |= wire::ack_flags::kEcnMarked;
  a.spdcid = p.local_id;
  a.dpdcid = p.remote_id;
  // The 64 SACK bits normally start right after the cumulative point. When the newest
  // PSN is further ahead than that (a hole with much in flight behind it), they are
  // placed to end at the newest PSN instead, so the sender learns what arrived beyond
  // the hole rather than resending it at its next timeout.
  uint32_t base = p.rcv_nxt;
  if (psn_diff(p.last_rx_psn, base) >= 64) base = p.last_rx_psn - 63;
  a.sack_psn_offset = static_cast<int16_t>(std::min<int32_t>(psn_diff(base, a.cack_psn), 32767));
  a.sack_bitmap = sack_bitmap(p, a.cack_psn + static_cast<uint32_t>(a.sack_psn_offset));
  if (p.credit_requested) {
    a.cc_type = wire::kAckCcTypeCredit;
    a.cc_state = credit_window();
  }
  // It returns on the EV the latest request arrived on (ControlPacket::entropy). Sent
  // on the engine's next EV in turn instead, half of all ACKs were lost with half the
  // return paths dead, and REPS took each loss for a fault of the data's EV. In an
  // all-to-all of 6 hosts with 3 PDCs each over two paths, one dying, at 5 % loss
  // (spray-transfer, seeds 1-1000), 75 runs failed an operation with ACKs sprayed and
  // 23 with ACKs returning this way (both with REPS dropping stale good EVs at a
  // timeout; 103 and 114 without that). It also tells the sender that EV works both
  // ways when the ACK gets back on it (on_ack: paths::Feedback::kGood).
  // After a duplicate or a retransmission, several copies on different EVs.
  // One copy left the retransmit to a coin toss per try when half the return paths were
  // dead (a link down between two ECMP routers): a PSN whose ACKs all drew dead paths
  // for max_retries tries failed its PDC. Copies cost little: duplicates and
  // retransmissions are rare next to first transmissions (a 2 GiB loopback transfer
  // with 1472-byte packets: 369 retransmissions in 1.5 million packets).
  push_control({p.peer, a, p.last_rx_entropy}, p.ack_lost ? kControlCopies : 1);
  p.ack_lost = false;
  ++stats_.acks_sent;
  p.rx_since_ack = 0;
  p.ack_pending = false;
  p.ack_may_wait = false;
  p.last_rx_ecn = false;
}

void Pds::note_backlog(Pdc& p, uint32_t backlog) {
  p.credit_requested = true;
  const bool active = backlog > 0;
  if (active != p.credit_active) {
    p.credit_active = active;
    if (active) {
      ++credit_senders_;
    } else {
      --credit_senders_;
    }
  }
}

uint32_t Pds::credit_window() const {
  // Every sender with a backlog gets an equal share of one BDP per base RTT: together
  // they fill the receiver's link and no more. A sender sending its last packets (no
  // backlog left) gets the same share. Below one MTU the sender paces (see rccc.h).
  return std::max<uint32_t>(1, cfg_.cc.bdp_bytes() / std::max<uint32_t>(1, credit_senders_));
}

void Pds::flush_acks(AckFlush which, Time now) {
  size_t kept = 0;
  for (uint32_t index : ack_list_) {
    if (!pdcs_.in_use(index)) continue;
    Pdc& p = pdcs_[index];
    const bool may_go =
        which == AckFlush::kBehindPackets || which == AckFlush::kAll ||
        (which == AckFlush::kOverdue && now - p.ack_held_since >= cfg_.ack_hold_limit);
    const bool held = p.ack_pending && p.ack_may_wait && !may_go;
    if (held) {
      ack_list_[kept++] = index;
      continue;
    }
    p.in_ack_list = false;
    if (!p.ack_pending) continue;
    if (p.ack_may_wait) ++stats_.acks_held;
    emit_ack(p);
  }
  ack_list_.resize(kept);
}

void Pds::on_ctrl(PeerIndex peer, const wire::PdsCtrl& ctrl, uint16_t entropy, Time now) {
  now_ = now;
  arrival_entropy_ = entropy;
  Pdc* p = pdc_by_local_id(ctrl.dpdcid);
  const bool ours = p != nullptr && p->peer == peer && p->remote_known &&
                    p->remote_id == ctrl.spdcid && (ctrl.flags & wire::ctrl_flags::kSyn) == 0;
  switch (ctrl.type) {
    case wire::CtrlType::kClose: {
      ++stats_.rx_packets;
      if (!ours) {
        if (tell_of_lost_answers(peer)) {  // we failed it, answers aboard: say so
          send_nack(peer, wire::NackCode::kInvalidDpdcid, ctrl.psn, ctrl.dpdcid, ctrl.spdcid);
          return;
        }
        // Already closed (our ACK was lost) or never ours: a stateless ACK lets a
        // retransmitted CLOSE finish; the initiator checks the ids.
        wire::PdsAck a;
        a.cack_psn = ctrl.psn;
        a.spdcid = ctrl.dpdcid;
        a.dpdcid = ctrl.spdcid;
        push_control({peer, a, entropy}, kControlCopies);
        return;
      }
      if (ctrl.psn != p->rcv_nxt) return;  // data before it still missing; it comes again
      // Busy, or ROD packets still wait here to go up (freeing would lose them).
      if (!p->tx_idle() || !p->rx_drained()) {
        send_nack(peer, wire::NackCode::kClosing, ctrl.psn, p->local_id, p->remote_id);
        return;
      }
      p->last_rx_psn = ctrl.psn;
      p->last_rx_entropy = entropy;
      ++p->rcv_nxt;
      p->ack_lost = true;  // its last word on this PDC: kControlCopies copies
      emit_ack(*p);
      finish_close(p->rto_timer.owner);
      return;
    }
    case wire::CtrlType::kAckRequest: {
      // A sequenced probe: it takes a PSN like data (so it is retransmitted, and its
      // ACK proves we are alive), but carries nothing for SES.
      if (ours && p->initiator && tell_of_lost_answers(peer)) {
        // On a PDC of ours its ACK would pass for proof that we still hold its answers
        // (pds_lost_answers.cc): the NACK fails the PDC at its end instead.
        send_nack(peer, wire::NackCode::kInvalidDpdcid, ctrl.psn, ctrl.dpdcid, ctrl.spdcid);
        return;
      }
      wire::PdsRequest r;
      r.ordered = (ctrl.flags & wire::ctrl_flags::kRod) != 0;
      r.next = wire::NextHeader::kNone;
      r.flags = static_cast<uint8_t>(ctrl.flags & wire::request_flags::kDefined);
      r.psn = ctrl.psn;
      r.spdcid = ctrl.spdcid;
      r.dpdcid = ctrl.dpdcid;
      r.syn = ctrl.syn;
      RxClass c = classify_request(peer, r, false, entropy, now);
      if (c.verdict == RxVerdict::kDeliver || c.verdict == RxVerdict::kHold) {
        commit_request(c, false, 0);
      }
      return;
    }
    case wire::CtrlType::kCloseRequest:
      // The target's table is full and this PDC was idle there: close it if it is idle
      // here too (anything sent to the peer later opens a new one). Unsequenced.
      if (ours && p->initiator && reclaimable(*p)) {
        ++stats_.pdcs_reclaimed;
        begin_close(p->rto_timer.owner);
        return;
      }
      // We no longer know that PDC: we failed it, and nothing told the target, whose
      // slot it would hold for good (spray-transfer seed 6300 of the faults sweep: eight
      // hosts with two-PDC tables, each holding one such orphan, refused each other's
      // SYNs until the run's end). The NACK lets the target free it. A PDC of ours in
      // SYN form to that peer may be the one asked about, its first ACK not yet here:
      // no answer then.
      if (p == nullptr || p->peer != peer || (p->remote_known && p->remote_id != ctrl.spdcid)) {
        send_nack(peer, wire::NackCode::kInvalidDpdcid, ctrl.psn, ctrl.dpdcid, ctrl.spdcid);
      }
      return;
    default:
      return;  // NOP, CLEAR, PROBE, CREDIT...: not used by this implementation yet
  }
}

}  // namespace spray::pds
