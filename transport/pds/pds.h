// Pds: the packet delivery sublayer of one engine — PDCs, PSNs, ACK/SACK/NACK,
// retransmission, RUD and ROD. Pure: no clock, no I/O; time comes in as arguments and
// packets go out as header descriptions the engine encodes and transmits.
//
// Payload-agnostic (DESIGN.md decision 2): PDS sees PacketRefs, lengths and opaque
// buffer handles. SES builds and consumes the bytes.
//
// How the engine drives it, per poll:
//   rx:  classify_request() -> SES consumes the packet -> commit_request()
//        on_ack() / on_nack() / on_ctrl(); then take acked_ / failed_ reports to SES
//        flush_acks(kRequested) once per received burst (ACK coalescing)
//   steps: after each step's data, flush_acks(kBehindPackets) when the burst carries
//        packets, else flush_acks(kOverdue); flush_acks(kAll) before the owner sleeps
//   tx:  for each ready PDC, next_tx() until it says no; the engine asks SES to build
//        the payload for the returned PacketRef
//   timers: on_timers(now)
//   control packets (ACK, NACK, CTRL): drained from control_out()
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "transport/base/flat_map.h"
#include "transport/base/rng.h"
#include "transport/base/slot_pool.h"
#include "transport/base/status.h"
#include "transport/base/timer_wheel.h"
#include "transport/pds/pdc.h"
#include "transport/pds/pds_config.h"
#include "transport/wire/pds_header.h"

namespace spray::pds {

// A control packet PDS wants sent.
struct ControlPacket {
  PeerIndex peer = kNoPeer;
  std::variant<wire::PdsAck, wire::PdsNack, wire::PdsCtrl> header;
  // The EV to send it on. An ACK or NACK returns on the EV that the request it answers
  // arrived on: that path just delivered, and where both directions are routed alike
  // (the software fabric, symmetric ECMP) it is alive the other way too. Empty: the
  // engine's next EV in turn (extra copies, and packets that answer no arrival).
  std::optional<uint16_t> entropy;
};

// A data packet PDS decided to send now: the PDS header (all but next-header, which
// SES decides) and which SES packet goes behind it.
struct TxPacket {
  uint32_t pdc = 0;
  PeerIndex peer = kNoPeer;
  PacketRef ref;
  uint16_t entropy = 0;
  bool is_ctrl = false;  // a sequenced CTRL (CLOSE, ACK_REQ), not SES data: use `ctrl`
  wire::PdsRequest request;
  wire::PdsCtrl ctrl;
};

enum class RxVerdict : uint8_t {
  kDeliver,    // new and in order (or RUD): hand to SES, then commit
  kHold,       // ROD, new but early: commit with a buffer handle; delivered later
  kDuplicate,  // already received: drop (an ACK is scheduled)
  kReject,     // refused: a NACK has been queued; drop
};

struct RxClass {
  RxVerdict verdict = RxVerdict::kReject;
  uint32_t pdc = 0;
  uint32_t psn = 0;
  // A SYN for a PDC that does not exist yet: commit_request opens it, so a packet SES
  // refuses (malformed, no resources) leaves no state behind.
  bool open_on_commit = false;
  PeerIndex peer = kNoPeer;
  uint16_t remote_id = 0;
  uint32_t start_psn = 0;
  Mode mode = Mode::kRud;
  // The sender's backlog (bytes not yet sent) when the request carried one: its CC
  // wants receiver credit (RCCC).
  bool has_backlog = false;
  uint32_t backlog = 0;
  // The request is a retransmission: the sender has not heard our answer to its first
  // copy, so the ACK that answers this one goes out as several copies (see emit_ack).
  bool retransmitted = false;
  // The request asked for an ACK at the end of this receive pass (ACK-requested); one
  // that did not may have its ACK held for a later step (Pdc::ack_may_wait).
  bool ack_requested = true;
  uint16_t entropy = 0;  // the EV it arrived on: its ACK returns on it
};

// Why a PDC failed (Pds::fail_pdc): each has its counter in PdsStats, and the last
// failure is kept (Pds::last_pdc_failure) for the provider's log, so that an operation
// that completes "peer unreachable" can be told apart from one the peer refused.
enum class PdcFailure : uint8_t {
  kUnanswered,     // a packet went unacknowledged through all its tries
  kUnknownAtPeer,  // the peer NACKed the PDC as one it does not know (or in another mode)
  kPeerStayedFull  // the peer refused its SYN for want of room for PdsConfig::pdc_wait
};
const char* to_string(PdcFailure why);

struct PdcFailureRecord {
  PeerIndex peer = kNoPeer;
  PdcFailure why = PdcFailure::kUnanswered;
  wire::NackCode nack = wire::NackCode::kInvalidDpdcid;  // kUnknownAtPeer: what said so
  uint32_t tries = 0;  // kUnanswered: the PSN's tries (first send and resends)
};

struct PdsStats {
  uint64_t tx_packets = 0;
  uint64_t retransmits = 0;
  uint64_t rack_retransmits = 0;  // loss inferred from SACKs
  uint64_t timeout_retransmits = 0;
  uint64_t trim_retransmits = 0;
  uint64_t timeouts = 0;
  // Second copies of resends from a PSN's kTwinFromTry-th try, each on another EV than
  // the first.
  uint64_t twin_copies = 0;
  uint64_t rx_packets = 0;
  uint64_t rx_duplicates = 0;
  uint64_t acks_sent = 0;
  uint64_t acks_held = 0;  // of acks_sent: held back to a later step (Pds::flush_acks)
  uint64_t acks_received = 0;
  // Of acks_received: back on the EV of the request that triggered them, which shows
  // that EV works both ways (paths::Feedback::kGood). The rest (extra copies, ACKs of
  // packets already acknowledged) show delivery only.
  uint64_t acks_on_trigger_ev = 0;
  uint64_t nacks_sent = 0;
  uint64_t nacks_received = 0;
  uint64_t bad_packets = 0;        // unknown PDC, wrong peer, forged ACKs, out of window
  uint64_t rx_ecn_marked = 0;      // requests that arrived marked CE (congestion experienced)
  uint64_t ecn_acks_received = 0;  // ACKs echoing a CE mark to this sender
  // ACKs overtaken by a later one (sprayed ACKs take different paths): ignored, normal.
  uint64_t stale_acks = 0;
  uint64_t pdcs_opened = 0;
  uint64_t pdcs_closed = 0;
  uint64_t pdcs_failed = 0;  // the three below together
  uint64_t pdcs_failed_unanswered = 0;
  uint64_t pdcs_failed_unknown_at_peer = 0;
  uint64_t pdcs_failed_peer_full = 0;
  uint64_t pdcs_forgotten = 0;  // target PDCs of a peer we failed a PDC to (fail_pdc)
  // Target PDCs whose initiator no longer knew them (INVALID_DPDCID): what we sent on
  // them went again over a PDC of our own, opened in their place (Pds::reopen_orphan).
  uint64_t pdcs_reopened = 0;
  // PDCs failed because their peer restarted (forget_peer, fail_our_pdcs_with).
  uint64_t pdcs_of_restarted_peers = 0;
  // Target PDCs whose id a SYN with another start PSN named: its initiator had gone
  // (Pds::classify_request), and a new PDC took the id.
  uint64_t pdcs_superseded = 0;
  // Target PDCs a packet showed to be phantoms: its sender had had PSNs acknowledged on
  // it that never reached us (a late copy of its SYN opened it here after our engine
  // started); dropped, as PDCs we never knew (Pds::classify_request).
  uint64_t phantom_pdcs = 0;
  // Messages such a PDC failed instead: a packet of theirs the peer may have delivered
  // before it forgot the PDC (resent, or never answered), which must not go twice.
  uint64_t orphan_messages_failed = 0;
  // PDCs that started from EVs a closed PDC to the same peer had found good.
  uint64_t pdcs_with_remembered_paths = 0;
  // SYNs NACKed INVALID_SYN because we had just given up answers owed to that peer
  // (pds_lost_answers.cc).
  uint64_t syns_refused_after_lost_answers = 0;
  uint64_t pdcs_refused = 0;  // SYNs NACKed: table full or the peer at its target PDC cap
  // Making room in a full table (pds_reclaim.cc).
  uint64_t pdcs_reclaimed = 0;  // idle PDCs of ours closed to make room
  uint64_t close_requests = 0;  // CTRL CLOSE_REQ sent: an initiator asked to close an idle PDC
  // Target PDCs freed because their initiator no longer knew them (it had failed them,
  // and the news never reached us), when asked to close them or when late ACKs had
  // covered all we sent on them (pds_orphan.cc).
  uint64_t orphan_pdcs_freed = 0;
  // Answer runs sent on a PDC the peer opened because ours was held by a request the
  // peer refused for want of room (pds_answer_detour.cc).
  uint64_t answer_detours = 0;
  uint64_t pdc_waits = 0;          // sends that waited for a PDC
  uint64_t pdc_wait_failures = 0;  // messages failed after waiting cfg.pdc_wait for one
};

class Pds {
 public:
  explicit Pds(const PdsConfig& config);
  Pds(const Pds&) = delete;
  Pds& operator=(const Pds&) = delete;

  const PdsConfig& config() const { return cfg_; }
  const PdsStats& stats() const { return stats_; }
  // The last PDC that failed and why (meaningful once stats().pdcs_failed > 0).
  const PdcFailureRecord& last_pdc_failure() const { return last_failure_; }
  // Copies of a control packet that must not be lost to a dead path, each on its own EV
  // (the first on the EV of the packet it answers, the others on the engine's next EVs
  // in turn): the ACK that answers
  // a duplicate (an earlier ACK was lost) or a retransmission (the sender heard nothing
  // for its first copy), the ACK of a CLOSE, and NACKs about a PDC's life (send_nack).
  // With half the return paths dead, all three are lost one time in eight, against one
  // in two; a CLOSE whose single ACK drew a dead path on every try failed its PDC (an
  // all-to-all over two paths, one down, with 3 PDCs per engine: 58 of 100 runs failed
  // an operation, most through CLOSEs and refused SYNs).
  static constexpr uint32_t kControlCopies = 3;
  // The try from which every resend of a PSN goes as two copies on different EVs (see
  // next_tx_now).
  static constexpr uint8_t kTwinFromTry = 3;
  // The most retries a PSN gets, whatever PdsConfig::max_retries asks (TxSlot counts
  // them in 7 bits).
  static constexpr uint32_t kMaxRetries = 100;
  // After a PDC fails with answers to its peer aboard, how long that peer's new PDCs
  // are refused (pds_lost_answers.cc): enough for its retries on any PDC to run out
  // (each try waits at most max_rto), so it has failed one whether our NACKs got there
  // or not.
  Duration lost_answers_notice() const {
    return Duration{cfg_.max_rto.ps * (int64_t{cfg_.max_retries} + 2)};
  }

  // --- sending ----------------------------------------------------------------------

  // Queues `run` on this engine's PDC to `peer` in `mode`, opening one (SYN) if needed.
  // When the table is full the run waits for a PDC (an idle one is closed to make
  // room) and fails with kNoPdcAvailable, reported in failed(), after cfg.pdc_wait.
  Status enqueue(PeerIndex peer, Mode mode, TxRun* run, Time now);
  // The request classify_request said kDeliver to has been handled (committed or not):
  // the answers that enqueue parked meanwhile are placed. SES made them while it took a
  // request that opens the peer's PDC to us, which they are to go on
  // (TxRun::via_peers_pdc), before commit_request opened it; where it was not taken after
  // all, they go as any answer.
  void request_handled() {
    target_open_pending_ = false;  // nothing opens now, or it has opened
    if (!parked_answers_.empty()) place_parked_answers();
  }

  // PDCs that may have something to send. The engine calls next_tx on each.
  bool pop_ready(uint32_t& pdc);
  // Puts a PDC back on the ready list (the engine ran out of burst budget).
  void mark_ready(uint32_t pdc);
  // Fills `out` with the next packet the PDC may send now (retransmissions first, then
  // new PSNs within the window and the congestion window). False: nothing now; the PDC
  // returns to the ready list by itself when that changes.
  bool next_tx(uint32_t pdc, Time now, TxPacket& out);

  // Starts closing the PDC to `peer` (CTRL CLOSE). kAgain while it still has traffic.
  Status close(PeerIndex peer, Mode mode, Time now);
  // Before the engine goes away: starts closing every PDC that is idle, ours with CTRL
  // CLOSE, the peers' by asking their initiators with CTRL CLOSE_REQ (again after an
  // initial RTO without an answer). Busy PDCs are left to finish; calling again closes
  // them once idle. Returns the PDCs still open; the owner runs the engine and calls
  // again until none is, or until it stops waiting (a dead peer answers nothing).
  uint32_t close_all(Time now);
  // The unloaded round trip to `peer`, for the congestion control of the PDCs opened to
  // it from now on (open ones keep theirs), where it differs from PdsConfig::cc.base_rtt:
  // an engine whose datapath reaches some peers through shared memory and others over
  // the network sets it for the latter. 0: back to PdsConfig's.
  void set_peer_base_rtt(PeerIndex peer, Duration base_rtt);
  // Asks whether `peer` is alive: if its PDC is idle, sends a sequenced CTRL ACK_REQ
  // that is retransmitted like data, so a dead peer exhausts the retries and fails the
  // PDC (reported in failed_peers). A busy PDC needs no probe: its traffic is one.
  Status probe(PeerIndex peer, Mode mode, Time now);

  // --- receiving --------------------------------------------------------------------

  // Decides what to do with a RUD/ROD request (or CTRL) from `peer` that arrived on EV
  // `entropy`. Opens a target PDC on SYN. NACKs (TRIMMED, NO_PDC_AVAIL, PSN_OOR_WINDOW,
  // INV_DPDCID, ...) are queued, to return on `entropy`.
  RxClass classify_request(PeerIndex peer, const wire::PdsRequest& h, bool trimmed,
                           uint16_t entropy, Time now);
  // Records the PSN as received (opening the PDC first for a new SYN; c.pdc is then
  // set). `held` is the ROD buffer handle for kHold, else 0.
  void commit_request(RxClass& c, bool ecn_marked, uint64_t held = 0);
  // SES could not take the packet just classified: NACK it so the sender retries later.
  void refuse_request(PeerIndex peer, const wire::PdsRequest& h, wire::NackCode code);
  // ROD: buffer handles that became deliverable in order; each returned once.
  bool pop_in_order(uint32_t pdc, uint64_t& held);
  // ROD: the layer above could not take the handle just popped; it goes back to the
  // head of the line and every later packet on this PDC waits behind it.
  void unpop_in_order(uint32_t pdc, uint64_t held);
  // ROD: whether a PDC from `peer` holds packets it acknowledged (or took out of order)
  // that have not gone up yet: the layer above has not seen everything of the peer's
  // that the peer saw acknowledged. A scan of the peer's ROD PDCs; for rare callers.
  bool holds_unseen_from(PeerIndex peer) const;
  // Whether request `h` from `peer` is a copy of a packet already received on the PDC it
  // names (classify_request would call it a duplicate).
  bool received_before(PeerIndex peer, const wire::PdsRequest& h) const;

  // `arrival_entropy`: the EV the ACK came back on, or nullopt where the datapath does
  // not show it (then every packet it acknowledges is reported kGood to the selector).
  void on_ack(PeerIndex peer, const wire::PdsAck& ack, Time now,
              std::optional<uint16_t> arrival_entropy = std::nullopt);
  void on_nack(PeerIndex peer, const wire::PdsNack& nack, Time now);
  // A CTRL from `peer` that arrived on EV `entropy` (answers return on it).
  void on_ctrl(PeerIndex peer, const wire::PdsCtrl& ctrl, uint16_t entropy, Time now);

  // Queues coalesced ACKs: every PDC that received data since the last flush, except
  // those whose packets all came without ACK-requested (Pdc::ack_may_wait), which are
  // held, unless `which` lets them go:
  //   kRequested     after a receive burst: none of them (a reply may follow);
  //   kBehindPackets a step's burst carries packets: all, behind those packets, so that
  //                  they cost no send call of their own;
  //   kOverdue       a step that sends nothing: those held ack_hold_limit or longer;
  //   kAll           the owner is about to sleep: all.
  enum class AckFlush : uint8_t { kRequested, kBehindPackets, kOverdue, kAll };
  void flush_acks(AckFlush which = AckFlush::kRequested, Time now = {});
  // Some ACK is held back: the owner flushes them (kAll) before it sleeps.
  bool holds_acks() const { return !ack_list_.empty(); }
  // Runs retransmission timers.
  void on_timers(Time now);

  // --- reports to the layer above (drained by the engine after each call) ------------
  std::vector<PacketRef>& acked() { return acked_; }
  std::vector<FailedMessage>& failed() { return failed_; }
  std::vector<ControlPacket>& control_out() { return control_; }
  // Peers whose PDC failed (retries exhausted); SES fails what waits on them.
  std::vector<PeerIndex>& failed_peers() { return failed_peers_; }
  // ROD buffer handles still held by a PDC that was freed: the owner releases them.
  std::vector<uint64_t>& orphaned_buffers() { return orphaned_; }

  // `peer` restarted (a new incarnation at its address; pds_peer_restart.cc): every PDC
  // with it fails, its messages and those waiting for a PDC to it reported failed
  // (kPeerUnreachable) and the peer with them (failed_peers), and what PDS remembers of
  // the old incarnation that would refuse the new one's SYNs is dropped.
  void forget_peer(PeerIndex peer, Time now);
  // `peer` restarted, and we learned the new incarnation from its first request before
  // we could tell (Ses::on_peer_lost_our_order): the PDCs we opened to it fail as if it
  // had NACKed them INVALID_DPDCID, with the sends waiting for a PDC to it (answers to
  // it keep waiting), and the peer is reported failed. The PDCs it opened stay.
  void fail_our_pdcs_with(PeerIndex peer, Time now);
  // Whether a NACK from `peer` names a PDC of ours with it (as ACKs and NACKs are checked).
  bool names_our_pdc(PeerIndex peer, const wire::PdsNack& nack) {
    return pdc_for_ack(peer, nack.dpdcid, nack.spdcid) != nullptr;
  }
  // Refuses request `h`, which arrived on `entropy` and was not classified (no PDC of
  // ours need exist for it), with a NACK of `code` carrying a vendor code and payload.
  void refuse_request(PeerIndex peer, const wire::PdsRequest& h, uint16_t entropy,
                      wire::NackCode code, uint8_t vendor_code, uint32_t payload);

  // For tests and benchmarks.
  const Pdc* pdc(uint32_t index) const { return pdcs_.in_use(index) ? &pdcs_[index] : nullptr; }
  uint32_t open_pdcs() const { return pdcs_.used(); }
  size_t waiting_for_pdc() const { return waiting_.size(); }
  // Timers armed (retransmission timeouts): whether on_timers has anything to do. The
  // simulator calls on_timers only while this is non-zero.
  size_t armed_timers() const { return timers_.armed_count(); }
  size_t memory_bytes() const;

 private:
  // pds_pdc.cc
  uint32_t* find_pdc_slot(PeerIndex peer, Mode mode);
  // An initiator open for sends waiting since `since` (now, for a send that has not
  // waited) leaves alone the free slots that SYNs refused before then are owed
  // (syns_refused_before). A target open ignores `since`.
  bool open_pdc(PeerIndex peer, Mode mode, bool initiator, uint32_t& index, Time since);
  void free_pdc(uint32_t index);
  // Gives p a fresh local id (none in use, never 0) and files it under it in by_id_.
  void take_local_id(uint32_t index);
  // Gives back what the receive side of PDC `index` holds: ROD buffers held for SES (to
  // orphaned_), its share of receiver credit, and its place in the ACK list.
  void drop_receive_side(uint32_t index);
  // Drops the entries that name target PDC `index` as one the peer opened (answers_by_peer_,
  // target_pdcs_of_peer_, by_syn_); a late copy of its SYN stays refused (closed_syn_).
  void forget_peers_pdc(uint32_t index);
  // A PDC closed normally (its CLOSE acknowledged, at either end): counted, its good
  // EVs remembered, freed.
  void finish_close(uint32_t index);
  // A PDC that closes normally leaves its freshest good EVs (RememberedPaths); the next
  // PDC to that peer reports them good to its selector before its first packet.
  void remember_paths(const Pdc& p);
  void start_from_remembered_paths(Pdc& p);
  // Fails the PDC for `cause` (its peer is the PDC's): its messages fail kNoPdcAvailable
  // when the peer stayed full, else kPeerUnreachable.
  void fail_pdc(uint32_t index, PdcFailureRecord cause, Time now);
  // Reports every message of ours the PDC still carries as failed (`why`): packets in
  // flight not yet reported acknowledged, and runs not sent yet. Before a PDC is freed
  // with traffic aboard; SES would otherwise wait for them forever. Returns whether one
  // was an answer to the peer.
  bool fail_messages_on(Pdc& p, Status why);
  // An answer fail_messages_on failed may also have packets on another PDC to the same
  // peer: one moved there from its next packet (pds_answer_detour.cc). Its run there is
  // unlinked, since SES reuses the run with the message's slot (two PDCs then sent from
  // one run), and its packets in flight there become sequenced no-ops (resent as CTRL
  // ACK_REQ, reported to nobody), since that PDC still needs their PSNs delivered; sent
  // empty, as before, they were never sent at all, and failed that PDC. Clears
  // ended_answers_. (spray-transfer faults sweep seeds 9561, 10720 and 10879: PDS
  // reported such answers failed or acknowledged again, for messages SES had ended.)
  void end_answers_elsewhere(const Pdc& failed);
  // Unlinks from p's queue, in order, each run `take(run)` claims (returns true for);
  // the others keep their order. `take` gets the run with its `next` cleared.
  template <class Take>
  static void unlink_runs(Pdc& p, Take take) {
    TxRun* kept_tail = nullptr;
    for (TxRun* r = p.run_head; r != nullptr;) {
      TxRun* const next = r->next;
      r->next = nullptr;
      if (take(r)) {
        (kept_tail != nullptr ? kept_tail->next : p.run_head) = next;
      } else {
        r->next = next;
        kept_tail = r;
      }
      r = next;
    }
    p.run_tail = kept_tail;
  }

  // pds_lost_answers.cc: telling a peer that answers we owed it were given up.
  void lost_answers_to(PeerIndex peer);
  // Whether the peer is still to be told: the caller then refuses what the peer sent
  // (a new PDC, a CLOSE for a PDC we no longer know, a probe), and that refusal tells
  // it. The first one starts the notice (lost_answers_notice). Expired entries go as
  // they are met.
  bool tell_of_lost_answers(PeerIndex peer) {
    return !lost_answers_.empty() && still_telling(peer);
  }
  bool still_telling(PeerIndex peer);
  Pdc* pdc_for_ack(PeerIndex peer, uint16_t dpdcid, uint16_t spdcid);
  // Queues `copies` copies of `c`: the first on c.entropy, the others on the engine's
  // next EVs in turn, so they take different return paths.
  void push_control(ControlPacket c, uint32_t copies);
  Pdc* pdc_by_local_id(uint16_t id);
  // A NACK to `peer` on the EV of the packet being handled (arrival_entropy_), with
  // Spray's vendor code (wire::ForgottenPsn, wire::kStaleIncarnation) and payload.
  void send_nack(PeerIndex peer, wire::NackCode code, uint32_t psn, uint16_t spdcid,
                 uint16_t dpdcid, uint8_t vendor_code = 0, uint32_t payload = 0);

  // Closes an established, idle initiator PDC: CLOSE goes out next; new traffic to the
  // peer opens a new PDC.
  void begin_close(uint32_t index);

  // pds_orphan.cc: a target PDC its initiator no longer knows (INVALID_DPDCID).
  // The NACK answered packet `s` (PSN `psn`) of target PDC `index`, saying `word` of it:
  // the PDC stops sending and waits for the peer's word on the other packets in flight.
  void on_orphan_nack(uint32_t index, TxSlot& s, uint32_t psn, wire::ForgottenPsn word, Time now);
  // Reopens the orphan once the peer has answered for every packet in flight on it, or
  // at `deadline` (its timer) with those it has not in doubt. A peer that remembers the
  // PDC (FailedPdc) is asked again first, up to kOrphanAsks times.
  static constexpr uint8_t kOrphanAsks = 3;
  void settle_orphan(uint32_t index, Time now, bool deadline);
  // Arms the orphan's timer for its next deadline: one plain RTO, without the backoff of
  // earlier timeouts.
  void arm_orphan_deadline(Pdc& p, Time now);
  // Fails the messages in doubt, then makes the orphan ours (become_ours), or frees it
  // when nothing is left to send.
  void reopen_orphan(uint32_t index, Time now);
  // Makes target PDC `index` a PDC of our own to the same peer, in place: a new id, SYN
  // form, and every PSN from its left edge sent again on it.
  void become_ours(uint32_t index, Time now);
  // The other end: a PDC of ours that failed leaves its receive state here a while, so
  // that the peer, still sending on it, learns exactly what was delivered.
  void remember_failed_pdc(const Pdc& p);
  wire::ForgottenPsn what_became_of(PeerIndex peer, uint16_t our_id, uint16_t their_id,
                                    uint32_t psn) const;

  // pds_answer_detour.cc: answers that must not wait behind our refused requests.
  // Whether p's window is held at its left edge by a request the peer refused for want
  // of room (a message slot, a packet buffer): nothing behind it moves until the peer
  // has room again.
  bool held_by_refusal(const Pdc& p) const {
    return p.snd_una != p.snd_nxt && p.tx[ring_index(p.snd_una)].refused;
  }
  // The PDC the peer opened to us (answers_by_peer_) if it is not p and not held by a
  // refusal too: where answers held up on p can go.
  std::optional<uint32_t> detour_for(uint32_t index) const;
  // The PDC a new answer to p's peer goes on: p itself, unless held_by_refusal(p) and
  // detour_for(p) offers another.
  uint32_t answer_pdc(uint32_t index);
  // The peer refused a request on p for want of room: the answers queued on p move to
  // detour_for(p), if there is one, since the peer's room may wait for them.
  void detour_answers(uint32_t index);

  // pds_reclaim.cc: making room in a full table.
  // A PDC that carries nothing now and holds nothing back: closing it loses nothing.
  bool reclaimable(const Pdc& p) const;
  // Starts freeing the least recently active reclaimable PDC, unless enough closes are
  // already under way for the sends waiting: one of ours is closed (CLOSE); a target
  // PDC is freed by asking its initiator to close it (CTRL CLOSE_REQ). For our own open
  // (`own_open`) at own_pdc_limit(), only closing one of ours makes room.
  void reclaim_idle_pdc(Time now, bool own_open);
  // Sends CTRL CLOSE_REQ for target PDC `index` (only its initiator may close it).
  void ask_initiator_to_close(uint32_t index, Time now);
  // Initiator PDCs this engine may hold: all but an eighth of the table (at least one
  // slot) is left to peers' SYNs. Otherwise engines whose tables are full of their own
  // SYNs to each other refuse each other's SYNs until all fail (a chaos run with two
  // PDCs a host did).
  uint32_t own_pdc_limit() const {
    const uint32_t capacity = pdcs_.capacity();
    return capacity > 1 ? capacity - std::max<uint32_t>(1, capacity / 8) : 1;
  }
  // Parks `run` until a PDC to (peer, mode) can be opened.
  void wait_for_pdc(PeerIndex peer, Mode mode, TxRun* run, Time now);
  // open_pdc made the PDC for (p.peer, p.mode): it takes over the runs waiting for one.
  void adopt_waiting_runs(uint32_t index);
  // A slot was freed: opens a PDC for the oldest waiting sends.
  void open_for_waiting();
  // The wait timer: fails sends that waited cfg.pdc_wait, asks again for room.
  void on_wait_timer(Time now);
  // Whether a new SYN (by syn_key) may take a free slot now, first come, first served
  // among SYNs refused for want of one; a SYN refused now joins the queue.
  bool syn_may_open(uint64_t key, Time now);
  void note_refused_syn(uint64_t key, Time now);
  // Forgets refused SYNs not seen again lately, then counts those first refused at or
  // before `t`.
  size_t syns_refused_before(Time t);

  // pds_tx.cc
  void queue_retransmit(Pdc& p, uint32_t psn);
  // Fills out.ref and out.entropy for the second copy of a resend, on an EV other than
  // the first copy's; false if the selector has none to offer (ECMP's one EV a flow).
  bool send_twin_copy(Pdc& p, uint32_t psn, TxPacket& out);
  Duration current_rto(const Pdc& p) const;  // with backoff, at most max_rto
  void arm_rto(Pdc& p, Time now);
  void detect_losses(Pdc& p);
  // The peer named its PDC (its first ACK, or a request on ours): the SYN form is over,
  // and packets it refused for want of a PDC go again at once (see the definition).
  void establish(Pdc& p, uint16_t remote_id);
  void on_rto(uint32_t index, Time now);
  void ack_psn(Pdc& p, uint32_t psn, bool cumulative, paths::Feedback feedback, uint32_t trigger);
  uint32_t backlog_bytes(const Pdc& p) const;
  // next_tx without pacing.
  bool next_tx_now(Pdc& p, uint32_t index, Time now, TxPacket& out);
  // Timer owners: a PDC index for its RTO, with this bit set for its pace timer; the
  // wait timer of sends waiting for a PDC is kWaitTimerOwner.
  static constexpr uint32_t kPaceTimerBit = 0x80000000;
  static constexpr uint32_t kWaitTimerOwner = 0x7fffffff;

  // pds_rx.cc
  bool rx_received(const Pdc& p, uint32_t psn) const;
  // RCCC: records a sender's advertised backlog; the window granted to each sender that
  // wants credit is this engine's BDP shared among those with a backlog.
  void note_backlog(Pdc& p, uint32_t backlog);
  uint32_t credit_window() const;
  void queue_ack(uint32_t index);
  void emit_ack(Pdc& p);
  // 64 receive bits for PSNs base .. base + 63, read a word at a time.
  uint64_t sack_bitmap(const Pdc& p, uint32_t base) const;

  static uint64_t pdc_key(PeerIndex peer, Mode mode) {
    return (uint64_t{peer} << 8) | static_cast<uint64_t>(mode);
  }
  static uint64_t syn_key(PeerIndex peer, uint16_t spdcid) {
    return (uint64_t{1} << 63) | (uint64_t{peer} << 16) | spdcid;
  }

  // A PSN's place in the per-PDC rings (tx, rtx, rod_held, rx_bitmap bits). A mask,
  // not `% window_`: the window is a power of two but only known at run time, so `%`
  // compiles to a division, and this runs several times per packet.
  uint32_t ring_index(uint32_t psn) const { return psn & (window_ - 1); }

  PdsConfig cfg_;
  uint32_t window_;              // cfg_.window_packets, rounded to a power of two
  uint32_t credit_senders_ = 0;  // target PDCs whose sender wants credit and has a backlog
  SlotPool<Pdc> pdcs_;
  FlatMap by_peer_;  // pdc_key -> PDC index: the PDC this engine sends on
  // pdc_key -> the PDC the peer opened to us last: where our answers to it go while our
  // own PDC's window is held by a request the peer refused for want of room
  // (answer_pdc), and all of them while the peer is unvouched (TxRun::via_peers_pdc).
  FlatMap answers_by_peer_;
  FlatMap by_id_;       // local PDC id -> PDC index
  FlatMap by_syn_;      // syn_key -> target PDC index, for SYN lookups
  FlatMap closed_syn_;  // syn_key of recently closed target PDCs -> start PSN (late SYN guard)
  FlatMap target_pdcs_of_peer_;  // peer -> target PDCs it holds open (only peers with some)
  // Peers we gave up answers to, and until when they are told (pds_lost_answers.cc).
  // Slow path: empty unless a PDC failed with answers aboard lately; one entry a peer.
  struct LostAnswers {
    PeerIndex peer;
    Time until;  // kNotToldYet until we first refuse something of the peer's
  };
  static constexpr Time kNotToldYet{INT64_MAX};
  std::vector<LostAnswers> lost_answers_;
  // Receive state of PDCs of ours that failed lately (pds_orphan.cc), the oldest
  // overwritten first; allocated when the first one fails. Delivered: every PSN before
  // `delivered_below` (RUD: rcv_nxt; ROD: rod_pop, the next to go up in order), and for
  // RUD those whose bit is set in `received` (rx_bitmap's copy).
  struct FailedPdc {
    PeerIndex peer = kNoPeer;
    uint16_t local_id = 0;
    uint16_t remote_id = 0;  // 0 (no PDC's id): it failed before the peer's was known
    Mode mode = Mode::kRud;
    uint32_t delivered_below = 0;
    std::vector<uint64_t> received;
  };
  static constexpr size_t kFailedPdcsKept = 32;
  std::vector<FailedPdc> failed_pdcs_;
  size_t failed_pdcs_next_ = 0;
  std::vector<uint64_t> closed_ring_;
  // Good EVs of recently closed PDCs, one entry a peer, the oldest overwritten first:
  // at most kRememberedPeers entries, allocated when the first PDC closes (a simulator
  // host that never closes one pays nothing), searched linearly when a PDC opens.
  // Without them every PDC opened after one closed for room explores blind: with half
  // the paths dead each try of its SYN was a coin toss, and all-to-all runs with small
  // PDC tables failed PDCs that REPS keeps alive otherwise.
  struct RememberedPaths {
    PeerIndex peer = kNoPeer;
    uint8_t count = 0;
    std::array<uint16_t, 4> evs{};  // newest first
  };
  static constexpr size_t kRememberedPeers = 256;
  std::vector<RememberedPaths> remembered_;
  size_t remembered_next_ = 0;
  size_t closed_next_ = 0;
  uint16_t next_local_id_ = 1;  // rolls over 1..65535, skipping ids in use, so a
                                // late packet for a closed PDC does not hit a new one
  TimerWheel timers_;
  Time now_{};  // the latest time a call brought: stamps PDC activity where none is passed
  // The EV of the packet classify_request or on_ctrl is handling: the NACKs that answer
  // it (send_nack, refuse_request) return on it.
  uint16_t arrival_entropy_ = 0;
  Rng rng_;
  std::vector<uint32_t> ready_;
  // PDCs with an ACK to send; between steps only those whose ACK is held back.
  std::vector<uint32_t> ack_list_;
  std::vector<PacketRef> acked_;
  std::vector<FailedMessage> failed_;
  std::vector<ControlPacket> control_;
  std::vector<PeerIndex> failed_peers_;
  std::vector<uint64_t> orphaned_;
  std::vector<uint32_t> ended_answers_;  // fail_messages_on -> end_answers_elsewhere
  // set_peer_base_rtt's values by PeerIndex, 0 for PdsConfig's; sized to the highest peer
  // given one (a peer table's worth at most), empty while every peer has the default.
  std::vector<Duration> peer_base_rtt_;
  // Sends waiting for a PDC because the table was full, oldest first: runs for one
  // (peer, mode) in order. Scanned linearly; it is empty unless the table is full.
  struct WaitingRuns {
    PeerIndex peer = kNoPeer;
    Mode mode = Mode::kRud;
    TxRun* head = nullptr;
    TxRun* tail = nullptr;
    Time since{};
  };
  std::vector<WaitingRuns> waiting_;
  // The waiting sends for (peer, mode), or waiting_.end() (pds_reclaim.cc).
  std::vector<WaitingRuns>::iterator find_waiting(PeerIndex peer, Mode mode);
  // Reports the user's sends among `w`'s runs failed with `why`; answers to the peer
  // stay, in order (w.head null when none). Returns how many failed (pds_reclaim.cc).
  uint32_t fail_waiting_sends(WaitingRuns& w, Status why);
  TimerNode wait_timer_;
  // classify_request accepted a SYN whose PDC opens at commit_request: until then an
  // initiator open (SES answering that very packet) may not take the last slot.
  bool target_open_pending_ = false;
  PeerIndex target_open_peer_ = 0;  // ... the peer that SYN came from
  // Answers parked by enqueue meanwhile (request_handled). Empty but in that case.
  struct ParkedAnswer {
    PeerIndex peer;
    Mode mode;
    TxRun* run;
  };
  std::vector<ParkedAnswer> parked_answers_;
  void place_parked_answers();
  uint32_t initiator_pdcs_ = 0;  // PDCs in the table that this engine opened
  // SYNs refused for want of a slot, oldest first, each with when it was last refused;
  // a slot that frees goes to the oldest. Bounded; empty unless the table is full.
  struct RefusedSyn {
    uint64_t key = 0;
    Time first{};  // first refused
    Time seen{};   // last refused
  };
  std::vector<RefusedSyn> refused_syns_;
  PdsStats stats_;
  PdcFailureRecord last_failure_;
};

}  // namespace spray::pds
