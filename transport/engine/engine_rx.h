// Engine receive path: dispatch each received packet by PDS type.
// Included by engine.h; not a standalone header.
#pragma once

namespace spray::engine {

template <dp::Datapath D>
size_t Engine<D>::progress(Time now) {
  now_ = now;
  if (!stalled_rod_.empty()) {
    // Retry ROD lines that SES could not take last time (it may have room now).
    std::vector<uint32_t> retry;
    retry.swap(stalled_rod_);
    for (uint32_t pdc : retry) {
      if (pds_.pdc(pdc) != nullptr) deliver_in_order(pdc, now);
    }
  }
  const size_t received = dp_.rx_burst(rx_batch_.data(), rx_batch_.size());
  size_t to_free = 0;
  for (size_t i = 0; i < received; ++i) {
    dp::PacketBuf* buf = rx_batch_[i];
    const PeerIndex peer = peers_.find(buf->peer).value_or(pds::kNoPeer);  // once a packet
    if (!open_packet(buf, peer) || !handle_packet(buf, peer, now)) free_batch_[to_free++] = buf;
  }
  if (to_free > 0) dp_.free(free_batch_.data(), to_free);
  stats_.rx_packets += received;
  if (!ses_.order_words().empty()) apply_order_words(now);
  pds_.flush_acks(pds::Pds::AckFlush::kRequested);
  pds_.on_timers(now);
  rudi_.on_timers(now, rudi_retransmits_, pds_.failed());
  if (now >= next_probe_) {
    next_probe_ = now + cfg_.probe_interval;
    ses_.peers_we_wait_on(probe_peers_, now);
    ses_.probe_peers(probe_peers_, now, unprobed_peers_);  // they name its incarnation
    for (PeerIndex peer : unprobed_peers_) (void)pds_.probe(peer, pds::Mode::kRud, now);
  }
  drain_reports(now);
  ses_.resume_tx_waiters(now);  // tx slots freed by what was just reported
  if constexpr (kDirectReads) copy_direct_reads(now);
  publish_readable_keys();
  return received + transmit(now);
}

template <dp::Datapath D>
void Engine<D>::copy_direct_reads(Time now) {
  if constexpr (kDirectReads) {
    uint64_t budget = kDirectReadBytesPerProgress;
    while (budget > 0) {
      if (!direct_read_active_) {
        if (!ses_.pop_direct_read(direct_read_)) return;
        direct_read_active_ = true;
        direct_read_copied_ = 0;
      }
      ses::DirectRead& r = direct_read_;
      if (!ses_.direct_read_wanted(r)) {
        direct_read_active_ = false;
        continue;
      }
      const uint64_t chunk = std::min(budget, r.length - direct_read_copied_);
      const bool ok = dp_.read_peer_memory(peers_.address(r.peer), r.read_key,
                                           r.remote_address + direct_read_copied_,
                                           r.local + direct_read_copied_, chunk);
      if (ok) {
        direct_read_copied_ += chunk;
        budget -= chunk;
      }
      if (!ok || direct_read_copied_ == r.length) {
        direct_read_active_ = false;
        ses_.direct_read_done(r, ok, now);
      }
    }
  }
}

// Peers' words that every send of theirs before an id has ended there
// (transport/ses/ses_order_query.cc): applied only while PDS holds nothing of that peer's
// that SES has not seen, since PDS acknowledges held ROD packets before SES takes them.
// A word not applied is dropped; the next probe asks again.
template <dp::Datapath D>
void Engine<D>::apply_order_words(Time now) {
  for (const auto& [peer, before] : ses_.order_words()) {
    if (!pds_.holds_unseen_from(peer)) ses_.pass_over_ended_ids(peer, before, now);
  }
  ses_.clear_order_words();
}

template <dp::Datapath D>
void Engine<D>::drain_reports(Time now) {
  ses_.take_pds_reports(now);
  for (uint64_t handle : pds_.orphaned_buffers()) {
    auto* buf = reinterpret_cast<dp::PacketBuf*>(handle);
    dp_.free(&buf, 1);
  }
  pds_.orphaned_buffers().clear();
}

template <dp::Datapath D>
bool Engine<D>::open_packet(dp::PacketBuf* buf, PeerIndex peer) {
  if (!tss_) return true;
  static_assert(pds::kNoPeer == tss::SecureChannels::kUnknownPeer);
  const bool trimmed = (buf->flags & dp::PacketBuf::kTrimmed) != 0;
  return tss_->open(peer, buf->peer, {buf->data, buf->len}, trimmed).result !=
         tss::OpenResult::kDropped;
}

template <dp::Datapath D>
bool Engine<D>::handle_packet(dp::PacketBuf* buf, PeerIndex peer, Time now) {
  const std::span<const uint8_t> in = packet_bytes(*buf);
  wire::Prologue prologue;
  if (wire::decode_prologue(in, prologue) != wire::DecodeError::kOk) {
    ++stats_.rx_malformed;
    return false;
  }
  if (peer == pds::kNoPeer) {
    // Connectionless: anyone may open a PDC to us, but only from our job. A stranger of
    // another job does not even take a place in the peer table.
    if (!of_our_job(ses_bytes(in, prologue))) return false;
    peer = learn_peer(buf->peer);
    if (tss_) tss_->settle(peer);  // the channel its packet opened with, if learned
    if (peer == pds::kNoPeer) {
      ++stats_.rx_unknown_peer;
      return false;
    }
  }
  bool kept = false;
  bool ok = true;
  switch (prologue.type) {
    case wire::PdsType::kRudRequest:
    case wire::PdsType::kRodRequest:
    case wire::PdsType::kRudCcRequest:
    case wire::PdsType::kRodCcRequest:
      kept = handle_request(peer, buf, in, now);
      break;
    case wire::PdsType::kAck:
    case wire::PdsType::kAckCc: {
      wire::PdsAck ack;
      ok = wire::decode(in, ack) == wire::DecodeError::kOk;
      if (ok) {
        pds_.on_ack(peer, ack, now,
                    kHidesArrivalEntropy ? std::nullopt : std::optional<uint16_t>{buf->entropy});
      }
      break;
    }
    case wire::PdsType::kNack: {
      wire::PdsNack nack;
      ok = wire::decode(in, nack) == wire::DecodeError::kOk;
      if (ok && nack.code == wire::NackCode::kUnexpectedEvent &&
          nack.vendor_code == wire::kStaleIncarnation) {
        on_stale_incarnation_nack(peer, nack, now);
      } else if (ok && (nack.flags & wire::nack_flags::kRudi)) {
        if (nack.code == wire::NackCode::kTrimmed)
          rudi_.on_nack(peer, nack.psn, now, rudi_retransmits_);
      } else if (ok) {
        pds_.on_nack(peer, nack, now);
      }
      break;
    }
    case wire::PdsType::kCtrl: {
      wire::PdsCtrl ctrl;
      ok = wire::decode(in, ctrl) == wire::DecodeError::kOk;
      if (ok) pds_.on_ctrl(peer, ctrl, buf->entropy, now);
      break;
    }
    case wire::PdsType::kUudRequest: {
      wire::PdsUud uud;
      size_t consumed = 0;
      ok = wire::decode(in, uud, &consumed) == wire::DecodeError::kOk;
      if (ok && of_our_job(in.subspan(consumed)) &&
          admit_sender(peer, uud.next, in.subspan(consumed), nullptr, buf->entropy, now)) {
        // Best effort: a datagram SES cannot take is simply dropped, like a lost one.
        const auto r = ses_.on_packet(peer, uud.next, in.subspan(consumed), true, now);
        ok = r != ses::RxResult::kMalformed;
      }
      break;
    }
    case wire::PdsType::kRudiRequest:
    case wire::PdsType::kRudiResponse: {
      wire::PdsRudi rudi;
      size_t consumed = 0;
      ok = wire::decode(in, rudi, &consumed) == wire::DecodeError::kOk;
      if (ok && of_our_job(in.subspan(consumed)) &&
          (rudi.response ||
           admit_sender(peer, rudi.next, in.subspan(consumed), nullptr, buf->entropy, now))) {
        handle_rudi(peer, rudi, in.subspan(consumed), *buf, now);
      }
      break;
    }
    default:
      ok = false;  // TSS and the CCX forms are not accepted by this engine yet
      break;
  }
  if (!ok) ++stats_.rx_malformed;
  drain_reports(now);
  return kept;
}

template <dp::Datapath D>
std::span<const uint8_t> Engine<D>::ses_bytes(std::span<const uint8_t> in,
                                              const wire::Prologue& prologue) {
  size_t consumed = 0;
  bool decoded = false;
  switch (prologue.type) {
    case wire::PdsType::kRudRequest:
    case wire::PdsType::kRodRequest:
    case wire::PdsType::kRudCcRequest:
    case wire::PdsType::kRodCcRequest: {
      wire::PdsRequest h;
      decoded = wire::decode(in, h, &consumed) == wire::DecodeError::kOk;
      break;
    }
    case wire::PdsType::kUudRequest: {
      wire::PdsUud h;
      decoded = wire::decode(in, h, &consumed) == wire::DecodeError::kOk;
      break;
    }
    case wire::PdsType::kRudiRequest:
    case wire::PdsType::kRudiResponse: {
      wire::PdsRudi h;
      decoded = wire::decode(in, h, &consumed) == wire::DecodeError::kOk;
      break;
    }
    default:
      break;
  }
  return decoded ? in.subspan(consumed) : std::span<const uint8_t>{};
}

template <dp::Datapath D>
bool Engine<D>::handle_request(PeerIndex peer, dp::PacketBuf* buf, std::span<const uint8_t> in,
                               Time now) {
  wire::PdsRequest h;
  size_t consumed = 0;
  if (wire::decode(in, h, &consumed) != wire::DecodeError::kOk) {
    ++stats_.rx_malformed;
    return false;
  }
  if (!of_our_job(in.subspan(consumed))) return false;
  if (!admit_sender(peer, h.next, in.subspan(consumed), &h, buf->entropy, now)) return false;
  const bool trimmed = (buf->flags & dp::PacketBuf::kTrimmed) != 0;
  const bool ecn = (buf->flags & dp::PacketBuf::kEcnCe) != 0;
  pds::RxClass c = pds_.classify_request(peer, h, trimmed, buf->entropy, now);
  if (c.verdict == pds::RxVerdict::kDeliver && h.ordered &&
      behind_a_stalled_line(peer, c.open_on_commit ? kNoPdc : c.pdc)) {
    // Next in its own line, but its peer's older PDC still holds packets that SES
    // refused: held, it waits behind them (deliver_in_order), so that the peer's ordered
    // operations go up in the order it issued them across its PDCs too.
    c.verdict = pds::RxVerdict::kHold;
  }
  switch (c.verdict) {
    case pds::RxVerdict::kDeliver:
      switch (ses_.on_packet(peer, h.next, in.subspan(consumed), false, now)) {
        case ses::RxResult::kAccepted:
          pds_.commit_request(c, ecn);
          if (h.ordered) deliver_in_order(c.pdc, now);
          break;
        case ses::RxResult::kNoResource:
          ++stats_.rx_refused;
          pds_.refuse_request(peer, h, wire::NackCode::kNoSesMessageAvailable);
          break;
        case ses::RxResult::kMalformed:
          ++stats_.rx_malformed;  // not committed: a genuine sender will retransmit
          break;
      }
      pds_.request_handled();  // answers SES made meanwhile go on the PDC just opened
      return false;
    case pds::RxVerdict::kHold:
      // Held until its predecessors arrive: a datapath that lends receive buffers (UDP
      // GRO) moves it out of the shared buffer first, so the hold pins nothing else.
      if constexpr (requires { dp_.keep(buf); }) buf = dp_.keep(buf);
      pds_.commit_request(c, ecn, reinterpret_cast<uint64_t>(buf));
      deliver_in_order(c.pdc, now);  // a held line may be unblocked by this packet
      return true;
    case pds::RxVerdict::kDuplicate:
    case pds::RxVerdict::kReject:
      return false;
  }
  return false;
}

// A request's incarnation words (transport/ses/ses_incarnation.cc), read before PDS
// sees it: a peer that restarted loses what its predecessor left (its PDCs first, so
// that the new one's SYNs open fresh ones), a late packet of that predecessor is
// dropped, and a request meant for a predecessor of ours is refused, over a PDC with a
// NACK that tells the sender our incarnation (`over_pdc`: its PDS header; null for UUD
// and RUDI, whose requests are just dropped).
template <dp::Datapath D>
bool Engine<D>::admit_sender(PeerIndex peer, wire::NextHeader next, std::span<const uint8_t> ses,
                             const wire::PdsRequest* over_pdc, uint16_t entropy, Time now) {
  uint16_t incarnation = 0;
  const bool pdc = over_pdc != nullptr;
  ses::SenderIncarnation said = ses_.check_incarnation(peer, next, ses, pdc, now, incarnation);
  if (said == ses::SenderIncarnation::kRestarted) {
    restart_peer(peer, incarnation, now);
    said = ses_.check_incarnation(peer, next, ses, pdc, now, incarnation);  // as the new one's
  }
  switch (said) {
    case ses::SenderIncarnation::kCurrent:
      return true;
    case ses::SenderIncarnation::kStaleView:
      // A resend of a packet we took is ours, whatever its words say now: its sender
      // may have learned of a predecessor of ours meanwhile (a late packet of it) and
      // names that one. Refused, it failed the send we had delivered
      // (restart_mid_flight_test seed 2357, 2026-12-08); as a duplicate, it is acked.
      if (over_pdc != nullptr && pds_.received_before(peer, *over_pdc)) return true;
      if (over_pdc != nullptr) {
        pds_.refuse_request(peer, *over_pdc, entropy, wire::NackCode::kUnexpectedEvent,
                            wire::kStaleIncarnation,
                            (uint32_t{incarnation} << 16) | ses_.incarnation());
      }
      return false;
    default:
      return false;
  }
}

// The peer refused a request as meant for its predecessor: it restarted, and the NACK's
// payload is the refused request's sender's incarnation (high half) and the peer's now
// (low half). Acted on only when the request was ours (not a predecessor's of ours that
// arrived late) and the NACK names a PDC of ours with the peer, and once: a NACK that
// repeats the incarnation we know is a late copy, unless we learned that incarnation
// from a request of the peer's that did not name us after its predecessor had
// acknowledged ours (Ses::peer_may_lack_our_order). Then the peer restarted before we
// could tell, and spoke first: its order to us is already its own, and only ours to it
// starts again.
template <dp::Datapath D>
void Engine<D>::on_stale_incarnation_nack(PeerIndex peer, const wire::PdsNack& nack, Time now) {
  const auto refused_sender = static_cast<uint16_t>(nack.payload >> 16);
  const auto incarnation = static_cast<uint16_t>(nack.payload & 0xffff);
  if (refused_sender != ses_.incarnation() || incarnation == 0 || !pds_.names_our_pdc(peer, nack)) {
    return;
  }
  if (incarnation != ses_.peer_incarnation(peer)) {
    restart_peer(peer, incarnation, now);
  } else if (ses_.peer_may_lack_our_order(peer)) {
    pds_.fail_our_pdcs_with(peer, now);
    ses_.on_peer_lost_our_order(peer, now);
    drain_reports(now);
  }
}

template <dp::Datapath D>
void Engine<D>::restart_peer(PeerIndex peer, uint16_t incarnation, Time now) {
  pds_.forget_peer(peer, now);
  ses_.on_peer_restarted(peer, incarnation, now);
  drain_reports(now);  // ROD buffers its PDCs held go back to the datapath
}

// ROD: hands SES every held packet that the last commit made contiguous, in PSN order.
// If SES has no room, the packet goes back to the head of the line and the PDC is
// retried on the next progress: ordered delivery stalls, it never drops.
template <dp::Datapath D>
void Engine<D>::deliver_in_order(uint32_t pdc, Time now) {
  const PeerIndex from = pds_.pdc(pdc)->peer;
  if (behind_a_stalled_line(from, pdc)) {
    note_stalled(pdc);
    ++stats_.rx_rod_behind;
    return;
  }
  uint64_t handle = 0;
  while (pds_.pop_in_order(pdc, handle)) {
    auto* held = reinterpret_cast<dp::PacketBuf*>(handle);
    const std::span<const uint8_t> in = packet_bytes(*held);
    wire::PdsRequest h;
    size_t consumed = 0;
    (void)wire::decode(in, h, &consumed);  // decoded once already when it arrived
    const ses::RxResult r = ses_.on_packet(from, h.next, in.subspan(consumed), false, now);
    if (r == ses::RxResult::kNoResource) {
      pds_.unpop_in_order(pdc, handle);
      note_stalled(pdc);
      ++stats_.rx_rod_stalls;
      return;
    }
    if (r == ses::RxResult::kMalformed) ++stats_.rx_rod_dropped;
    dp_.free(&held, 1);
  }
}

// Whether another ROD PDC from `peer` is stalled ahead of `pdc` (kNoPdc: one its SYN is
// about to open). A peer sends on one ROD PDC at a time, but when it closes one (idle:
// every packet acknowledged), packets we acknowledged may still wait here for SES room,
// and its next PDC's packets must not overtake them: an atomic or write issued later
// would be applied first. Only PDCs that stalled earlier are in stalled_rod_ when this
// runs (progress retries them oldest first and puts back those still stalled), so the
// older line always goes first. Costs nothing while no line is stalled.
template <dp::Datapath D>
bool Engine<D>::behind_a_stalled_line(PeerIndex peer, uint32_t pdc) const {
  for (uint32_t other : stalled_rod_) {
    if (other == pdc) continue;
    const pds::Pdc* p = pds_.pdc(other);
    if (p != nullptr && p->peer == peer && !p->rx_drained()) return true;
  }
  return false;
}

template <dp::Datapath D>
void Engine<D>::note_stalled(uint32_t pdc) {
  if (std::find(stalled_rod_.begin(), stalled_rod_.end(), pdc) == stalled_rod_.end()) {
    stalled_rod_.push_back(pdc);
  }
}

}  // namespace spray::engine
