// The initiator side of SES, after sending: what PDS reports (packets acknowledged,
// messages failed, peers failed) finishes messages, once their responses are in too
// (ses_rx.cc takes those), and finished messages become completions. A failed send or
// write is followed by its MSG_ERR.
#include <algorithm>

#include "transport/ses/ses.h"

namespace spray::ses {

void Ses::maybe_finish(uint32_t slot) {
  TxMessage& m = tx_[slot];
  if (m.packets_acked < m.packet_count || m.read_responses > 0) return;
  if (m.needs_response && !m.response_received) {
    if (!m.awaiting_listed) {
      m.awaiting_listed = true;
      awaiting_.push_back({slot, m.peer, m.msg_id});
    }
    return;
  }
  finish_tx(slot);
}

void Ses::peers_we_wait_on(std::vector<PeerIndex>& out, Time now) {
  out.clear();
  auto keep = awaiting_.begin();
  for (const ListedMessage& a : awaiting_) {
    const bool live = tx_.in_use(a.slot) && tx_[a.slot].awaiting_listed &&
                      tx_[a.slot].peer == a.peer && tx_[a.slot].msg_id == a.msg_id &&
                      !tx_[a.slot].response_received && !tx_[a.slot].failing;
    if (!live) continue;
    *keep++ = a;
    if (std::find(out.begin(), out.end(), a.peer) == out.end()) out.push_back(a.peer);
  }
  awaiting_.erase(keep, awaiting_.end());
  stalled_senders(out, now);
}

void Ses::finish_tx(uint32_t slot) {
  TxMessage& m = tx_[slot];
  if (m.needs_response) tx_by_id_.erase(id_key(m.peer, m.msg_id));
  if (m.kind == TxKind::kSkip) {
    std::erase(skips_sent_, std::pair{m.peer, m.msg_id});
  }
  if (m.kind == TxKind::kProbe) {
    probing_[m.peer] = 0;
    --probes_in_flight_;
  }
  if (m.kind == TxKind::kOrderAnswer) answering_order_[m.peer] = 0;
  if (m.kind == TxKind::kRendezvous) {
    if (cfg_.direct_reads) readable_key_changes_.push_back({m.rendezvous_key, false});
    regions_.remove(m.rendezvous_key);
    tx_by_rendezvous_key_.erase(m.rendezvous_key);
    release_read_response_promise(m);  // read directly (shared memory), or never read
    if (m.read_responses > 0) detach_read_responses(slot);  // failing: the buffer goes back now
  }
  // A read response of a rendezvous send: the send may complete once the last is done.
  uint32_t released_send = kNone;
  if (m.kind == TxKind::kReadResponse && m.rendezvous_tx != kNone && !m.source_gone &&
      tx_.in_use(m.rendezvous_tx) && tx_[m.rendezvous_tx].read_responses > 0) {
    released_send = m.rendezvous_tx;
    --tx_[released_send].read_responses;
  }
  const uint32_t rendezvous_rx = m.rendezvous_rx;
  const Status status = m.status;
  if (m.serves_remote_read && status == Status::kOk && cfg_.report_remote_access) {
    (void)report_remote_access(OpKind::kRemoteRead, m.peer, m.key_or_tag, m.length);
  }
  if (m.user_op) {
    Completion& c = completions_.emplace();
    c.context = m.context;
    c.op = m.op;
    c.status = status;
    c.length = status == Status::kOk ? m.length : 0;
    c.peer = m.peer;
  }
  tx_.release(slot);
  if (rendezvous_rx != kNone) finish_rendezvous_receive(rendezvous_rx, status, now_);
  if (released_send != kNone && tx_.in_use(released_send) &&
      tx_[released_send].read_responses == 0) {
    maybe_finish(released_send);
  }
}

void Ses::detach_read_responses(uint32_t send) {
  for (uint32_t i = 0; i < tx_.capacity() && tx_[send].read_responses > 0; ++i) {
    if (!tx_.in_use(i)) continue;
    TxMessage& r = tx_[i];
    if (r.kind != TxKind::kReadResponse || r.rendezvous_tx != send || r.source_gone) continue;
    r.source_gone = true;  // its packets go out empty until PDS gives up on the peer
    r.src = nullptr;
    --tx_[send].read_responses;
  }
}

Time Ses::skip_due(uint8_t failed_tries, Time now) {
  if (failed_tries < kSkipTriesAtOnce) return now;
  const uint32_t doublings = std::min<uint32_t>(failed_tries - kSkipTriesAtOnce, 16);
  return now + std::min(Duration{kSkipFirstLateGap.ps << doublings}, kSkipMaxLateGap);
}

void Ses::on_rudi_response(pds::PacketRef ref, wire::ReturnCode rc) {
  const uint32_t slot = live_slot(ref.message);
  if (slot == kNone) {
    ++stats_.stale_tickets;
    return;
  }
  TxMessage& m = tx_[slot];
  if (m.failing) return;
  if (rc != wire::ReturnCode::kOk && m.status == Status::kOk)
    m.status = status_from_return_code(rc);
  ++m.packets_acked;
  maybe_finish(slot);
}

void Ses::datagram_sent(uint32_t message) {
  const uint32_t slot = live_slot(message);
  if (slot == kNone) return;
  tx_[slot].packets_acked = 1;
  maybe_finish(slot);
}

void Ses::on_acked(std::span<const pds::PacketRef> refs) {
  for (const pds::PacketRef& r : refs) {
    const uint32_t slot = live_slot(r.message);
    if (slot == kNone) {
      ++stats_.stale_tickets;
      continue;
    }
    TxMessage& m = tx_[slot];
    if (m.kind == TxKind::kDatagram) continue;
    incarnations_.acknowledged_by(m.peer);
    ++m.packets_acked;
    maybe_finish(slot);
  }
}

// Two phases: mark every failed message first, then finish them, so a slot released
// (and perhaps reused by a response) in phase two cannot be hit by a later report.
void Ses::on_failed(std::span<const pds::FailedMessage> failed, Time now) {
  finishing_.clear();
  for (const pds::FailedMessage& f : failed) {
    const uint32_t slot = live_slot(f.message);
    if (slot == kNone) {
      ++stats_.stale_tickets;
      continue;
    }
    if (tx_[slot].failing) continue;
    TxMessage& m = tx_[slot];
    m.failing = true;
    m.status = f.status;
    finishing_.push_back(slot);
    // A MSG_ERR ends what the target holds of it: a send's id in its order, or a write
    // that arrived in part (Ses::on_skip).
    const bool target_holds = m.kind == TxKind::kEager || m.kind == TxKind::kRendezvous ||
                              (m.kind == TxKind::kWrite && !m.over_rudi);
    if (m.kind == TxKind::kHello) incarnations_.hello_failed(m.peer);
    if (target_holds) {
      skips_.push_back({m.peer, m.msg_id, 0, now});
    } else if (m.kind == TxKind::kSkip) {
      const auto tries = static_cast<uint8_t>(m.skip_failed_tries + 1);
      skips_.push_back({m.peer, m.msg_id, tries, skip_due(tries, now)});
    } else {
      continue;
    }
    if (skip_timed(skips_.back()))
      next_skip_due_ = std::min(next_skip_due_, skips_.back().not_before);
  }
  for (uint32_t slot : finishing_) {
    if (!tx_[slot].rudi_queued) finish_tx(slot);  // else peek_rudi finishes it
  }
}

void Ses::on_peer_failed(std::span<const PeerIndex> peers, Time now) {
  if (peers.empty()) return;
  end_sends_of(peers, now);
  finishing_.clear();
  for (uint32_t i = 0; i < tx_.capacity(); ++i) {
    if (!tx_.in_use(i)) continue;
    TxMessage& m = tx_[i];
    if (m.failing || !m.needs_response || m.response_received) continue;
    if (std::find(peers.begin(), peers.end(), m.peer) == peers.end()) continue;
    if (m.packets_acked < m.packet_count) continue;  // PDS still owns packets; it reports
    m.failing = true;
    m.status = Status::kPeerUnreachable;
    finishing_.push_back(i);
  }
  for (uint32_t slot : finishing_) finish_tx(slot);
}

}  // namespace spray::ses
