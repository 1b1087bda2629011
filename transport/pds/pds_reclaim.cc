// Making room in a full PDC table. A table holds cfg.max_pdcs PDCs; an engine that
// talks to more peers than that over time (an all-to-all across a large job) would
// otherwise refuse new ones for good, since nothing closes a PDC on its own.
//
// When a PDC is needed and none is free, the least recently active idle one is closed:
// ours with CTRL CLOSE; a target PDC by asking its initiator with CTRL CLOSE_REQ (only
// the initiator may close). Until a slot frees, our sends wait here (WaitingRuns), at
// most cfg.pdc_wait (answers to the peer wait as long as it takes); a peer's SYN is
// NACKed NO_PDC_AVAIL, its RTO sends it again, and freed slots go to refused SYNs in the
// order they were refused (refused_syns_), ahead of our sends that began waiting later.
// All of this runs only when the table is full or a PDC opens: the per-packet path never
// sees it.
#include <algorithm>

#include "transport/pds/pds.h"

namespace spray::pds {

bool Pds::reclaimable(const Pdc& p) const {
  return p.state == PdcState::kEstablished && p.tx_idle() && p.rtx_count == 0 && !p.probe_pending &&
         !p.ack_pending && p.rx_drained();
}

void Pds::reclaim_idle_pdc(Time now, bool own_open) {
  constexpr uint32_t kNone = 0xffffffff;
  uint32_t own = kNone, target = kNone;
  // At its limit of PDCs of its own, an engine makes room for another only by closing
  // one of them; a freed target slot would stay reserved for peers' SYNs.
  const bool only_own = own_open && initiator_pdcs_ >= own_pdc_limit();
  size_t under_way = 0;  // closes that will free a slot: CLOSE sent, or CLOSE_REQ recently
  const auto asked_recently = [&](const Pdc& p) {
    return p.close_asked.ps != 0 && now - p.close_asked < cfg_.initial_rto;
  };
  for (uint32_t i = 0; i < pdcs_.capacity(); ++i) {
    if (!pdcs_.in_use(i)) continue;
    const Pdc& p = pdcs_[i];
    if (only_own && !p.initiator) continue;
    if (p.state == PdcState::kClosing || (!p.initiator && asked_recently(p))) {
      ++under_way;
      continue;
    }
    if (!reclaimable(p)) continue;
    uint32_t& best = p.initiator ? own : target;
    if (best == kNone || p.last_active < pdcs_[best].last_active) best = i;
  }
  // Each waiting (peer, mode) needs one slot; a refused SYN from a peer needs one.
  if (under_way >= std::max<size_t>(1, waiting_.size())) return;
  if (own != kNone) {
    ++stats_.pdcs_reclaimed;
    begin_close(own);
    return;
  }
  if (target == kNone) return;  // everything is busy: asked again on the next need
  ask_initiator_to_close(target, now);
}

void Pds::ask_initiator_to_close(uint32_t index, Time now) {
  Pdc& p = pdcs_[index];
  p.close_asked = now;
  wire::PdsCtrl ask;
  ask.type = wire::CtrlType::kCloseRequest;
  ask.flags = p.mode == Mode::kRod ? wire::ctrl_flags::kRod : 0;
  ask.psn = p.snd_nxt;  // unsequenced: it names no PSN of its own
  ask.spdcid = p.local_id;
  ask.dpdcid = p.remote_id;
  push_control({p.peer, ask, std::nullopt}, 1);  // answers nothing that arrived
  ++stats_.close_requests;
}

std::vector<Pds::WaitingRuns>::iterator Pds::find_waiting(PeerIndex peer, Mode mode) {
  return std::find_if(waiting_.begin(), waiting_.end(),
                      [&](const WaitingRuns& w) { return w.peer == peer && w.mode == mode; });
}

void Pds::wait_for_pdc(PeerIndex peer, Mode mode, TxRun* run, Time now) {
  run->next = nullptr;
  const auto it = find_waiting(peer, mode);
  if (it != waiting_.end()) {
    it->tail->next = run;
    it->tail = run;
    return;
  }
  waiting_.push_back({peer, mode, run, run, now});
  ++stats_.pdc_waits;
  if (!wait_timer_.armed()) timers_.arm(wait_timer_, now + cfg_.initial_rto);
  reclaim_idle_pdc(now, true);
}

void Pds::adopt_waiting_runs(uint32_t index) {
  Pdc& p = pdcs_[index];
  const auto it = find_waiting(p.peer, p.mode);
  if (it == waiting_.end()) return;
  // Sends for this (peer, mode) waited rather than go to the PDC, so any runs it has
  // are later ones: the waiting runs go first.
  for (const TxRun* r = it->head; r != nullptr && !p.carries_answer; r = r->next) {
    p.carries_answer = r->answer;
  }
  it->tail->next = p.run_head;
  p.run_head = it->head;
  if (p.run_tail == nullptr) p.run_tail = it->tail;
  waiting_.erase(it);
  if (waiting_.empty()) timers_.cancel(wait_timer_);
  mark_ready(index);
}

void Pds::open_for_waiting() {
  // open_pdc adopts the runs of the (peer, mode) it opens for.
  while (!waiting_.empty()) {
    const WaitingRuns& w = waiting_.front();
    uint32_t index = 0;
    if (auto found = by_peer_.find(pdc_key(w.peer, w.mode))) {
      adopt_waiting_runs(*found);  // a peer's SYN opened one meanwhile
      continue;
    }
    if (!open_pdc(w.peer, w.mode, true, index, w.since)) return;
  }
}

uint32_t Pds::fail_waiting_sends(WaitingRuns& w, Status why) {
  uint32_t failed = 0;
  TxRun* kept_head = nullptr;
  TxRun* kept_tail = nullptr;
  for (TxRun* r = w.head; r != nullptr;) {
    TxRun* following = r->next;
    r->next = nullptr;
    if (r->answer) {
      (kept_tail != nullptr ? kept_tail->next : kept_head) = r;
      kept_tail = r;
    } else {
      failed_.push_back({r->message, why});
      ++failed;
    }
    r = following;
  }
  w.head = kept_head;
  w.tail = kept_tail;
  return failed;
}

void Pds::on_wait_timer(Time now) {
  // Every (peer, mode) that waited its limit: the user's sends fail; answers to the
  // peer keep waiting (TxRun::answer), in order.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (now - it->since < cfg_.pdc_wait) {
      ++it;
      continue;
    }
    stats_.pdc_wait_failures += fail_waiting_sends(*it, Status::kNoPdcAvailable);
    if (it->head == nullptr) {
      it = waiting_.erase(it);
      continue;
    }
    it->since = now;
    ++it;
  }
  if (waiting_.empty()) return;
  // PDCs that were busy when the wait began may be idle now.
  reclaim_idle_pdc(now, true);
  timers_.arm(wait_timer_, now + cfg_.initial_rto);
}

// Without the queue a freed slot went to whichever SYN retry landed first: with four
// ranks and two PDCs each, one rank's SYN was refused for over five seconds while the
// others' retries kept taking every slot that freed.
bool Pds::syn_may_open(uint64_t key, Time now) {
  if (refused_syns_.empty()) return true;
  now_ = now;
  syns_refused_before(now);  // forgets the stale ones
  const size_t free = pdcs_.capacity() - pdcs_.used();
  for (size_t i = 0; i < refused_syns_.size() && i < free; ++i) {
    if (refused_syns_[i].key == key) {
      refused_syns_.erase(refused_syns_.begin() + static_cast<ptrdiff_t>(i));
      return true;
    }
  }
  return refused_syns_.size() < free;  // room beyond those waiting their turn
}

void Pds::note_refused_syn(uint64_t key, Time now) {
  constexpr size_t kMaxRefusedSyns = 256;  // beyond these, SYNs just compete
  for (RefusedSyn& r : refused_syns_) {
    if (r.key == key) {
      r.seen = now;
      return;
    }
  }
  if (refused_syns_.size() < kMaxRefusedSyns) refused_syns_.push_back({key, now, now});
}

size_t Pds::syns_refused_before(Time t) {
  // A SYN not seen again within a few of its RTOs was given up. Its initiator resends it
  // every RTO, which does not back off while refused but may be as long as max_rto (the
  // bound of every RTO, current_rto). Forgotten after a few initial RTOs instead, one
  // rank's SYN, resent every 64 ms, lost its turn before each retry and was refused for
  // the whole pdc_wait (10 s) while the other ranks' fresh SYNs took every freed slot
  // (4 ranks with 2-PDC tables, 16 ASan processes on 2 cores).
  const Duration forgotten = cfg_.max_rto * 4;
  std::erase_if(refused_syns_, [&](const RefusedSyn& r) { return now_ - r.seen > forgotten; });
  return static_cast<size_t>(
      std::count_if(refused_syns_.begin(), refused_syns_.end(),
                    [&](const RefusedSyn& r) { return r.first.ps <= t.ps; }));
}

}  // namespace spray::pds
