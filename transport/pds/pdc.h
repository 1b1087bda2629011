// A packet delivery context (PDC): the reliable, sequenced channel between two
// engines, as UET defines it. One Pdc per (peer, mode) per engine, held in the PDS's
// pool and owned by it. A PDC carries traffic both ways: the initiator established it
// with SYN, and afterwards either side sends requests on it, each direction with its
// own PSN space that starts at the same start PSN.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "congestion/cc/congestion_control.h"
#include "congestion/paths/path_selector.h"
#include "transport/base/status.h"
#include "transport/base/time.h"
#include "transport/base/timer_wheel.h"
#include "transport/pds/rtt_estimator.h"

namespace spray::pds {

using PeerIndex = uint32_t;
inline constexpr PeerIndex kNoPeer = 0xffffffff;

enum class Mode : uint8_t { kRud = 0, kRod = 1 };

// SES's name for one packet. PDS stores it and hands it back (to rebuild a packet for
// retransmission, or to report it acknowledged or failed) without interpreting it.
struct PacketRef {
  uint32_t message = 0;  // SES message slot
  uint32_t index = 0;    // packet number within the message
};
// PDS's own sequenced control packets use these message values in their PacketRef.
inline constexpr uint32_t kCloseMessage = 0xffffffff;  // CTRL CLOSE
inline constexpr uint32_t kProbeMessage = 0xfffffffe;  // CTRL ACK_REQ: is the peer alive?
inline bool is_control_ref(const PacketRef& r) {
  return r.message >= kProbeMessage;
}

// A message PDS gave up on (retries exhausted, the peer refused a PDC, ...).
struct FailedMessage {
  uint32_t message = 0;
  Status status = Status::kOk;
};

// A run of packets SES wants sent in order on one PDC: the intrusive hook SES embeds in
// each outgoing message. PDS links queued runs and advances next_packet.
struct TxRun {
  TxRun* next = nullptr;
  uint32_t message = 0;
  uint32_t next_packet = 0;
  uint32_t packet_count = 0;
  uint32_t packet_bytes = 0;  // wire bytes of a full packet, for window accounting
  // An answer to the peer (a response, a read request or read data), not a user's
  // operation. Waiting for a PDC it never times out: its requester has no other way to
  // learn of it and would wait forever instead (see Pds::on_wait_timer).
  bool answer = false;
  // An answer that goes on the PDC the peer opened to us, where there is one, not on
  // ours: ours may lead to a predecessor of the peer's (Ses::start).
  bool via_peers_pdc = false;
  // Nothing at the initiator waits for this run's acknowledgement (an inject: no
  // completion, no counter), so its packet may go without ACK-requested when it is alone
  // in flight, and the target acknowledges it with what it sends next (see
  // Pds::next_tx_now and Pds::flush_acks).
  bool ack_may_wait = false;
};

enum class PdcState : uint8_t {
  kFree,
  kSynSent,  // initiator: SYN on every packet until the first ACK names the target PDC
  kEstablished,
  kClosing,  // initiator: CLOSE sent, waiting for its ACK; no new data
};

struct TxSlot {
  PacketRef ref;
  Time sent{};
  uint32_t bytes = 0;
  uint16_t entropy = 0;
  uint8_t retries : 7 = 0;  // at most Pds::kMaxRetries + 1
  // Sent without ACK-requested (TxRun::ack_may_wait): its ACK may wait for what the
  // target sends next (PdsConfig::ack_hold_limit), or for its next call, so it gives no
  // RTT sample (one would count the target application's time as network delay).
  bool ack_may_wait : 1 = false;
  // Flags as bits: 24 bytes a slot instead of 32 (thousands of PDCs x window slots in
  // the simulator).
  bool in_flight : 1 = false;  // sent, not yet acknowledged
  bool sacked : 1 = false;     // acknowledged by a SACK bit; the slot frees when CACK passes it
  bool rtx_queued : 1 = false;
  bool retransmitted : 1 = false;  // Karn: no RTT sample from a retransmitted PSN
  // The target refused it for want of room (NACK): not in the network, so its bytes are
  // out of inflight_bytes until it is resent (see Pds::on_nack).
  bool refused : 1 = false;
  bool answer : 1 = false;  // a packet of an answer to the peer (TxRun::answer)
  // From its Pds::kTwinFromTry-th try a PSN is resent as two copies on different EVs:
  // kTwinCopyNext once the first copy is out, kTwinSent once the second is. An ACK or
  // NACK of a PSN sent so cannot tell which copy arrived, so it reports no EV good.
  uint8_t twin : 2 = 0;
};
inline constexpr uint8_t kTwinNone = 0, kTwinCopyNext = 1, kTwinSent = 2;
static_assert(sizeof(TxSlot) == 24);

struct Pdc {
  // --- identity -------------------------------------------------------------------
  PdcState state = PdcState::kFree;
  uint16_t local_id = 0;
  uint16_t remote_id = 0;
  bool remote_known = false;
  bool initiator = false;
  Mode mode = Mode::kRud;
  PeerIndex peer = kNoPeer;
  uint32_t start_psn = 0;

  // --- transmit side (PSNs this engine sends) ----------------------------------
  uint32_t snd_una = 0;       // oldest PSN not cumulatively acknowledged
  uint32_t snd_nxt = 0;       // next new PSN
  std::vector<TxSlot> tx;     // window_packets slots, indexed by psn % size; empty until
                              // the PDC first sends
  std::vector<uint32_t> rtx;  // FIFO of PSNs to retransmit (ring, same size)
  uint32_t rtx_head = 0;
  uint32_t rtx_count = 0;
  TxRun* run_head = nullptr;  // queued SES runs, sent in order
  TxRun* run_tail = nullptr;
  uint32_t inflight_bytes = 0;
  Time latest_acked_sent{};  // RACK: send time of the most recently sent acked packet
  uint32_t backoff = 0;      // RTO doublings since the last progress
  RttEstimator rtt;          // sets the RTO before backoff
  TimerNode rto_timer;
  // Pacing (when the CC asks for a gap between packets, as RCCC does for a share below
  // one MTU per RTT): no packet before next_send; pace_timer wakes the PDC then.
  TimerNode pace_timer;
  Time next_send{};
  std::unique_ptr<cc::CongestionControl> cc;
  std::unique_ptr<paths::PathSelector> paths;
  bool in_ready_list = false;
  bool close_sent = false;     // kClosing: the CLOSE has a PSN
  bool probe_pending = false;  // send an ACK_REQ when the PDC is idle

  // --- receive side (PSNs the peer sends) -------------------------------------
  uint32_t rcv_nxt = 0;             // next PSN expected in order
  std::vector<uint64_t> rx_bitmap;  // bit psn % window: received, beyond rcv_nxt
  std::vector<uint64_t> rod_held;   // ROD: buffer handle per held PSN (0: none)
  uint32_t rod_pop = 0;             // ROD: next PSN whose held buffer goes up in order
  uint32_t rx_since_ack = 0;
  uint32_t last_rx_psn = 0;
  uint16_t last_rx_entropy = 0;  // the EV the latest request arrived on: ACKs return on it
  bool last_rx_ecn = false;
  bool ack_pending = false;
  // Every packet the pending ACK covers came without ACK-requested: it may wait for a
  // step that sends something, and leave behind it in the same burst, or for
  // PdsConfig::ack_hold_limit past `ack_held_since` (Pds::flush_acks). Only meaningful
  // while ack_pending. `ack_held_since`: when its first packet arrived.
  bool ack_may_wait = false;
  Time ack_held_since{};
  // A duplicate arrived (an ACK of ours was lost on a dead or lossy return path) or a
  // retransmission did (the sender heard no answer to its first copy), so the next ACK
  // goes out as Pds::kControlCopies copies, each on its own EV (see emit_ack).
  bool ack_lost = false;
  // RCCC, receiving side: the sender asks for credit; it has a backlog (counted in the
  // engine's credit_senders_).
  bool credit_requested = false;
  bool credit_active = false;
  // Sending side: the CC wants receiver credit (fixed per CC, read once at open).
  bool sends_backlog = false;
  bool in_ack_list = false;

  // --- making room in a full PDC table (pds_reclaim.cc) ------------------------
  Time last_active{};  // last packet sent or received or acknowledged on it
  Time close_asked{};  // target: when we last asked the initiator to close it (CLOSE_REQ)
  // Initiator: when the target first refused our SYN for want of a PDC (NO_PDC_AVAIL),
  // if it has; the SYN is sent again every RTO until cfg.pdc_wait has passed since.
  Time syn_refused_at{};
  bool syn_refused = false;
  // Initiator: an answer to the peer (TxRun::answer) was queued on it. Such a PDC never
  // gives up on a refusing target: the peer's operation waits for that answer, and failing
  // it would leave the peer waiting for good.
  bool carries_answer = false;
  // Initiator: the CLOSE was acknowledged while ROD packets still wait here to go up
  // in order; the PDC is freed once they have (freeing it now would lose them).
  bool free_when_drained = false;
  // Target: the initiator answered a packet of ours with INVALID_DPDCID, having failed
  // and forgotten this PDC. Nothing more is sent on it; once each packet in flight is
  // known delivered or not, it reopens as a PDC of ours (pds_orphan.cc).
  bool orphaned = false;
  // The orphan's peer said what became of a packet (wire::ForgottenPsn): it remembers
  // the PDC, so a packet unanswered by the deadline is asked about again.
  bool peer_remembers = false;
  uint8_t orphan_asks = 0;  // times it was asked again

  bool tx_idle() const { return snd_una == snd_nxt && run_head == nullptr; }
  // ROD: every packet received in order has gone up to SES (none held behind a stall).
  bool rx_drained() const { return mode != Mode::kRod || rod_pop == rcv_nxt; }
};

// Signed distance a - b in PSN space (handles 32-bit wrap).
inline int32_t psn_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b);
}

}  // namespace spray::pds
