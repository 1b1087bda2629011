// The sending side of a PDC: choosing the next packet, ACK/SACK processing, loss
// detection (RACK-style, from SACKs), trimming NACKs and retransmission timeouts.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

void Pds::queue_retransmit(Pdc& p, uint32_t psn) {
  TxSlot& s = p.tx[ring_index(psn)];
  if (!s.in_flight || s.sacked || s.rtx_queued) return;
  s.rtx_queued = true;
  p.rtx[ring_index(p.rtx_head + p.rtx_count)] = psn;
  ++p.rtx_count;
  mark_ready(p.rto_timer.owner);
}

// The EV for the second copy of a resend (kTwinFromTry): another than the first copy's.
// False when the selector offers none (ECMP keeps one EV a flow): no copy then.
bool Pds::send_twin_copy(Pdc& p, uint32_t psn, TxPacket& out) {
  const TxSlot& s = p.tx[ring_index(psn)];
  for (int draw = 0; draw < 4; ++draw) {
    const uint16_t ev = p.paths->next_entropy();
    if (ev == s.entropy) continue;
    out.ref = s.ref;
    out.entropy = ev;
    return true;
  }
  return false;
}

Duration Pds::current_rto(const Pdc& p) const {
  Duration rto = p.rtt.rto(cfg_.initial_rto, cfg_.min_rto, cfg_.max_rto);
  for (uint32_t i = 0; i < p.backoff && rto < cfg_.max_rto; ++i) rto = rto * 2;
  return std::min(rto, cfg_.max_rto);
}

void Pds::arm_rto(Pdc& p, Time now) {
  timers_.arm(p.rto_timer, now + current_rto(p));
}

bool Pds::next_tx(uint32_t index, Time now, TxPacket& out) {
  if (!pdcs_.in_use(index)) return false;
  Pdc& p = pdcs_[index];
  const Duration gap = p.cc->pacing_gap();
  if (gap.ps > 0 && now < p.next_send) {
    if (!p.pace_timer.armed()) timers_.arm(p.pace_timer, p.next_send);
    return false;  // the pace timer puts the PDC back on the ready list
  }
  now_ = now;
  if (!next_tx_now(p, index, now, out)) return false;
  p.last_active = now;
  // The next slot follows the one just used, not `now`: a sender woken late (timer
  // granularity) catches up instead of losing the lateness every time, so the average
  // rate is the granted one. After idling it may send one packet early, no more.
  if (gap.ps > 0) p.next_send = std::max(p.next_send + gap, now);
  return true;
}

bool Pds::next_tx_now(Pdc& p, uint32_t index, Time now, TxPacket& out) {
  // An orphan sends nothing until it reopens, but asks its peer again about packets it
  // has had no word of (pds_orphan.cc).
  if (p.orphaned && !(p.peer_remembers && p.rtx_count > 0)) return false;
  if (p.tx.empty()) {
    p.tx.assign(window_, TxSlot{});
    p.rtx.assign(window_, 0);
  }
  auto fill_header = [&](uint32_t psn, uint8_t flags) {
    out.pdc = index;
    out.peer = p.peer;
    out.is_ctrl = false;
    wire::PdsRequest& r = out.request;
    r = wire::PdsRequest{};
    r.ordered = p.mode == Mode::kRod;
    r.flags = flags;
    r.psn = psn;
    r.spdcid = p.local_id;
    r.clear_psn_offset = static_cast<int16_t>(std::clamp(psn_diff(p.snd_una, psn), -32768, 0));
    if (p.state == PdcState::kSynSent) {
      r.flags |= wire::request_flags::kSyn;
      r.syn.psn_offset = static_cast<uint16_t>(psn - p.start_psn);
    } else {
      r.dpdcid = p.remote_id;
    }
    if (p.sends_backlog) {  // RCCC: tell the receiver what is still to come
      r.has_cc_state = true;
      r.cc_state = backlog_bytes(p);
    }
  };

  // A sequenced control packet: CLOSE or a liveness ACK_REQ, by the slot's ref.
  auto fill_ctrl = [&](uint32_t psn, const PacketRef& ref, uint8_t flags) {
    out.pdc = index;
    out.peer = p.peer;
    out.is_ctrl = true;
    out.ctrl = wire::PdsCtrl{};
    out.ctrl.type =
        ref.message == kCloseMessage ? wire::CtrlType::kClose : wire::CtrlType::kAckRequest;
    out.ctrl.flags =
        static_cast<uint8_t>(flags | (p.mode == Mode::kRod ? wire::ctrl_flags::kRod : 0));
    out.ctrl.psn = psn;
    out.ctrl.spdcid = p.local_id;
    if (p.state == PdcState::kSynSent) {
      out.ctrl.flags |= wire::ctrl_flags::kSyn;
      out.ctrl.syn.psn_offset = static_cast<uint16_t>(psn - p.start_psn);
    } else {
      out.ctrl.dpdcid = p.remote_id;
    }
  };
  // A resend (or its second copy) of the packet in `psn`'s slot.
  auto fill_resend = [&](uint32_t psn, const PacketRef& ref) {
    if (is_control_ref(ref)) {
      fill_ctrl(psn, ref, wire::ctrl_flags::kRetransmit | wire::ctrl_flags::kAckRequested);
    } else {
      fill_header(psn, wire::request_flags::kRetransmit | wire::request_flags::kAckRequested);
    }
  };
  // Takes the next PSN for a control packet of PDS's own.
  auto start_ctrl = [&](uint32_t message) {
    const uint32_t psn = p.snd_nxt++;
    TxSlot& s = p.tx[ring_index(psn)];
    s = TxSlot{};
    s.ref = PacketRef{message, 0};
    s.in_flight = true;
    s.sent = now;
    s.entropy = p.paths->next_entropy();
    out.ref = s.ref;
    out.entropy = s.entropy;
    fill_ctrl(psn, s.ref, wire::ctrl_flags::kAckRequested);
    if (!p.rto_timer.armed()) arm_rto(p, now);
    ++stats_.tx_packets;
  };

  // 1. Retransmissions first: they hold the window's left edge.
  while (p.rtx_count > 0) {
    const uint32_t psn = p.rtx[p.rtx_head];
    p.rtx_head = ring_index(p.rtx_head + 1);
    --p.rtx_count;
    TxSlot& s = p.tx[ring_index(psn)];
    const bool live = s.rtx_queued && s.in_flight && !s.sacked && psn_diff(psn, p.snd_una) >= 0;
    s.rtx_queued = false;
    if (!live) continue;
    if (s.twin == kTwinCopyNext) {  // the second copy of a resend (kTwinFromTry)
      if (!send_twin_copy(p, psn, out)) {
        s.twin = kTwinNone;  // it went once: its ACK names its EV, as any ACK does
        continue;
      }
      s.twin = kTwinSent;
      ++stats_.twin_copies;
      ++stats_.tx_packets;
      fill_resend(psn, s.ref);
      return true;
    }
    if (++s.retries > std::min(cfg_.max_retries, kMaxRetries)) {
      fail_pdc(index, {.why = PdcFailure::kUnanswered, .tries = s.retries}, now);
      return false;
    }
    if (s.refused) {  // back in the network
      s.refused = false;
      p.inflight_bytes += s.bytes;
    }
    s.entropy = p.paths->retransmit_entropy();
    s.sent = now;
    s.retransmitted = true;
    // A PSN lost twice is more likely on a dead path than unlucky, and a selector whose
    // good EVs a timeout evicted explores blind: with one of two paths dead each try was
    // a coin toss, and in REPS path-down all-to-alls a PSN's last eleven tries all went
    // to the dead path (spray-transfer seed 146; 23 of 2000 such runs failed a PDC so or
    // alike, and oblivious spraying, which never learns, failed 22 of 273 path-down runs
    // of transfer-sweep faults). From its third try on, each resend goes as two copies
    // on different EVs, so a try fails only if both do.
    if (s.retries >= kTwinFromTry) {  // its copy goes next
      s.twin = kTwinCopyNext;
      s.rtx_queued = true;
      p.rtx[ring_index(p.rtx_head + p.rtx_count)] = psn;
      ++p.rtx_count;
    } else {
      s.twin = kTwinNone;
    }
    out.ref = s.ref;
    out.entropy = s.entropy;
    ++stats_.retransmits;
    ++stats_.tx_packets;
    fill_resend(psn, s.ref);
    return true;
  }

  if (p.orphaned) return false;
  const bool window_open = psn_diff(p.snd_nxt, p.snd_una) < static_cast<int32_t>(window_);

  // 2. A closing PDC sends its CLOSE once everything before it is acknowledged.
  if (p.state == PdcState::kClosing) {
    if (p.close_sent || !window_open || p.snd_una != p.snd_nxt) return false;
    // ROD packets from the peer still wait here to go up; pop_in_order marks the PDC
    // ready once they have.
    if (!p.rx_drained()) return false;
    p.close_sent = true;
    start_ctrl(kCloseMessage);
    return true;
  }

  // 3. A liveness probe, if one was asked for and the PDC is still idle.
  if (p.probe_pending) {
    p.probe_pending = false;
    if (window_open && p.snd_una == p.snd_nxt && p.run_head == nullptr) {
      start_ctrl(kProbeMessage);
      return true;
    }
  }

  // 4. New packets, within the PSN window and the congestion window.
  TxRun* run = p.run_head;
  if (run == nullptr || !window_open) return false;
  if (p.state == PdcState::kSynSent &&
      static_cast<uint32_t>(p.snd_nxt - p.start_psn) > wire::kMaxSynPsnOffset) {
    return false;  // the SYN form can only name 4096 PSNs; wait for the first ACK
  }
  if (p.inflight_bytes > 0 && p.inflight_bytes + run->packet_bytes > p.cc->window_bytes()) {
    return false;
  }
  const uint32_t psn = p.snd_nxt++;
  TxSlot& s = p.tx[ring_index(psn)];
  s = TxSlot{};
  s.ref = PacketRef{run->message, run->next_packet};
  s.bytes = run->packet_bytes;
  s.in_flight = true;
  s.answer = run->answer;
  s.sent = now;
  s.entropy = p.paths->next_entropy();
  // ACK-requested asks the target to acknowledge at the end of its receive pass, and
  // every packet carries it but one kind: a run's lone packet that nothing here waits
  // on (TxRun::ack_may_wait), sent with nothing else in flight on an established PDC.
  // Its target may then hold the ACK for a step that sends something and send it behind
  // those packets (Pds::flush_acks): in a ping-pong of injects the ACK rides behind the
  // reply instead of costing a send call of its own ahead of it. Anything sent while it is
  // unacknowledged asks again, so a held ACK never stalls a window or a completion.
  s.ack_may_wait = run->ack_may_wait && run->packet_count == 1 && p.snd_una == psn &&
                   p.state == PdcState::kEstablished;
  p.inflight_bytes += s.bytes;
  const bool last_of_run = ++run->next_packet == run->packet_count;
  if (last_of_run) {
    p.run_head = run->next;
    if (p.run_head == nullptr) p.run_tail = nullptr;
    run->next = nullptr;
  }
  fill_header(psn, s.ack_may_wait ? uint8_t{0} : wire::request_flags::kAckRequested);
  out.ref = s.ref;
  out.entropy = s.entropy;
  if (!p.rto_timer.armed()) arm_rto(p, now);
  ++stats_.tx_packets;
  return true;
}

// Bytes queued on the PDC not sent yet (first transmissions), for RCCC's backlog. Walks
// at most 64 queued runs: a longer queue is reported as at least their bytes.
uint32_t Pds::backlog_bytes(const Pdc& p) const {
  uint64_t bytes = 0;
  int runs = 0;
  for (const TxRun* r = p.run_head; r != nullptr && runs < 64; r = r->next, ++runs) {
    bytes += uint64_t{r->packet_count - r->next_packet} * r->packet_bytes;
  }
  return static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX));
}

// Marks one in-flight PSN acknowledged, reports it upward and tells the path selector
// how its EV fared (kGood, or kEcn for the packet whose mark the ACK reports).
//
// On a ROD PDC a SACKed packet is reported only once the cumulative point passes it: the
// target holds it behind a gap rather than delivering it, and if the PDC fails before
// the gap is filled the target never delivers it, so its send must fail (fail_pdc), not
// have completed. (Chaos seed 145 showed a ROD send completed OK that never arrived.)
void Pds::ack_psn(Pdc& p, uint32_t psn, bool cumulative, paths::Feedback feedback,
                  uint32_t trigger) {
  TxSlot& s = p.tx[ring_index(psn)];
  if (!s.in_flight) return;
  const bool delivered = cumulative || p.mode != Mode::kRod;
  if (!s.sacked) {
    if (!s.refused) p.inflight_bytes -= std::min(p.inflight_bytes, s.bytes);
    // RACK dates what arrived by its send time, and a resent packet's is its resend's. An
    // ACK that may answer the first copy instead must not date it so, or every packet
    // sent before the resend looks lost: a timeout that was only late (the target busy,
    // its ACKs on their way) resent most of a window when they came. Such an ACK was not
    // triggered by this PSN (the target answers the resend's arrival with an ACK that
    // names it), or came sooner than any round trip after the resend (RFC 8985, 6.2).
    const bool answers_first_copy =
        s.retransmitted && (psn != trigger || now_ - s.sent < p.rtt.min_rtt());
    if (!answers_first_copy) p.latest_acked_sent = std::max(p.latest_acked_sent, s.sent);
    if (delivered && !is_control_ref(s.ref)) acked_.push_back(s.ref);
    if (s.twin != kTwinSent) p.paths->on_feedback(s.entropy, feedback);
  } else if (cumulative && p.mode == Mode::kRod && !is_control_ref(s.ref)) {
    acked_.push_back(s.ref);  // held at the target until now
  }
  if (cumulative) {
    s = TxSlot{};
  } else {
    s.sacked = true;
  }
}

// RACK (RFC 8985): a PSN is lost once a PSN sent more than reorder_window after it has
// been acknowledged, cumulatively or by SACK. Acknowledged retransmissions count too,
// which is what recovers a tail after a timeout probe (see on_rto).
void Pds::detect_losses(Pdc& p) {
  // Tolerated reordering: the configured floor, or a quarter of the smoothed RTT when
  // that is longer (RFC 8985 uses min_RTT / 4): paths of unequal queueing reorder by a
  // share of the RTT, and a fixed window tuned for an idle fabric resends spuriously
  // whenever queues grow.
  const Duration reorder = std::max(cfg_.reorder_window, p.rtt.srtt() / 4);
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    const TxSlot& s = p.tx[ring_index(psn)];
    if (!s.in_flight || s.sacked || s.rtx_queued) continue;
    if (s.refused) continue;  // not lost: the RTO resends it once the target has had time
    if (s.sent + reorder >= p.latest_acked_sent) {
      // First sends go out in PSN order, so every later PSN sent once was sent later
      // still; only retransmitted slots (sent again, later) break that order.
      if (!s.retransmitted) break;
      continue;
    }
    p.paths->on_feedback(s.entropy, paths::Feedback::kLost);
    queue_retransmit(p, psn);
    ++stats_.rack_retransmits;
  }
}

// Packets the target refused while the PDC was in SYN form (for want of a PDC, or of
// room above one it had not opened yet) would wait for the next RTO otherwise, and the
// RTO restarts at every ACK that makes progress: with the window streaming, a refused
// first PSN waited until the whole window had been acknowledged around it while RACK
// spent its neighbour's retries (spray-transfer seed 1087 of the clean sweep failed a
// PDC so). Now that the target has a PDC for us they are as welcome as the rest.
void Pds::establish(Pdc& p, uint16_t remote_id) {
  p.remote_id = remote_id;
  p.remote_known = true;
  if (p.state == PdcState::kSynSent) p.state = PdcState::kEstablished;
  if (p.tx.empty()) return;
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    if (p.tx[ring_index(psn)].refused) queue_retransmit(p, psn);
  }
}

void Pds::on_ack(PeerIndex peer, const wire::PdsAck& ack, Time now,
                 std::optional<uint16_t> arrival_entropy) {
  ++stats_.acks_received;
  // Validate the PSN range before learning anything from this ACK, so a forged ACK
  // cannot teach us a wrong peer PDC id.
  Pdc* pp = pdc_for_ack(peer, ack.dpdcid, ack.spdcid);
  if (pp == nullptr) {
    ++stats_.bad_packets;
    return;
  }
  Pdc& p = *pp;
  now_ = now;
  p.last_active = now;
  const uint32_t next_expected = ack.cack_psn + 1;
  if (psn_diff(next_expected, p.snd_una) < 0) {
    ++stats_.stale_acks;  // behind our left edge: a later ACK overtook it
    return;
  }
  if (psn_diff(p.snd_nxt, next_expected) < 0) {
    ++stats_.bad_packets;  // forged: acknowledges beyond what we sent
    return;
  }
  if (!p.remote_known) establish(p, ack.spdcid);  // the first ACK names the target's PDC

  // The packet that triggered this ACK: its ECN mark and (if sent once) an RTT sample.
  const uint32_t trigger =
      ack.cack_psn + static_cast<uint32_t>(static_cast<int32_t>(ack.ack_psn_offset));
  const bool ecn = (ack.flags & wire::ack_flags::kEcnMarked) != 0;
  if (ecn) ++stats_.ecn_acks_received;
  Duration rtt{};
  bool trigger_both_ways = false;
  if (psn_diff(trigger, p.snd_una) >= 0 && psn_diff(p.snd_nxt, trigger) > 0) {
    const TxSlot& t = p.tx[ring_index(trigger)];
    if (t.in_flight && !t.sacked && !t.retransmitted && !t.ack_may_wait) rtt = now - t.sent;
    // The target sent it on the trigger's EV (emit_ack); arriving on it, it shows that
    // EV's paths work both ways. Extra copies arrive on other EVs and show no such thing.
    if (arrival_entropy && t.in_flight && t.entropy == *arrival_entropy) trigger_both_ways = true;
  }
  if (trigger_both_ways) ++stats_.acks_on_trigger_ev;
  // The mark belongs to the trigger alone: its EV is reported congested (never first
  // good, which would have REPS recycle a congested path). Of the others it covers, only
  // the EV it came back on is known good both ways; the rest are known delivered.
  const auto feedback = [&](uint32_t psn) {
    if (ecn && psn == trigger) return paths::Feedback::kEcn;
    const bool both_ways = !arrival_entropy || (psn == trigger && trigger_both_ways);
    return both_ways ? paths::Feedback::kGood : paths::Feedback::kDelivered;
  };

  const uint32_t before = p.inflight_bytes;
  const uint32_t una_before = p.snd_una;
  bool close_acked = false;
  while (p.snd_una != next_expected) {
    if (p.tx[ring_index(p.snd_una)].ref.message == kCloseMessage &&
        p.tx[ring_index(p.snd_una)].in_flight) {
      close_acked = true;
    }
    ack_psn(p, p.snd_una, true, feedback(p.snd_una), trigger);
    ++p.snd_una;
  }
  if (ack.has_cc && ack.sack_bitmap != 0) {
    const uint32_t base =
        ack.cack_psn + static_cast<uint32_t>(static_cast<int32_t>(ack.sack_psn_offset));
    for (uint32_t i = 0; i < 64; ++i) {
      if (((ack.sack_bitmap >> i) & 1) == 0) continue;
      const uint32_t psn = base + i;
      if (psn_diff(psn, p.snd_una) <= 0 || psn_diff(p.snd_nxt, psn) <= 0) continue;
      ack_psn(p, psn, false, feedback(psn), trigger);
    }
  }
  if (rtt.ps > 0) p.rtt.on_sample(rtt);
  const uint32_t acked_bytes = before - p.inflight_bytes;
  const uint32_t credit = ack.has_cc && ack.cc_type == wire::kAckCcTypeCredit
                              ? static_cast<uint32_t>(std::min<uint64_t>(ack.cc_state, UINT32_MAX))
                              : 0;
  if (acked_bytes > 0 || rtt.ps > 0 || credit > 0) {
    p.cc->on_ack({now, acked_bytes, rtt, ecn, credit});
  }

  if (close_acked) {
    if (!p.rx_drained()) {  // freed by pop_in_order once the held packets have gone up
      p.free_when_drained = true;
      return;
    }
    finish_close(p.rto_timer.owner);
    return;
  }
  // A late ACK of what the peer had before it forgot the PDC: one answer fewer to wait
  // for (pds_orphan.cc); the orphan's timer keeps its deadline.
  if (p.orphaned) return settle_orphan(p.rto_timer.owner, now, false);
  // Progress (the left edge moved or new PSNs were SACKed) resets the backoff and
  // restarts the timer; a duplicate ACK does neither.
  const bool progress = acked_bytes > 0 || p.snd_una != una_before;
  if (progress) p.backoff = 0;
  if (p.snd_una == p.snd_nxt) {
    timers_.cancel(p.rto_timer);
  } else if (progress) {
    arm_rto(p, now);
  }
  detect_losses(p);
  if (p.run_head != nullptr || p.rtx_count > 0 || p.state == PdcState::kClosing) {
    mark_ready(p.rto_timer.owner);
  }
}

void Pds::on_nack(PeerIndex peer, const wire::PdsNack& nack, Time now) {
  ++stats_.nacks_received;
  if (nack.flags & wire::nack_flags::kRudi) return;  // RUDI NACKs go to the RUDI tracker
  Pdc* pp = pdc_for_ack(peer, nack.dpdcid, nack.spdcid);
  if (pp == nullptr) {
    ++stats_.bad_packets;
    return;
  }
  Pdc& p = *pp;
  const uint32_t index = p.rto_timer.owner;
  const bool in_window = psn_diff(nack.psn, p.snd_una) >= 0 && psn_diff(p.snd_nxt, nack.psn) > 0;
  TxSlot* s = in_window ? &p.tx[ring_index(nack.psn)] : nullptr;
  switch (nack.code) {
    case wire::NackCode::kTrimmed:
    case wire::NackCode::kTrimmedLastHop:
      if (s == nullptr || !s->in_flight) return;
      p.cc->on_nack(cc::NackKind::kTrimmed, now);
      p.paths->on_feedback(s->entropy, paths::Feedback::kNack);
      // The target answered, so the peer and a path to it are alive: a trim is
      // congestion, not a failure, and must not use up the retries that detect a dead
      // peer (a long incast trims one packet many times; the simulator found it failing
      // live peers after 12 trims).
      s->retries = 0;
      if (!s->rtx_queued && !s->sacked) ++stats_.trim_retransmits;
      queue_retransmit(p, nack.psn);
      return;
    case wire::NackCode::kNoPdcAvailable:
      // The target's table is full; it is making room (pds_reclaim.cc). As with a
      // refusal for room below, the packet leaves the congestion window, keeps its
      // retries and goes again at the next RTO, which does not back off for it; a
      // target still full cfg.pdc_wait after its first refusal fails the PDC with
      // kNoPdcAvailable (on_rto).
      if (p.state != PdcState::kSynSent || s == nullptr || !s->in_flight || s->sacked) return;
      // The SYN reached the target on its EV and the NACK came back on it: that path
      // works both ways, and the resend should take it. Knowing no good EV otherwise, a
      // refused PDC's resends explored at random; with one of two paths dead a PSN's
      // twelve tries went ten times to it and failed the PDC (spray-transfer seed 8:
      // REPS, 6 hosts, 3 PDCs, 5 % loss, path down). Unless it went as two copies: the
      // NACK does not say which one arrived.
      if (s->twin != kTwinSent) p.paths->on_feedback(s->entropy, paths::Feedback::kGood);
      if (!p.syn_refused) {
        p.syn_refused = true;
        p.syn_refused_at = now;
      }
      // The target answered, so earlier timeouts were not its silence: the resends come a
      // plain RTO apart, not a backed-off one, and keep the turn the target holds for them.
      p.backoff = 0;
      s->retries = 0;
      if (!s->refused) {
        s->refused = true;
        p.inflight_bytes -= std::min(p.inflight_bytes, s->bytes);
      }
      detour_answers(index);  // the peer's room may wait for them
      return;
    case wire::NackCode::kInvalidDpdcid:
      // The answer to our CLOSE_REQ (pds_reclaim.cc) when the initiator no longer knows
      // the PDC: an idle target PDC we asked about is an orphan, and freeing it loses
      // nothing.
      if (s == nullptr && !p.initiator && p.close_asked.ps != 0 && reclaimable(p)) {
        ++stats_.orphan_pdcs_freed;
        free_pdc(index);
        return;
      }
      // A PDC the peer opened and has since failed: what we sent on it goes again on a
      // PDC of ours, if the peer is known not to have delivered it (pds_orphan.cc).
      if (s != nullptr && !p.initiator) {
        const auto word = static_cast<wire::ForgottenPsn>(nack.vendor_code);
        on_orphan_nack(index, *s, nack.psn,
                       word <= wire::ForgottenPsn::kDelivered ? word : wire::ForgottenPsn::kNoWord,
                       now);
        return;
      }
      [[fallthrough]];
    case wire::NackCode::kInvalidSyn:
    case wire::NackCode::kPdcModeMismatch:
      if (s != nullptr) {
        fail_pdc(index, {.why = PdcFailure::kUnknownAtPeer, .nack = nack.code}, now);
      }
      return;
    case wire::NackCode::kClosing:
      if (s != nullptr) s->retries = 0;  // the target is busy; the RTO retries the CLOSE
      return;
    case wire::NackCode::kNoSesMessageAvailable:
    case wire::NackCode::kNoResource:
    case wire::NackCode::kNoPacketBuffer:
      p.cc->on_nack(cc::NackKind::kOther, now);
      // The target is alive and refused for want of room, which it regains as its
      // messages finish: like a trim, not a sign of death, so it must not use up the
      // retries (a chaos run with 4 message slots failed live PDCs after 12 refusals).
      // Nor is the packet in the network any more: its bytes leave the congestion
      // window, or refused packets could fill it and keep out the very packets (our
      // responses to the target) that would make room there. The RTO resends it.
      if (s == nullptr || !s->in_flight || s->sacked) return;
      if (s->twin != kTwinSent) {  // as for NO_PDC_AVAIL
        p.paths->on_feedback(s->entropy, paths::Feedback::kGood);
      }
      s->retries = 0;
      if (!s->refused) {
        s->refused = true;
        p.inflight_bytes -= std::min(p.inflight_bytes, s->bytes);
      }
      detour_answers(index);  // the peer's room may wait for them (pds_answer_detour.cc)
      return;
    default:
      return;  // PSN_OOR_WINDOW and the rest: the RTO covers them
  }
}

// A timeout resends only the oldest overdue PSN, asking for an ACK (a tail-loss probe,
// as TCP's RTO does). Its ACK tells what really arrived: when only ACKs were lost (a dead
// return path) the cumulative ACK jumps and nothing else is resent; when data was lost,
// RACK marks everything sent before the probe lost and it goes out at once. Resending the
// whole window here instead would duplicate it every time an ACK is lost.
void Pds::on_rto(uint32_t index, Time now) {
  if (!pdcs_.in_use(index)) return;
  Pdc& p = pdcs_[index];
  if (p.orphaned) return settle_orphan(index, now, true);  // its deadline
  if (p.snd_una == p.snd_nxt) return;
  const bool syn_refused = p.state == PdcState::kSynSent && p.syn_refused;
  if (syn_refused && now - p.syn_refused_at >= cfg_.pdc_wait && !p.carries_answer) {
    fail_pdc(index, {.why = PdcFailure::kPeerStayedFull}, now);
    return;
  }
  ++stats_.timeouts;
  const Time overdue = now - current_rto(p);
  bool lost = false;        // a packet overdue, not only refused ones
  bool maybe_held = false;  // ... but one whose ACK its target may be holding
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    const TxSlot& s = p.tx[ring_index(psn)];
    if (!s.in_flight || s.sacked || s.rtx_queued || s.refused) continue;  // refused: below
    if (s.sent > overdue) {
      if (!s.retransmitted) break;  // as in detect_losses: later first sends are later still
      continue;
    }
    // Sent without ACK-requested, its ACK waits for what the target sends next
    // (TxSlot::ack_may_wait), and a target that went off to compute after receiving it
    // makes no step for a while: no sign of loss yet. It is resent, asking, without
    // blaming its path or the congestion window; its next timeout is a loss as any.
    maybe_held = s.ack_may_wait && !s.retransmitted;
    if (!maybe_held) p.paths->on_feedback(s.entropy, paths::Feedback::kTimeout);
    queue_retransmit(p, psn);
    ++stats_.timeout_retransmits;
    lost = true;
    break;
  }
  // Packets refused for room are not in the network, so resending them all at once
  // duplicates nothing; one per timeout would take a backed-off RTO each.
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    const TxSlot& s = p.tx[ring_index(psn)];
    if (s.refused && s.in_flight && !s.sacked && !s.rtx_queued) queue_retransmit(p, psn);
  }
  // Back off, unless all this timeout does is send again a SYN the target refused for
  // want of a PDC: it is making room, and a backed-off SYN would miss it for long.
  if ((lost || !syn_refused) && !maybe_held) {
    p.cc->on_timeout(now);
    ++p.backoff;
  }
  arm_rto(p, now);
}

void Pds::on_timers(Time now) {
  now_ = now;
  timers_.expire(now, [&](uint32_t owner) {
    if (owner == kWaitTimerOwner) {
      on_wait_timer(now);
    } else if ((owner & kPaceTimerBit) == 0) {
      on_rto(owner, now);
    } else if (pdcs_.in_use(owner & ~kPaceTimerBit)) {
      mark_ready(owner & ~kPaceTimerBit);  // its pacing gap has passed
    }
  });
}

}  // namespace spray::pds
