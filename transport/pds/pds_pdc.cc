// PDC lifecycle: open (initiator on first send, target on SYN), lookup, close, fail.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

namespace {
constexpr size_t kMaxControlQueue = 65536;  // beyond this, control packets are dropped
}  // namespace

Pds::Pds(const PdsConfig& config)
    : cfg_(config),
      window_(std::bit_ceil(std::max<uint32_t>(config.window_packets, 64))),
      pdcs_(config.max_pdcs),
      by_peer_(config.max_pdcs),
      answers_by_peer_(config.max_pdcs),
      by_id_(config.max_pdcs),
      by_syn_(config.max_pdcs),
      closed_syn_(std::max<uint32_t>(config.closed_pdcs_remembered, 1)),
      target_pdcs_of_peer_(config.max_pdcs),
      closed_ring_(std::max<uint32_t>(config.closed_pdcs_remembered, 1), 0),
      timers_(Duration::microseconds(1), std::max<uint32_t>(config.timer_slots, 1)),
      rng_(config.seed) {
  wait_timer_.owner = kWaitTimerOwner;
  ready_.reserve(config.max_pdcs);
  ack_list_.reserve(config.max_pdcs);
  acked_.reserve(config.report_reserve ? config.report_reserve : window_ * 2);
  control_.reserve(config.control_reserve);
  failed_.reserve(config.report_reserve ? config.report_reserve : window_);
  failed_peers_.reserve(16);
}

size_t Pds::memory_bytes() const {
  size_t total = sizeof(*this) + by_peer_.memory_bytes() + answers_by_peer_.memory_bytes() +
                 by_id_.memory_bytes() + by_syn_.memory_bytes() + closed_syn_.memory_bytes() +
                 pdcs_.capacity() * (sizeof(Pdc) + sizeof(uint32_t) + 1) +
                 waiting_.capacity() * sizeof(WaitingRuns) +
                 peer_base_rtt_.capacity() * sizeof(Duration) +
                 failed_pdcs_.capacity() * (sizeof(FailedPdc) + window_ / 8);
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i)) continue;
    const Pdc& p = pdcs_[i];
    total += p.tx.capacity() * sizeof(TxSlot) + p.rtx.capacity() * sizeof(uint32_t) +
             p.rx_bitmap.capacity() * 8 + p.rod_held.capacity() * 8;
  }
  return total;
}

void Pds::set_peer_base_rtt(PeerIndex peer, Duration base_rtt) {
  if (peer == kNoPeer) return;
  if (peer >= peer_base_rtt_.size()) {
    if (base_rtt.ps <= 0) return;  // the default already
    peer_base_rtt_.resize(size_t{peer} + 1);
  }
  peer_base_rtt_[peer] = base_rtt.ps > 0 ? base_rtt : Duration{};
}

void Pds::take_local_id(uint32_t index) {
  while (by_id_.find(next_local_id_) || next_local_id_ == 0) ++next_local_id_;
  pdcs_[index].local_id = next_local_id_++;
  by_id_.insert(pdcs_[index].local_id, index);
}

Pdc* Pds::pdc_by_local_id(uint16_t id) {
  const auto index = by_id_.find(id);
  return index ? &pdcs_[*index] : nullptr;
}

bool Pds::open_pdc(PeerIndex peer, Mode mode, bool initiator, uint32_t& index, Time since) {
  if (initiator) {
    if (initiator_pdcs_ >= own_pdc_limit()) return false;
    if (target_open_pending_ && pdcs_.used() + 1 >= pdcs_.capacity()) return false;
    // A slot freed for a peer's refused SYN is its own: taking it for our sends starved
    // that SYN (4,900 refusals in 10 s between ranks with 2-PDC tables, under load).
    if (!refused_syns_.empty() && pdcs_.capacity() - pdcs_.used() <= syns_refused_before(since)) {
      return false;
    }
  }
  const auto slot = pdcs_.acquire();
  if (!slot) return false;
  index = *slot;
  Pdc& p = pdcs_[index];
  take_local_id(index);
  p.initiator = initiator;
  p.mode = mode;
  p.peer = peer;
  p.state = initiator ? PdcState::kSynSent : PdcState::kEstablished;
  // tx and rtx are sized on the first send (next_tx_now): a target PDC that only
  // receives, as most do, never needs them. Every read of them is bounded by
  // [snd_una, snd_nxt), which is empty until then.
  p.rx_bitmap.assign(window_ / 64, 0);
  if (mode == Mode::kRod) p.rod_held.assign(window_, 0);
  p.rto_timer.owner = index;
  p.pace_timer.owner = index | kPaceTimerBit;
  cc::CcConfig cc = cfg_.cc;
  if (peer < peer_base_rtt_.size() && peer_base_rtt_[peer].ps > 0) {
    cc.base_rtt = peer_base_rtt_[peer];  // a network peer of a two-path datapath
  }
  p.cc = cc::make_congestion_control(cfg_.cc_name, cc);
  if (!p.cc) p.cc = cc::make_congestion_control("nscc", cc);
  p.sends_backlog = p.cc->wants_credit();
  const paths::PathConfig path_config{cfg_.entropy_count, rng_.next(), cfg_.reps_cache};
  p.paths = paths::make_path_selector(cfg_.path_name, path_config);
  if (!p.paths) p.paths = paths::make_path_selector("reps", path_config);
  start_from_remembered_paths(p);
  if (initiator) {
    p.start_psn = static_cast<uint32_t>(rng_.next());
    p.snd_una = p.snd_nxt = p.rcv_nxt = p.rod_pop = p.start_psn;
  }
  p.last_active = now_;
  if (initiator) ++initiator_pdcs_;
  ++stats_.pdcs_opened;
  // The newest: a PDC the peer opened before may be its predecessor's (see
  // TxRun::via_peers_pdc).
  if (!initiator) answers_by_peer_.insert(pdc_key(peer, mode), index);
  if (!by_peer_.find(pdc_key(peer, mode))) {
    by_peer_.insert(pdc_key(peer, mode), index);
    if (!waiting_.empty()) adopt_waiting_runs(index);
  }
  return true;
}

void Pds::remember_paths(const Pdc& p) {
  RememberedPaths r;
  r.peer = p.peer;
  r.count = static_cast<uint8_t>(p.paths->good_entropies(r.evs));
  if (r.count == 0) return;
  for (RememberedPaths& known : remembered_) {
    if (known.peer == p.peer) {
      known = r;
      return;
    }
  }
  if (remembered_.size() < kRememberedPeers) {
    remembered_.push_back(r);
    return;
  }
  remembered_[remembered_next_] = r;
  remembered_next_ = (remembered_next_ + 1) % kRememberedPeers;
}

void Pds::start_from_remembered_paths(Pdc& p) {
  for (const RememberedPaths& r : remembered_) {
    if (r.peer != p.peer) continue;
    // Oldest first, so that the newest ends up the freshest in the selector too.
    for (size_t i = r.count; i-- > 0;) p.paths->on_feedback(r.evs[i], paths::Feedback::kGood);
    ++stats_.pdcs_with_remembered_paths;
    return;
  }
}

void Pds::finish_close(uint32_t index) {
  ++stats_.pdcs_closed;
  remember_paths(pdcs_[index]);
  free_pdc(index);
}

void Pds::free_pdc(uint32_t index) {
  Pdc& p = pdcs_[index];
  if (p.initiator) --initiator_pdcs_;
  timers_.cancel(p.rto_timer);
  timers_.cancel(p.pace_timer);
  by_id_.erase(p.local_id);
  if (auto it = by_peer_.find(pdc_key(p.peer, p.mode)); it && *it == index) {
    by_peer_.erase(pdc_key(p.peer, p.mode));
  }
  if (!p.initiator) forget_peers_pdc(index);
  drop_receive_side(index);
  p.state = PdcState::kFree;
  ready_.erase(std::remove(ready_.begin(), ready_.end(), index), ready_.end());
  p = Pdc{};
  pdcs_.release(index);
  if (!waiting_.empty()) open_for_waiting();
}

void Pds::drop_receive_side(uint32_t index) {
  Pdc& p = pdcs_[index];
  for (uint64_t& held : p.rod_held) {
    if (held != 0) orphaned_.push_back(held);
    held = 0;
  }
  if (p.credit_active) --credit_senders_;
  p.credit_active = p.credit_requested = false;
  ack_list_.erase(std::remove(ack_list_.begin(), ack_list_.end(), index), ack_list_.end());
  p.in_ack_list = p.ack_pending = p.ack_may_wait = p.ack_lost = false;
}

void Pds::forget_peers_pdc(uint32_t index) {
  const Pdc& p = pdcs_[index];
  if (auto it = answers_by_peer_.find(pdc_key(p.peer, p.mode)); it && *it == index) {
    answers_by_peer_.erase(pdc_key(p.peer, p.mode));
  }
  const uint32_t held = target_pdcs_of_peer_.find(p.peer).value_or(1);
  if (held <= 1) {
    target_pdcs_of_peer_.erase(p.peer);
  } else {
    target_pdcs_of_peer_.insert(p.peer, held - 1);
  }
  if (p.remote_known) {
    const uint64_t key = syn_key(p.peer, p.remote_id);
    by_syn_.erase(key);
    // Remember it, so that a late duplicate SYN cannot reopen it and replay data: its
    // start PSN tells such a SYN from the first of a new PDC under the same id.
    closed_syn_.erase(closed_ring_[closed_next_]);
    closed_ring_[closed_next_] = key;
    closed_syn_.insert(key, p.start_psn);
    closed_next_ = (closed_next_ + 1) % closed_ring_.size();
  }
}

bool Pds::fail_messages_on(Pdc& p, Status why) {
  bool answers_lost = false;
  for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
    const TxSlot& s = p.tx[ring_index(psn)];
    // A RUD packet SACKed was reported acknowledged then (ack_psn), and its message may
    // have finished and its SES slot gone to another: reported failed as well, it failed
    // that other message and freed its slot while its run was still queued. The slot's
    // next message then put the same run on a second PDC, which sent packets past its
    // end (a heap overflow in an all-to-all sweep of spray-transfer, seed 126).
    const bool reported = s.sacked && p.mode != Mode::kRod;
    if (s.in_flight && !reported && !is_control_ref(s.ref)) {
      failed_.push_back({s.ref.message, why});
      answers_lost = answers_lost || s.answer;
      if (s.answer) ended_answers_.push_back(s.ref.message);
    }
  }
  for (TxRun* r = p.run_head; r != nullptr;) {
    TxRun* following = r->next;
    r->next = nullptr;
    failed_.push_back({r->message, why});
    answers_lost = answers_lost || r->answer;
    if (r->answer) ended_answers_.push_back(r->message);
    r = following;
  }
  p.run_head = p.run_tail = nullptr;
  end_answers_elsewhere(p);
  return answers_lost;
}

void Pds::end_answers_elsewhere(const Pdc& failed) {
  if (ended_answers_.empty()) return;
  std::sort(ended_answers_.begin(), ended_answers_.end());
  ended_answers_.erase(std::unique(ended_answers_.begin(), ended_answers_.end()),
                       ended_answers_.end());
  const auto ended = [&](uint32_t message) {
    return std::binary_search(ended_answers_.begin(), ended_answers_.end(), message);
  };
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i) || &pdcs_[i] == &failed || pdcs_[i].peer != failed.peer) continue;
    Pdc& q = pdcs_[i];
    for (uint32_t psn = q.snd_una; psn != q.snd_nxt; ++psn) {
      TxSlot& s = q.tx[ring_index(psn)];
      if (!s.in_flight || is_control_ref(s.ref) || !ended(s.ref.message)) continue;
      s.ref = PacketRef{kProbeMessage, 0};  // resent as CTRL ACK_REQ; reported to nobody
      s.answer = false;
    }
    unlink_runs(q, [&](const TxRun* r) { return ended(r->message); });
  }
  ended_answers_.clear();
}

const char* to_string(PdcFailure why) {
  switch (why) {
    case PdcFailure::kUnanswered:
      return "a packet went unacknowledged through all its tries";
    case PdcFailure::kUnknownAtPeer:
      return "the peer does not know this PDC (it restarted, or failed its end)";
    case PdcFailure::kPeerStayedFull:
      return "the peer had no room for another PDC";
  }
  return "?";
}

void Pds::fail_pdc(uint32_t index, PdcFailureRecord cause, Time now) {
  now_ = now;
  Pdc& p = pdcs_[index];
  // A peer whose table stayed full is alive: only its PDC's messages fail, not every
  // operation waiting on it (a chaos-free 4-rank all-to-all with two PDCs per endpoint
  // reported "No route to host" for sends on other PDCs).
  const bool unreachable = cause.why != PdcFailure::kPeerStayedFull;
  // Whether an answer we owed the peer was aboard.
  const bool answers_lost =
      fail_messages_on(p, unreachable ? Status::kPeerUnreachable : Status::kNoPdcAvailable);
  const PeerIndex peer = p.peer;
  if (unreachable) failed_peers_.push_back(peer);
  ++stats_.pdcs_failed;
  switch (cause.why) {
    case PdcFailure::kUnanswered:
      ++stats_.pdcs_failed_unanswered;
      break;
    case PdcFailure::kUnknownAtPeer:
      ++stats_.pdcs_failed_unknown_at_peer;
      break;
    case PdcFailure::kPeerStayedFull:
      ++stats_.pdcs_failed_peer_full;
      break;
  }
  cause.peer = peer;
  last_failure_ = cause;
  // Not while its SYN went unanswered: the peer that then sends on it took the SYN after
  // we gave up, and our precise word would make it send its answers again to operations
  // of ours that have ended (DirectRead's read long after, a bad key).
  if (p.initiator && p.remote_known) remember_failed_pdc(p);
  free_pdc(index);
  if (unreachable && answers_lost) lost_answers_to(peer);
}

void Pds::place_parked_answers() {
  // With no target open pending, enqueue parks nothing more.
  for (const ParkedAnswer& a : parked_answers_) (void)enqueue(a.peer, a.mode, a.run, now_);
  parked_answers_.clear();
}

Status Pds::enqueue(PeerIndex peer, Mode mode, TxRun* run, Time now) {
  now_ = now;
  uint32_t index = 0;
  // Earlier sends to this peer waiting for a PDC go first.
  if (!waiting_.empty() && find_waiting(peer, mode) != waiting_.end()) {
    wait_for_pdc(peer, mode, run, now);
    return Status::kOk;
  }
  // A closing PDC is no longer in by_peer_ (begin_close removed it), so new traffic to
  // that peer opens a fresh one here, or waits for room to.
  if (run->via_peers_pdc && target_open_pending_ && peer == target_open_peer_) {
    parked_answers_.push_back({peer, mode, run});  // its PDC opens as that request commits
    return Status::kOk;
  }
  const auto peers_own =
      run->via_peers_pdc ? answers_by_peer_.find(pdc_key(peer, mode)) : std::nullopt;
  if (peers_own) {
    index = *peers_own;
  } else if (auto found = by_peer_.find(pdc_key(peer, mode))) {
    index = run->answer ? answer_pdc(*found) : *found;
  } else if (!open_pdc(peer, mode, true, index, now)) {
    wait_for_pdc(peer, mode, run, now);
    return Status::kOk;
  }
  Pdc& p = pdcs_[index];
  p.carries_answer = p.carries_answer || run->answer;
  run->next = nullptr;
  if (p.run_tail) {
    p.run_tail->next = run;
  } else {
    p.run_head = run;
  }
  p.run_tail = run;
  mark_ready(index);
  return Status::kOk;
}

Status Pds::probe(PeerIndex peer, Mode mode, Time now) {
  now_ = now;
  uint32_t index = 0;
  if (auto found = by_peer_.find(pdc_key(peer, mode))) {
    index = *found;
  } else if (!open_pdc(peer, mode, true, index, now)) {
    reclaim_idle_pdc(now, true);  // the engine probes again at its next interval
    return Status::kNoPdcAvailable;
  }
  pdcs_[index].probe_pending = true;
  mark_ready(index);
  return Status::kOk;
}

Status Pds::close(PeerIndex peer, Mode mode, Time now) {
  const auto found = by_peer_.find(pdc_key(peer, mode));
  if (!found) return Status::kInvalidArgument;
  Pdc& p = pdcs_[*found];
  if (!p.initiator) return Status::kInvalidArgument;  // only the initiator closes
  if (!p.tx_idle() || p.state != PdcState::kEstablished) return Status::kAgain;
  now_ = now;
  begin_close(*found);
  return Status::kOk;
}

void Pds::begin_close(uint32_t index) {
  Pdc& p = pdcs_[index];
  p.state = PdcState::kClosing;
  if (auto it = by_peer_.find(pdc_key(p.peer, p.mode)); it && *it == index) {
    by_peer_.erase(pdc_key(p.peer, p.mode));  // new traffic opens a new PDC
  }
  mark_ready(index);  // next_tx emits the CLOSE
}

void Pds::mark_ready(uint32_t index) {
  Pdc& p = pdcs_[index];
  if (p.in_ready_list) return;
  p.in_ready_list = true;
  ready_.push_back(index);
}

bool Pds::pop_ready(uint32_t& index) {
  while (!ready_.empty()) {
    index = ready_.back();
    ready_.pop_back();
    if (!pdcs_.in_use(index)) continue;
    pdcs_[index].in_ready_list = false;
    return true;
  }
  return false;
}

void Pds::push_control(ControlPacket c, uint32_t copies) {
  for (uint32_t i = 0; i < copies && control_.size() < kMaxControlQueue; ++i) {
    control_.push_back(c);
    c.entropy.reset();  // the other copies go on other EVs
  }
}

void Pds::send_nack(PeerIndex peer, wire::NackCode code, uint32_t psn, uint16_t spdcid,
                    uint16_t dpdcid, uint8_t vendor_code, uint32_t payload) {
  wire::PdsNack n;
  n.code = code;
  n.vendor_code = vendor_code;
  n.payload = payload;
  n.psn = psn;
  n.spdcid = spdcid;
  n.dpdcid = dpdcid;
  // A NACK about the PDC itself decides whether the peer keeps trying, waits for room
  // or gives up, and comes once, not with every packet: it goes as several copies.
  // Trims and refusals for room are per packet, and come again with the next.
  const bool lifecycle =
      code == wire::NackCode::kNoPdcAvailable || code == wire::NackCode::kInvalidDpdcid ||
      code == wire::NackCode::kInvalidSyn || code == wire::NackCode::kPdcModeMismatch ||
      code == wire::NackCode::kClosing;
  push_control({peer, n, arrival_entropy_}, lifecycle ? kControlCopies : 1);
  ++stats_.nacks_sent;
}

// An ACK/NACK names our PDC in dpdcid and the peer's in spdcid. Checks that the PDC
// exists, belongs to this peer and, once the peer's id is known, that it matches.
Pdc* Pds::pdc_for_ack(PeerIndex peer, uint16_t dpdcid, uint16_t spdcid) {
  Pdc* p = pdc_by_local_id(dpdcid);
  if (!p || p->peer != peer) return nullptr;
  if (p->remote_known && p->remote_id != spdcid) return nullptr;
  return p;
}

}  // namespace spray::pds
