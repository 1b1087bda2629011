// Ses: the semantic sublayer of one engine — sends and receives (untagged and tagged,
// eager and rendezvous), RMA write and read against registered memory, atomics on it,
// immediate data, and the completions the user sees.
//
// SES turns operations into messages, messages into packets (it builds each packet's
// SES header and copies its payload when the engine asks), and queues messages on PDS.
// PDS reports each packet acknowledged or failed; SES completes a message when every
// packet is acknowledged and, for operations that need one, the target's response came.
//
// Message ids: sends take ids 0x0000-0x7fff from a per-peer sequence, so the target can
// match sends in the order they were issued even though RUD delivers packets in any
// order (MPI's non-overtaking rule). RMA operations take ids 0x8000-0xffff and are not
// ordered. Responses echo the request's id.
//
// DESIGN NOTES
// - Eager sends complete when PDS has every packet acknowledged (transmit complete); the
//   target sends no SES response for them, halving the packets of small messages.
//   Writes, reads and rendezvous sends need a response because only the target knows
//   whether the key and bounds were good, or when it finished reading.
// - SES responses travel as reliable PDS requests on the PDC back to the initiator
//   rather than piggybacked on ACKs as UET allows; it keeps ACKs stateless and lost
//   responses are retransmitted by PDS like any packet.
// - A send that fails (the PDC gave up) still consumed its id. SES sends a MSG_ERR
//   carrying the id at once, and the target skips it; a MSG_ERR that fails too is sent
//   again at once up to kSkipTriesAtOnce times, then kSkipLateTries more times at
//   growing intervals (a peer cut off for a few seconds), and always ahead of the next
//   send to that peer.
// - Unexpected eager messages are buffered on the heap, sized by the request length and
//   bounded by the rendezvous threshold; this is the slow path of a mismatch.
// - PDS names a message by the ticket SES gave it (slot and the slot's generation, see
//   Ses::ticket), so a report that outlives its message is recognised and dropped
//   rather than applied to whichever message holds the slot next.
// - An atomic is one packet (its elements fit one packet's payload) on a PDC, never
//   RUDI: PDS delivers it to SES exactly once, so a retransmission cannot apply it twice.
//   The target applies it as it arrives and answers with a response, or, when fetching,
//   with the elements' old values as read data (ses_atomic.cc).
// - Each engine has an incarnation, a random number drawn when it starts, carried in the
//   standard header's `initiator` field with the peer's as the sender knows it, so that
//   a peer that restarts at the same address is told from the one before it and neither
//   side takes the other's message ids for a continuation of the old order
//   (ses_incarnation.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "transport/base/flat_map.h"
#include "transport/base/slot_pool.h"
#include "transport/pds/pds.h"
#include "transport/ses/completion.h"
#include "transport/ses/ended_write_ids.h"
#include "transport/ses/matching.h"
#include "transport/ses/memory_region.h"
#include "transport/ses/peer_incarnations.h"
#include "transport/wire/ses_header.h"

namespace spray::ses {

struct SesConfig {
  uint32_t mtu_bytes = 4096;  // max UET packet (PDS header on) the datapath carries
  uint32_t max_peers = 65536;
  uint32_t max_tx_messages = 8192;  // at least 4; an eighth (at least 2) kept for answers
  uint32_t max_rx_messages = 8192;
  uint32_t max_posted_receives = 8192;
  uint32_t max_memory_regions = 4096;
  uint64_t rendezvous_threshold_bytes = 64 * 1024;  // larger sends use rendezvous
  uint32_t completion_queue_entries = 1024;         // initial; it grows when full
  uint32_t job_id = 0;
  // Report every RMA write, read and atomic a peer does on our memory as a completion
  // (kRemoteWrite, kRemoteRead, kRemoteAtomic, kRemoteFetchAtomic), for libfabric's
  // FI_RMA_EVENT counters. Off: only writes with immediate data are reported. RUDI's
  // idempotent writes are never reported: each packet stands alone and may be applied
  // more than once by design, so there is no one event to count.
  bool report_remote_access = false;
  // The engine's datapath can copy from a peer's memory itself (shared memory between
  // processes of one host): rendezvous receives are then handed to the engine as
  // DirectReads instead of read requests, so a large message is copied once, not twice.
  bool direct_reads = false;
  // A send or RMA write received in part from which nothing more has come for this
  // long, or a send that has waited this long for an earlier one of its sender's, makes
  // its sender one the engine probes (peers_we_wait_on): a sender that died halfway, or
  // before an earlier send got through, sends no MSG_ERR, and only a PDC failing on it
  // ends that wait (on_peer_failed).
  Duration stalled_send_probe_after = Duration::milliseconds(10);
  // This engine's incarnation (see ses_incarnation.cc); 0: drawn at random, as an
  // engine that may restart at the same address needs. Tests set it (never to 0xffff,
  // PeerIncarnations::kAcknowledgedUnknown).
  uint16_t incarnation = 0;
  // A peer that sends to us over PDCs without naming our incarnation is sent a hello
  // this long after, unless it has learned it meanwhile (it named it, or a request of
  // ours went to it). Most peers learn it from our requests; the rest, that only send
  // to us, cost one NO_OP each. A restart of ours within this time of first contact is
  // seen by its requests' words all the same (kAcknowledgedUnknown), unless our
  // successor sends to that peer before it sends to our successor.
  Duration hello_after = Duration::milliseconds(10);
};

// A rendezvous receive the engine may complete by copying `length` bytes from the
// sender's memory at `remote_address` (the virtual address its rendezvous advertised)
// into `local` itself. Handed back through Ses::direct_read_done.
struct DirectRead {
  uint32_t slot = 0;  // the receive's slot
  PeerIndex peer = pds::kNoPeer;
  uint16_t msg_id = 0;
  uint64_t remote_address = 0;
  uint64_t read_key = 0;  // the sender's rendezvous key, which it offers while the send lives
  uint8_t* local = nullptr;
  uint64_t length = 0;
};

// A rendezvous send's key becoming copyable from by peers (`readable`) or ceasing to be
// (SesConfig::direct_reads; see Ses::readable_key_changes).
struct ReadableKeyChange {
  uint64_t key = 0;
  bool readable = false;
};

// The longest SES header Spray writes: the standard request with the atomic
// compare-and-swap extension (longer than the rendezvous extension).
inline constexpr size_t kMaxSesHeaderBytes =
    wire::kSesStandardBytes + wire::kAtomicCompareSwapExtensionBytes;
static_assert(wire::kAtomicCompareSwapExtensionBytes >= wire::kRendezvousExtensionBytes);

// Bytes reserved in every packet for PDS and SES headers: a RUD/ROD request with CC
// state, the standard SES header and the rendezvous extension. Payload per packet is
// the MTU less this, so every packet of a message carries the same amount. (An atomic's
// 4-byte extension fits in the rendezvous extension's room; the 36-byte compare-and-swap
// one travels with no payload.)
inline constexpr uint32_t kHeaderReserveBytes = 16 + 44 + 24;
// Payload bytes each packet of a message carries on a path of `mtu_bytes` (what SES is
// given: the datapath's MTU less TSS's header and tag when packets are sealed). Also the
// largest datagram (UUD) and atomic.
inline constexpr uint32_t payload_bytes_per_packet(uint32_t mtu_bytes) {
  return std::min<uint32_t>(mtu_bytes - kHeaderReserveBytes, wire::kMaxSesPayloadLength);
}

// What a probe does with the unexpected message it finds (FI_PEEK, FI_PEEK|FI_CLAIM,
// FI_PEEK|FI_DISCARD).
enum class ProbeAction : uint8_t {
  kPeek,     // report it; it stays queued for a later receive
  kClaim,    // report it and set it aside for recv_claimed() with the same claim key
  kDiscard,  // report it and drop its data (its sender still completes normally)
};

struct SendSpec {
  bool tagged = false;
  uint64_t tag = 0;
  bool has_data = false;
  uint64_t data = 0;
  pds::Mode mode = pds::Mode::kRud;
  // Someone waits for this send's completion (a completion entry, a counter). False for
  // an inject, whose completion nobody sees: an eager send's acknowledgement may then
  // come late (pds::TxRun::ack_may_wait). The completion is still reported, when it comes.
  bool completion_awaited = true;
};

// An atomic operation on `count` elements of the target's registered memory (see
// atomic_op.h for what each opcode does and which types it takes).
struct AtomicSpec {
  wire::AmoOpcode op = wire::AmoOpcode::kSum;
  wire::AmoDatatype datatype = wire::AmoDatatype::kUint64;
  uint32_t count = 0;
  // `count` operands; for the compare-and-swap family the one swap value; unused by kRead.
  const void* operands = nullptr;
  const void* compare = nullptr;  // compare-and-swap family: one element (kMaskedSwap: the mask)
  // Fetching: receives the `count` elements' values before the operation. Null: a
  // non-fetching atomic (kRead and the compare-and-swap family always fetch).
  void* result = nullptr;
};

enum class RxResult : uint8_t {
  kAccepted,    // consumed
  kNoResource,  // no message slot free: PDS NACKs, the sender retries
  kMalformed,   // inconsistent or forged: dropped, counted
};

struct SesStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t unexpected_messages = 0;
  uint64_t rendezvous_sends = 0;
  uint64_t malformed_packets = 0;
  uint64_t stale_responses = 0;
  uint64_t rma_errors = 0;             // bad key, bounds or rights at this target
  uint64_t atomics_applied = 0;        // atomic requests applied at this target
  uint64_t atomic_errors = 0;          // ... refused (key, bounds, rights, type, op, alignment)
  uint64_t direct_reads = 0;           // rendezvous receives copied from the sender's memory
  uint64_t direct_read_fallbacks = 0;  // ... that could not be, and went by read requests
  // PDS reports and packet requests naming a message that had already ended (its tx slot
  // since taken by another): dropped, not applied to the message now in the slot.
  uint64_t stale_tickets = 0;
  // Sends received in part whose sender then failed (its PDC to us, or ours to it, went
  // unanswered): ended as its MSG_ERR would have ended them (Ses::on_peer_failed).
  uint64_t receives_abandoned = 0;
  // Send ids of a sender that then failed which never arrived here while later sends of
  // its had: passed over as its MSG_ERRs would have, so that those are matched.
  uint64_t missing_ids_passed_over = 0;
  // RMA writes to us received in part whose initiator then failed: dropped with their rx
  // slot and the tx slot promised for their response, as their MSG_ERR would have.
  uint64_t writes_abandoned = 0;
  // Peers seen to restart at the same address (Ses::on_peer_restarted): what the old
  // incarnation left ended, both orders started again.
  uint64_t peers_restarted = 0;
  // Requests dropped for their incarnation words: late packets of a peer's incarnation
  // before its restart, and requests meant for an incarnation of ours before this one
  // (refused with a NACK that tells the sender ours, unless a resend of a packet we took:
  // Engine::admit_sender).
  uint64_t requests_of_a_retired_incarnation = 0;
  uint64_t requests_to_an_earlier_incarnation = 0;
  uint64_t hellos_sent = 0;  // NO_OPs telling a peer that only sends to us our incarnation
  uint64_t probes_sent = 0;  // NO_OPs asking a peer we wait on if it is still there (probe_peers)
  // A receiver waiting on our send order, told which of our ids before one have ended
  // here (ses_order_query.cc), and our send ids that such a word let us pass over.
  uint64_t order_answers_sent = 0;
  uint64_t ended_ids_passed_over = 0;
};

class Ses {
 public:
  Ses(const SesConfig& config, pds::Pds& pds);
  Ses(const Ses&) = delete;
  Ses& operator=(const Ses&) = delete;

  // --- user operations (each completes exactly once through poll_completion) --------
  Status send(PeerIndex peer, const void* buf, uint64_t len, UserContext ctx, const SendSpec& spec,
              Time now);
  // A receive, or a multi-receive buffer (spec.multi: see matching.h), whose messages
  // each complete with `buffer` naming their part and the last with `released`.
  Status post_recv(const RecvSpec& spec);
  Status write(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
               UserContext ctx, const SendSpec& spec, Time now);
  // The request goes on a PDC of `mode`: kRod keeps it behind the writes and atomics
  // issued before it on ROD (the provider's ordered endpoints); the data returns RUD.
  Status read(PeerIndex peer, void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
              UserContext ctx, pds::Mode mode, Time now);
  // An atomic on registered memory at the target: one packet each way, so
  // count * element size may not exceed max_atomic_bytes() (kTooLong). kInvalidArgument
  // for an opcode the type does not take or a missing buffer.
  Status atomic(PeerIndex peer, const AtomicSpec& spec, uint64_t remote_addr, uint64_t key,
                UserContext ctx, pds::Mode mode, Time now);
  uint32_t max_atomic_bytes() const { return payload_per_packet_; }
  // Reads of at most this many bytes are answered with a copy of the memory taken when the
  // target serves them (or, if the answer must first wait for a tx slot, when the request
  // arrives), not with the memory as it is when the answer's packets leave. So a write
  // that arrives after such a read on the same ROD PDC cannot change what the read
  // returns: the provider's max_order_war_size. Larger reads stay zero-copy.
  static constexpr uint64_t kSnapshotReadBytes = 1024;
  // An idempotent write over RUDI: no PDC, each packet acknowledged by its own
  // response. Suits writes that are safe to repeat; immediate data is not carried
  // (a re-executed packet would report it twice).
  Status write_idempotent(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
                          uint64_t key, UserContext ctx);
  // Unreliable datagram (UUD): one packet, completes when handed to the datapath.
  Status send_datagram(PeerIndex peer, const void* buf, uint64_t len, UserContext ctx,
                       const SendSpec& spec);
  // Cancels a posted receive; it completes with kCanceled. kInvalidArgument if not posted.
  // A multi-receive buffer's kCanceled completion (released) comes after those of the
  // messages still landing in it.
  Status cancel_recv(UserContext ctx);
  // Looks for the first unexpected message `spec` would match, without receiving it
  // (MPI_Probe/MPI_Improbe). Completes spec.context at once: kOk with the message's
  // length, tag, data and source, or kNoMessage when none has arrived. A message whose
  // first packet is still missing has not arrived yet. kClaim sets the message aside
  // under `claim_key`; nothing else can match it after that.
  Status probe(const RecvSpec& spec, ProbeAction action, uint64_t claim_key);
  // Receives the message claimed under `claim_key` into spec (spec.discard drops it and
  // completes with length 0). Completes with kPeerUnreachable if its sender gave up on
  // it meanwhile; kInvalidArgument (no completion) when nothing was claimed under the key.
  Status recv_claimed(const RecvSpec& spec, uint64_t claim_key);

  Status register_memory(const MemoryRegion& region) { return regions_.add(region); }
  Status deregister_memory(uint64_t key) { return regions_.remove(key); }

  bool poll_completion(Completion& out) { return completions_.pop(out); }
  size_t pending_completions() const { return completions_.size(); }

  // --- engine-facing ----------------------------------------------------------------

  // Writes the SES header and payload of one packet. Returns bytes written and sets
  // `next` to the header type for the PDS prologue.
  size_t build_packet(pds::PacketRef ref, std::span<uint8_t> out, wire::NextHeader& next) const;
  // The headers alone (the simulator's header-only packets; build_packet adds the
  // payload after them): returns their length, 0 if `out` is too small or the packet
  // has nothing to carry, and sets `payload_bytes` to the payload that follows them.
  size_t build_header(pds::PacketRef ref, std::span<uint8_t> out, wire::NextHeader& next,
                      uint32_t& payload_bytes) const;
  // Where the payload of packet `ref` lies in the message's memory, for datapaths that
  // gather it instead of build_packet copying it; build_header gives its length. It
  // stays valid while the message is in flight (the application may not touch it).
  const uint8_t* payload_source(pds::PacketRef ref) const;
  // A packet PDS accepted (or a UUD datagram when `datagram`): `bytes` start at the SES
  // header and run to the end of the packet.
  RxResult on_packet(PeerIndex peer, wire::NextHeader next, std::span<const uint8_t> bytes,
                     bool datagram, Time now);
  // Takes what PDS reported since the last call (packets acknowledged, messages and
  // peers given up on; RUDI adds to the failures) and clears those lists, then sends
  // the MSG_ERRs for sends that just failed (see skips_). The engine calls it after
  // feeding PDS packets and timers.
  void take_pds_reports(Time now);
  void on_acked(std::span<const pds::PacketRef> refs);
  void on_failed(std::span<const pds::FailedMessage> failed, Time now);
  void on_peer_failed(std::span<const PeerIndex> peers, Time now);
  // Peers we wait on with nothing of ours in flight to them, so that only a probe can
  // tell if they died: those that owe us a response for an operation whose packets are
  // all acknowledged, and those that sent us part of a send and nothing since
  // SesConfig::stalled_send_probe_after. When such a peer fails, on_peer_failed ends
  // what waited on it.
  void peers_we_wait_on(std::vector<PeerIndex>& out, Time now);
  // Asks each of `peers` (from peers_we_wait_on) whether it is still there and still the
  // incarnation we know, with a probe: a NO_OP request, whose words name that
  // incarnation. A dead peer leaves it unanswered until its PDC fails (on_peer_failed);
  // a successor at its address refuses it as meant for its predecessor (the
  // stale-incarnation NACK), and the engine ends what waited on that one. PDS's own probe
  // (an ACK request) tells only the first: a successor answers it, over a PDC it takes
  // for a new one, and what waited on its predecessor waited for good. At most one probe
  // a peer is in flight. Peers there was no tx slot for go to `unprobed`, for PDS to
  // probe instead.
  void probe_peers(std::span<const PeerIndex> peers, Time now, std::vector<PeerIndex>& unprobed);
  // --- what a peer waiting on our send order is told (ses_order_query.cc) -------------
  // Words from peers that every send of theirs to us before an id has ended there, since
  // the last call: (peer, that id). The engine passes them on (pass_over_ended_ids) once
  // PDS holds nothing of the peer's that SES has not seen (a ROD line), since PDS
  // acknowledges such packets before SES takes them.
  std::span<const std::pair<PeerIndex, uint16_t>> order_words() const { return order_words_; }
  void clear_order_words() { order_words_.clear(); }
  // Passes over `peer`'s send ids from the next expected up to `before`, which its sender
  // says have all ended there: none has left a trace here (the next id expected never
  // names a message here), so we are not the engine that took them (a predecessor at
  // our address did, or nobody did and their MSG_ERRs are on the way); what waited
  // behind them is matched (ended_ids_passed_over).
  void pass_over_ended_ids(PeerIndex peer, uint16_t before, Time now);

  // RUDI: the next packet waiting to go out (peek, then advance once it is tracked);
  // the target's side (execute, answer with a return code); the initiator's side.
  bool peek_rudi(pds::PacketRef& ref, PeerIndex& peer);
  void advance_rudi();
  RxResult on_rudi_request(PeerIndex peer, wire::NextHeader next, std::span<const uint8_t> bytes,
                           wire::ReturnCode& rc, uint16_t& msg_id);
  void on_rudi_response(pds::PacketRef ref, wire::ReturnCode rc);

  // Rendezvous receives waiting for the engine to copy them (SesConfig::direct_reads),
  // oldest first.
  bool pop_direct_read(DirectRead& out) {
    if (direct_reads_head_ == direct_reads_.size()) return false;
    out = direct_reads_[direct_reads_head_++];
    if (direct_reads_head_ == direct_reads_.size()) {
      direct_reads_.clear();
      direct_reads_head_ = 0;
    }
    return true;
  }
  // The engine is done with `r`: `copied` when every byte was placed (the receive
  // completes and the sender is told); otherwise the message is read through the network
  // as without direct reads. Stale entries (the receive ended meanwhile) are ignored.
  void direct_read_done(const DirectRead& r, bool copied, Time now);
  // False once the receive `r` fills has ended otherwise (its peer failed): stop copying
  // into a buffer that may be the application's again.
  bool direct_read_wanted(const DirectRead& r) const {
    return rx_.in_use(r.slot) && rx_[r.slot].direct_read_pending && rx_[r.slot].peer == r.peer &&
           rx_[r.slot].msg_id == r.msg_id;
  }

  // The sender's half of direct reads (SesConfig::direct_reads): each rendezvous send's
  // key, offered when the send starts and withdrawn when it ends, in order. The engine
  // hands them to its datapath before the send's header can leave and before its
  // completion can be read (Engine::publish_readable_keys), so that a receiver's copy
  // which ends after the application may have reused the buffer is known to be void.
  std::vector<ReadableKeyChange>& readable_key_changes() { return readable_key_changes_; }

  // Sends what was waiting for tx slots (tx_waiters_), as far as slots allow. The engine
  // calls it on every progress; nothing to do costs one comparison.
  void resume_tx_waiters(Time now) {
    if (!tx_waiters_.empty()) resume_waiting(now);
  }

  // The table size (max_tx_messages, max_rx_messages) that leaves `share` slots outside
  // the reserve an eighth of it keeps (see reserved_slots): for an owner that knows how
  // many operations it will have in flight at once (the simulator).
  static uint32_t table_size_for(uint32_t share) {
    uint32_t size = share;
    while (size - reserved_slots(size) < share) ++size;
    return size;
  }

  // Datagrams waiting for the engine to transmit them (UUD bypasses PDS): `message` is
  // the datagram's ticket, for build_packet, datagram_sent and message_peer.
  bool pop_datagram(uint32_t& message) {
    if (datagrams_.empty()) return false;
    message = ticket(datagrams_.back());
    datagrams_.pop_back();
    return true;
  }
  void datagram_sent(uint32_t message);
  PeerIndex message_peer(uint32_t message) const {
    const uint32_t slot = live_slot(message);
    return slot == kNone ? pds::kNoPeer : tx_[slot].peer;
  }

  uint32_t payload_per_packet() const { return payload_per_packet_; }
  // Packets to `peer` may be `mtu_bytes` long (at least SesConfig::mtu_bytes, which
  // every path carries): a peer on this host reached through shared memory, whose
  // packets need not fit the network's MTU. Messages started from now on are cut for it;
  // datagrams and atomics stay within SesConfig::mtu_bytes. A receiver accepts packets
  // as long as the longest path it was told of.
  void set_peer_mtu(PeerIndex peer, uint32_t mtu_bytes);
  const SesStats& stats() const { return stats_; }
  uint32_t tx_in_use() const { return tx_.used(); }
  uint32_t probes_in_flight() const { return probes_in_flight_; }  // of tx_in_use (probe_peers)
  // --- peer incarnations (ses_incarnation.cc) -----------------------------------------
  uint16_t incarnation() const { return incarnations_.ours(); }
  // `peer`'s incarnation as we know it; 0 until it has sent us a request or told us.
  uint16_t peer_incarnation(PeerIndex peer) const { return incarnations_.of(peer); }
  // Reads the incarnation words of a request from `peer` whose SES header type is
  // `next` (anything but a standard request is kCurrent), learns the peer's incarnation
  // the first time and, for a request `over_pdc`, owes it a hello (send_hellos) when it
  // does not know ours (UUD and RUDI need no PDC, and a hello would open one). On
  // kRestarted, `incarnation` is the new one: the engine then has PDS forget the peer's
  // PDCs and calls on_peer_restarted before the packet goes on. The caller drops the
  // packet on kRetired and kStaleView; on kStaleView `incarnation` is the sender's, which
  // the NACK the engine answers with (over a PDC) echoes beside ours.
  SenderIncarnation check_incarnation(PeerIndex peer, wire::NextHeader next,
                                      std::span<const uint8_t> bytes, bool over_pdc, Time now,
                                      uint16_t& incarnation);
  // `peer` restarted as `incarnation` (0: not known yet), and PDS has failed its PDCs:
  // takes PDS's reports, ends what the old incarnation left held here whatever its age
  // (as end_sends_of does for a dead sender), drops the MSG_ERRs owed to it, forgets its
  // ids, and starts both send orders again from 0, as the new incarnation's are.
  void on_peer_restarted(PeerIndex peer, uint16_t incarnation, Time now);
  // Whether `peer` may be a successor of an engine that acknowledged requests of ours,
  // which we learned of from its first request (PeerIncarnations::unvouched).
  bool peer_may_lack_our_order(PeerIndex peer) const { return incarnations_.unvouched(peer); }
  // `peer` was such a successor: it refused a request of ours as meant for its
  // predecessor, and PDS has failed the PDCs we opened to it (Pds::fail_our_pdcs_with).
  // Takes PDS's reports, drops the MSG_ERRs owed to the predecessor and starts our send
  // order to the peer again from 0. Its order to us, which we have taken from its first
  // request on, goes on.
  void on_peer_lost_our_order(PeerIndex peer, Time now);
  uint32_t rx_in_use() const { return rx_.used(); }
  // Tx slots set aside for answers that rx messages will send (see promise_tx).
  uint32_t tx_promised() const { return tx_promised_; }

 private:
  enum class TxKind : uint8_t {
    kEager,
    kRendezvous,
    kWrite,
    kRead,
    kReadResponse,
    kResponse,
    kDatagram,
    kSkip,  // MSG_ERR: tells the target a send id will never arrive, or a write will not finish
    kAtomic,
    kHello,        // NO_OP: tells a peer that sends to us without knowing it our incarnation
    kProbe,        // NO_OP: asks a peer we wait on whether it is still the one we know
    kOrderAnswer,  // NO_OP: tells a peer waiting on our send order which of its ids ended
  };
  static constexpr uint32_t kNone = 0xffffffff;
  // A tx message's name towards PDS (TxRun::message, hence PacketRef::message and
  // FailedMessage::message): its slot in the low kTicketSlotBits bits and, above them,
  // the slot's generation, which moves on every time the slot is taken. PDS stores the
  // value without interpreting it. A report or a packet request that outlived its message
  // names an old generation and is dropped (SesStats::stale_tickets) instead of being
  // applied to the message now in the slot: counting an acknowledgement it never had, or
  // building a packet from its buffer past its end (a heap overflow once, see
  // Pds::fail_messages_on). Generations stop short of PDS's control values
  // (pds::kProbeMessage and up), which no ticket may equal.
  static constexpr uint32_t kTicketSlotBits = 20;
  static constexpr uint32_t kMaxTxMessages = 1u << kTicketSlotBits;
  static constexpr uint32_t kTicketGenerations = (0xffffffffu >> kTicketSlotBits);  // 0..4094
  static_assert(((kTicketGenerations - 1) << kTicketSlotBits | (kMaxTxMessages - 1)) <
                pds::kProbeMessage);
  uint32_t ticket(uint32_t slot) const {
    return slot | (uint32_t{tx_generation_[slot]} << kTicketSlotBits);
  }
  // The slot `t` names while its message is still there; kNone once that has ended.
  uint32_t live_slot(uint32_t t) const {
    const uint32_t slot = t & (kMaxTxMessages - 1);
    return tx_.in_use(slot) && ticket(slot) == t ? slot : kNone;
  }
  // What an rx message waits in tx_waiters_ to send, for want of a tx slot: a matched
  // rendezvous receive its read request; a read request taken while the table was full
  // its read response; a complete write its response.
  // An atomic its answer (the rx message's `total`: the bytes it modified; its
  // `unexpected` buffer: the old values, when it fetched and succeeded).
  enum class TxWait : uint8_t {
    kNone,
    kRendezvousRead,
    kReadResponse,
    kWriteResponse,
    kAtomicResponse
  };

  // One outgoing message; in tx_, owned by SES until finished.
  struct TxMessage {
    pds::TxRun run;
    TxKind kind = TxKind::kEager;
    OpKind op = OpKind::kSend;
    bool user_op = false;  // report a completion to the user
    PeerIndex peer = pds::kNoPeer;
    uint16_t msg_id = 0;
    uint8_t skip_failed_tries = 0;  // kSkip: MSG_ERRs for this id that failed before it
    const uint8_t* src = nullptr;   // payload source (sends, writes, read responses)
    uint8_t* dst = nullptr;         // read destination
    uint64_t length = 0;
    uint64_t remote_addr = 0;
    uint64_t key_or_tag = 0;
    SendSpec spec;
    uint32_t packet_count = 0;
    uint32_t payload_per_packet = 0;  // what each packet but the last carries: the peer's
    uint32_t packets_acked = 0;
    bool needs_response = false;
    bool response_received = false;
    bool failing = false;
    bool rudi_queued = false;      // RUDI: packets still to send; the queue refers to this slot
    bool over_rudi = false;        // an idempotent write: no PDC, no state at the target
    bool awaiting_listed = false;  // in awaiting_: all packets acknowledged, response due
    uint64_t bytes_received = 0;   // read: data arrived so far
    Status status = Status::kOk;
    UserContext context = 0;
    wire::ReturnCode return_code = wire::ReturnCode::kOk;  // kResponse
    uint64_t rendezvous_key = 0;     // kRendezvous: the internal region exposing src
    uint32_t rendezvous_rx = kNone;  // internal kRead: the receive it fills
    // A rendezvous send's source buffer is read by the peer through read responses that
    // copy from it on every (re)transmission, so the send completes (and hands the buffer
    // back to the application) only after they are all acknowledged.
    uint32_t read_responses = 0;  // kRendezvous: read responses in flight copying from src
    // kRendezvous: a tx slot is promised (tx_promised_) for the read response that serves
    // the receiver's read, until that read comes or the send ends (see Ses::send).
    bool read_response_promised = false;
    uint32_t rendezvous_tx = kNone;  // kReadResponse: the rendezvous send whose src it reads
    bool source_gone = false;        // kReadResponse: that send ended anyway (failure); no payload
    // kReadResponse: answers a peer's read of registered memory (not a rendezvous read or
    // an atomic's old values), reported as kRemoteRead when it ends well.
    bool serves_remote_read = false;
    // kAtomic: the operation, and for the compare-and-swap family its values (bits,
    // zero-extended); `src` holds the operands, `dst` the result buffer when fetching.
    wire::AmoOpcode amo_op = wire::AmoOpcode::kSum;
    wire::AmoDatatype amo_type = wire::AmoDatatype::kUint64;
    bool fetching = false;
    uint64_t amo_compare = 0;
    uint64_t amo_swap = 0;
  };

  // One incoming message being assembled; in rx_, owned by SES until delivered.
  struct RxMessage {
    PeerIndex peer = pds::kNoPeer;
    uint16_t msg_id = 0;
    // Tx slots set aside for what this message will make us send: a write's response,
    // a rendezvous receive's read and response (see promise_tx).
    uint8_t tx_promised = 0;
    TxWait tx_wait = TxWait::kNone;  // in tx_waiters_, for this
    bool is_write = false;
    bool rendezvous = false;
    bool tagged = false;
    uint64_t tag = 0;
    uint64_t total = 0;
    uint64_t received = 0;
    bool som_seen = false;
    bool has_data = false;
    uint64_t data = 0;
    bool awaiting_order = false;  // arrived before an earlier send from this peer
    bool skip = false;            // a MSG_ERR marker: the id is consumed with no message
    bool matched = false;
    bool claimed = false;  // set aside by a probe; in claimed_, not in the unexpected FIFO
    RecvSpec recv;
    std::unique_ptr<uint8_t[]> unexpected;  // eager data held before a match; not zeroed
    uint32_t next_unexpected = kNone;
    Status status = Status::kOk;
    uint64_t read_offset = 0;  // rendezvous: the sender's buffer address
    uint64_t read_key = 0;
    // Rendezvous: the sender's incarnation as we knew it when it offered the buffer. A
    // successor of that sender has no such buffer (see advertiser_gone).
    uint16_t sender_incarnation = 0;
    bool direct_read_pending = false;  // handed to the engine as a DirectRead
    bool direct_read_failed = false;   // it could not copy: read through the network
    Time last_packet{};  // a send or write: when its latest packet arrived (see held_messages_)
    // Whether its start and every byte are in.
    bool whole() const { return som_seen && received == total; }
  };

  static uint64_t id_key(PeerIndex peer, uint16_t id) { return (uint64_t{peer} << 16) | id; }
  // A message in a list of ours (awaiting_, held_messages_), named by its tx or rx slot
  // and checked against the slot's peer and id when read: the slot may have been freed
  // and reused since, which leaves the entry stale, not wrong.
  struct ListedMessage {
    uint32_t slot;
    PeerIndex peer;
    uint16_t msg_id;
  };
  // Tx slots in use, plus those promised to rx messages. A message that will have to
  // answer (a write, a rendezvous receive) has its answers' slots promised when there is
  // room, and redeems them as it sends each; without room its answer waits for one
  // (tx_waiters_). Either way no answer is dropped for want of a slot, which left the
  // peer's write waiting forever, and no request is refused for want of one, which held
  // its PDC's PSN window (shared with our own answers to that peer) until none could move.
  uint32_t tx_committed() const { return tx_.used() + tx_promised_; }
  bool tx_room_for(uint32_t n) const { return tx_committed() + n <= tx_.capacity(); }
  void promise_tx(RxMessage& m, uint8_t n) {
    m.tx_promised = static_cast<uint8_t>(m.tx_promised + n);
    tx_promised_ += n;
  }
  void redeem_tx(RxMessage& m) {
    if (m.tx_promised == 0) return;
    --m.tx_promised;
    --tx_promised_;
  }
  // Gives back a rendezvous send's promised slot (see Ses::send); true if it held one.
  bool release_read_response_promise(TxMessage& m) {
    if (!m.read_response_promised) return false;
    m.read_response_promised = false;
    --tx_promised_;
    return true;
  }
  // Sends from one peer are matched in its order, so a send that arrives early holds an
  // rx slot until the ones before it are in. If early ones filled the table, the next in
  // order could never get a slot and none would be released (a chaos run with 16 slots
  // stalled so: a ROD send refused behind RUD sends waiting for it). So the last slots
  // go only to a send that is next in its sender's order, which can always be released.
  bool rx_room_for(PeerIndex peer, uint16_t id, bool ordered) const {
    return rx_.used() < rx_unordered_limit_ || (ordered && id == expect_seq_[peer]);
  }
  // Tx slots kept for answers to peers (see check_operation), and rx slots kept for
  // sends next in order (see rx_room_for): an eighth, at least 2 (a rendezvous receive
  // needs a read and a response), never all of them.
  static uint32_t reserved_slots(uint32_t capacity) {
    return capacity < 2 ? 0 : std::min(capacity - 1, std::max<uint32_t>(2, capacity / 8));
  }

  // ses_tx.cc
  Status start(uint32_t slot, pds::Mode mode, Time now);
  // A fresh tx slot for a message of `len` bytes to `peer`, or kNone when all are taken.
  // A plain index, not an optional: returning the optional went through the stack as
  // two narrow stores read back by one wide load, a stall on every message sent.
  uint32_t new_tx(TxKind kind, PeerIndex peer, uint64_t len);
  Status check_operation(PeerIndex peer, const void* buf, uint64_t len) const;
  std::optional<uint32_t> new_write(PeerIndex peer, const void* local, uint64_t len,
                                    uint64_t remote_addr, uint64_t key, UserContext ctx);
  std::optional<uint32_t> new_read(PeerIndex peer, uint8_t* dst, uint64_t len, uint64_t remote_addr,
                                   uint64_t key);
  uint16_t next_rma_id(PeerIndex peer);
  static uint32_t packets_for(uint64_t len, uint32_t payload_per_packet);
  Status queue_response(PeerIndex peer, uint16_t msg_id, wire::ReturnCode rc, uint64_t length,
                        Time now);

  // ses_tx_completion.cc
  void maybe_finish(uint32_t slot);
  void finish_tx(uint32_t slot);
  // A rendezvous send ends while read responses still copy from its buffer (it failed):
  // they stop carrying payload, so the buffer may go back to the application now.
  void detach_read_responses(uint32_t send);

  // ses_rx.cc
  RxResult on_request(PeerIndex peer, std::span<const uint8_t> bytes, bool datagram, Time now);
  RxResult on_eager(PeerIndex peer, const wire::SesStandardRequest& h,
                    std::span<const uint8_t> payload, bool datagram);
  RxResult on_rendezvous(PeerIndex peer, const wire::SesStandardRequest& h,
                         const wire::RendezvousExtension& x, Time now);
  RxResult on_response(PeerIndex peer, const wire::SesResponse& r);
  RxResult on_read_data(PeerIndex peer, const wire::SesResponseWithData& r,
                        std::span<const uint8_t> payload);
  void admit_in_order(PeerIndex peer, uint32_t slot, Time now);
  void release_in_order(PeerIndex peer);
  RxResult on_skip(PeerIndex peer, uint16_t id);
  // What a NO_OP's `buffer_offset` (unused by UET for NO_OP) says in Spray: a probe
  // names the send id its sender waits for from us next (kNoOpWaitsFor | id), an answer
  // to it the id before which every send of ours to it has ended (kNoOpEndedBefore |
  // id); a hello carries 0. Ids are 15 bits.
  static constexpr uint64_t kNoOpWaitsFor = uint64_t{1} << 63;
  static constexpr uint64_t kNoOpEndedBefore = uint64_t{1} << 62;
  // Whether send id `id` of `peer` is behind the next one expected from it: its turn has
  // come (its first packet matched or queued), whatever became of it since. Ids are 15
  // bits; the half of them below expect_seq_ counts as behind.
  bool behind_order(PeerIndex peer, uint16_t id) const {
    return static_cast<uint16_t>((id - expect_seq_[peer]) & 0x7fff) >= 0x4000;
  }
  // Whether `slot` is a send received in part: an eager send that has not had its start
  // and every byte yet.
  bool received_in_part(uint32_t slot) const {
    const RxMessage& m = rx_[slot];
    return !m.is_write && !m.rendezvous && !m.skip && !m.whole();
  }
  // Whether rendezvous message `m`'s sender has restarted since it offered its buffer:
  // reading it would ask the successor for a key it never made, and a response would
  // name an id of the successor's own order.
  bool advertiser_gone(const RxMessage& m) const {
    return m.sender_incarnation != incarnations_.of(m.peer);
  }
  // Whether `slot` is an RMA write to us received in part.
  bool write_in_part(uint32_t slot) const {
    const RxMessage& m = rx_[slot];
    return m.is_write && !m.whole();
  }
  void unlink_unexpected(uint32_t slot);
  void take_unexpected(uint32_t slot, uint32_t prev);

  // ses_failed_sender.cc
  // Drops write `slot`, received in part, whose initiator failed, and remembers its id
  // (ended_writes_).
  void end_partial_write(uint32_t slot);
  // Ends send `slot`, which will never be whole: a matched receive completes with
  // kPeerUnreachable, a probe's claim on it reports the loss, and it leaves the unexpected
  // queue. Its id stays consumed.
  void end_partial_send(uint32_t slot);
  // Whether a held_messages_ entry still names the message it was listed for, and that
  // message still waits on its sender: a send or RMA write received in part, or a send
  // behind an id of its sender's that has not come.
  bool still_held(const ListedMessage& a) const;
  // Whether rx message `slot` has had no packet for SesConfig::stalled_send_probe_after.
  bool stalled(uint32_t slot, Time now) const {
    return now - rx_[slot].last_packet >= cfg_.stalled_send_probe_after;
  }
  void list_held_message(uint32_t slot);
  // The senders of held messages that have had no packet since
  // SesConfig::stalled_send_probe_after, added to `out` once each.
  void stalled_senders(std::vector<PeerIndex>& out, Time now);
  // Ends what `peers`, which failed, left waiting here, as their MSG_ERRs would have:
  // every partial send or write that has stalled (nothing of it for
  // SesConfig::stalled_send_probe_after; receives_abandoned, writes_abandoned), then the
  // ids that never came ahead of a stalled send that waits for its turn
  // (pass_over_missing_ids). What is still arriving is left to finish: its sender is not
  // dead.
  // `whatever_their_age`: every such message, not only the stalled ones (the sender
  // restarted, so nothing more of them comes).
  void end_sends_of(std::span<const PeerIndex> peers, Time now, bool whatever_their_age = false);
  // Passes over `peer`'s send ids that never came, up to the farthest of its sends that
  // has waited behind them since SesConfig::stalled_send_probe_after, so that those are
  // matched in order (missing_ids_passed_over).
  void pass_over_missing_ids(PeerIndex peer, Time now, bool whatever_their_age = false);
  // ses_incarnation.cc
  // Sends a hello (a NO_OP request, whose incarnation words tell) to each peer owed one
  // whose time has come and that has not learned ours meanwhile, as tx slots allow; the
  // rest stay owed.
  void send_hellos(Time now);
  // Starts a NO_OP request of `kind` (kHello, kProbe, kOrderAnswer) to `peer`, saying
  // `word` of the send order (on_no_op): nullopt when no tx slot is free, else what
  // start said.
  std::optional<Status> start_no_op(TxKind kind, PeerIndex peer, Time now, uint64_t word = 0);
  // ses_order_query.cc: a NO_OP request's `buffer_offset` (0 on a hello), and answering
  // a probe that says which of our send ids its sender waits for.
  RxResult on_no_op(PeerIndex peer, uint64_t word, Time now);
  void answer_order_query(PeerIndex peer, uint16_t waits_for, Time now);
  // Our send order to `peer` starts again from 0, as a new incarnation of it expects:
  // the MSG_ERRs owed to it (ids of the old order) are dropped unsent.
  void start_send_order_again(PeerIndex peer);
  // A send id whose message failed, how many MSG_ERRs for it failed too, and when the
  // next may go (the next send to the peer takes it along sooner).
  struct Skip {
    PeerIndex peer;
    uint16_t id;
    uint8_t failed_tries;
    Time not_before;
  };
  // MSG_ERRs that fail are sent again at once this many times (a lossy moment), then
  // kSkipLateTries more times, the first kSkipFirstLateGap after the last failure and
  // each gap twice the one before up to kSkipMaxLateGap: with a PDC's own retries, about
  // 8 s in all, so a peer cut off for that long still learns the id is skipped and
  // delivers what we sent after it (its sends completed here). After that only ahead of
  // the next send to the peer, so a dead peer is not sent them forever.
  static constexpr uint8_t kSkipTriesAtOnce = 3;
  static constexpr uint8_t kSkipLateTries = 12;
  static constexpr Duration kSkipFirstLateGap = Duration::milliseconds(10);
  static constexpr Duration kSkipMaxLateGap = Duration::seconds(1);
  static Time skip_due(uint8_t failed_tries, Time now);
  // Sets next_skip_due_ from skips_.
  void find_next_skip_due();
  // The first half of take_pds_reports: PDS's reports applied, nothing sent.
  void apply_pds_reports(Time now);
  // Whether the skip still has tries that go on a timer (at once or late).
  static bool skip_timed(const Skip& k) {
    return k.failed_tries < kSkipTriesAtOnce + kSkipLateTries;
  }
  // Sends MSG_ERR for the queued skips `due` picks, those that fit in the user's share
  // of the pool now (as the send they may precede must); the rest stay queued.
  template <class Due>
  void send_skips(Due due, Time now);
  void match_or_queue(uint32_t slot, Time now);
  void bind(uint32_t slot, const RecvSpec& recv, Time now);
  void try_deliver(uint32_t slot);
  void complete_receive(const RxMessage& m, Status status, uint64_t placed);
  Status post_multi_recv(const RecvSpec& spec);
  void push_multi_canceled(const RecvSpec& recv);
  void push_receive_completion(const RecvSpec& recv, PeerIndex peer, uint64_t total,
                               uint64_t placed, Status status, uint64_t tag, bool has_data,
                               uint64_t data);
  void start_rendezvous_read(uint32_t slot, Time now);
  void finish_rendezvous_receive(uint32_t rx_slot, Status status, Time now);
  void free_rx(uint32_t slot);
  // ses_target.cc
  RxResult on_write(PeerIndex peer, const wire::SesStandardRequest& h,
                    std::span<const uint8_t> payload, Time now);
  RxResult on_read(PeerIndex peer, const wire::SesStandardRequest& h, Time now);
  // `taken`: the bytes, copied when the request arrived (a small read that waited for a
  // tx slot); null to read them from the region now.
  void serve_read(PeerIndex peer, uint16_t id, uint64_t key, uint64_t offset, uint64_t length,
                  Time now, const uint8_t* taken = nullptr);
  void answer_write(uint32_t rx_slot, Time now);
  // A completion of remote-access kind `op` (see is_remote_access): `peer` accessed
  // `length` bytes of region `key`. Returned for the caller to add what else it knows.
  Completion& report_remote_access(OpKind op, PeerIndex peer, uint64_t key, uint64_t length);
  void wait_for_tx(uint32_t rx_slot, TxWait what);
  void resume_waiting(Time now);
  // ses_atomic.cc
  RxResult on_atomic(PeerIndex peer, const wire::SesStandardRequest& h,
                     std::span<const uint8_t> rest, Time now);
  wire::ReturnCode execute_atomic(PeerIndex peer, const wire::SesStandardRequest& h,
                                  const wire::AtomicExtension& x, uint64_t compare, uint64_t swap,
                                  std::span<const uint8_t> operands, uint8_t* old_values);
  // Answers an atomic: with its old values as read data when there are any (it fetched
  // and succeeded), else with a response carrying `rc` and the bytes it `modified` (0 on
  // error). Needs one tx slot, which the caller made sure of.
  void answer_atomic(PeerIndex peer, uint16_t id, wire::ReturnCode rc, uint32_t modified,
                     std::span<const uint8_t> old_values, Time now);
  // Tx slot `slot`'s buffer for the `bytes` its answer carries (answer_copies_).
  uint8_t* answer_copy(uint32_t slot, uint64_t bytes);
  // The packet bytes of an atomic's extension for tx message `m`, after its standard header.
  size_t build_atomic_extension(const TxMessage& m, std::span<uint8_t> out) const;

  SesConfig cfg_;
  pds::Pds& pds_;
  uint32_t payload_per_packet_;      // on every path (cfg_.mtu_bytes): datagrams, atomics
  uint32_t max_payload_per_packet_;  // on the widest path a peer may have (set_peer_mtu)
  std::vector<uint32_t> peer_mtu_;   // per peer: UET bytes per packet on its path
  SlotPool<TxMessage> tx_;
  std::vector<uint16_t> tx_generation_;  // per tx slot, < kTicketGenerations (see ticket)
  uint32_t user_tx_limit_;               // user operations may start only below this many committed
  uint32_t tx_promised_ = 0;             // the sum of tx_promised over rx_ messages in use
  SlotPool<RxMessage> rx_;
  uint32_t rx_unordered_limit_;   // rx_ slots beyond this go only to a peer's next send
  FlatMap tx_by_id_;              // (peer, msg id) -> tx slot, for messages awaiting a response
  FlatMap tx_by_rendezvous_key_;  // rendezvous key -> its send's tx slot
  FlatMap rx_by_id_;              // (peer, msg id) -> rx slot
  PostedReceives posted_;
  MemoryRegionTable regions_;
  CompletionQueue completions_;
  std::vector<uint16_t> send_seq_;        // per peer: next send id to use
  std::vector<uint16_t> expect_seq_;      // per peer: next send id to match
  std::vector<uint8_t> probing_;          // per peer: 1 while a probe of ours is in flight to it
  uint32_t probes_in_flight_ = 0;         // peers with probing_ set
  std::vector<uint8_t> answering_order_;  // per peer: 1 while a kOrderAnswer is in flight
  PeerIncarnations incarnations_;         // ours, our peers', their hellos
  // Peers' words that their sends before an id have ended (order_words()).
  std::vector<std::pair<PeerIndex, uint16_t>> order_words_;
  uint16_t rma_counter_ = 0;
  uint64_t rendezvous_keys_ = 0;
  uint32_t unexpected_head_ = kNone;  // FIFO of unmatched rx messages
  uint32_t unexpected_tail_ = kNone;
  std::vector<uint32_t> datagrams_;
  std::vector<DirectRead> direct_reads_;  // FIFO from direct_reads_head_
  size_t direct_reads_head_ = 0;
  std::vector<ReadableKeyChange> readable_key_changes_;  // see readable_key_changes()
  // Messages a probe claimed: (claim key, rx slot or kNone once its sender gave up on
  // it). Slow path (MPI_Mprobe); a handful of entries at most.
  std::vector<std::pair<uint64_t, uint32_t>> claimed_;
  // RUDI writes with packets not yet sent, a FIFO ring: each entry is a distinct tx
  // slot, so max_tx_messages entries always suffice.
  std::vector<uint32_t> rudi_queue_;
  size_t rudi_head_ = 0;
  size_t rudi_count_ = 0;
  std::vector<uint32_t> finishing_;  // scratch for two-phase failure handling
  // Send ids whose message failed: the target must be told to skip them, or it would
  // wait for them forever before matching anything newer from us. Sent as MSG_ERR as
  // soon as the failure is reported (take_pds_reports), not only ahead of the next send
  // to that peer: sends on other PDCs (the other mode, or a new PDC opened after the
  // failure) may have completed at our end and wait at the target behind the failed id,
  // and no later send may come (chaos runs with 4 retries per PSN left such messages
  // undelivered for good). Slow path: empty in normal operation.
  std::vector<Skip> skips_;
  std::vector<std::pair<PeerIndex, uint16_t>> skips_sent_;  // MSG_ERRs in tx slots
  // A MSG_ERR goes within the user's share of the tx table, keeping room for the send it
  // may precede; or beyond it if it is the oldest of its peer's, waiting or sent. The
  // target holds our later sends until it learns of the failed ones, so when those later
  // sends fill the user's share only a MSG_ERR beyond it can end the wait (faults sweep
  // seed 80352, 5-slot tables: the target's rx table full of sends waiting behind three
  // failed ones, our share full of sends it refused, their MSG_ERRs waiting for room, for
  // good). The oldest, because only the id next in the target's order is sure to be taken
  // when its rx table is full; a newer one is refused and holds its slot (seed 81037,
  // where one MSG_ERR at a time beyond the share was a newer one, for good). So beyond
  // the share a peer has one MSG_ERR in flight, and MSG_ERRs to dead peers, which hold
  // their slots until their PDC fails, take at most one of the slots kept for answers
  // each.
  // A failed write's MSG_ERR (an RMA id) holds back nothing at the target, which takes
  // RMA in any order: it goes within the user's share only, and is no send's elder.
  bool room_for_a_skip(const Skip& k) const {
    if (tx_committed() + 1 < user_tx_limit_) return true;
    return !is_rma_id(k.id) && tx_room_for(1) && oldest_skip_of_its_peer(k);
  }
  static bool is_rma_id(uint16_t id) { return (id & 0x8000) != 0; }
  // How long ago send id `id` to `peer` was given (1: the last one); larger is older.
  uint16_t send_age(PeerIndex peer, uint16_t id) const {
    return static_cast<uint16_t>((send_seq_[peer] - id) & 0x7fff);
  }
  bool oldest_skip_of_its_peer(const Skip& k) const {
    const uint16_t age = send_age(k.peer, k.id);
    for (const Skip& o : skips_) {
      if (o.peer == k.peer && !is_rma_id(o.id) && send_age(o.peer, o.id) > age) return false;
    }
    for (const auto& [peer, id] : skips_sent_) {
      if (peer == k.peer && !is_rma_id(id) && send_age(peer, id) > age) return false;
    }
    return true;
  }
  // The earliest not_before among skips with tries on a timer left (skip_timed); none:
  // INT64_MAX. take_pds_reports, called per packet, looks at skips_ only from then on,
  // so skips that wait for the next send (a dead peer's) cost the fast path nothing.
  Time next_skip_due_{INT64_MAX};
  // Messages whose packets are all acknowledged while their response is still due.
  // Bounded by the pool.
  std::vector<ListedMessage> awaiting_;
  // Messages that may wait on their sender: eager sends and RMA writes of more than one
  // packet, listed when their first packet arrives, and sends that arrive ahead of an
  // earlier one of their sender's, so that a sender that stops halfway or dies with an
  // id missing is noticed (peers_we_wait_on) and what it left ended when it fails
  // (end_sends_of).
  // Entries whose slot has since completed, been reused or stopped waiting are stale and
  // dropped when next looked through; reserved to max_rx_messages, which bounds the live
  // ones.
  std::vector<ListedMessage> held_messages_;
  // RMA writes ended here in part because their initiator failed (end_sends_of): their
  // late packets are refused (on_write).
  EndedWriteIds ended_writes_;
  // Rx messages waiting for a tx slot to send their answer (see TxWait; oldest first; an
  // entry whose slot no longer has tx_wait set is stale), and the list being worked
  // through. Bounded by the pool, reserved once.
  std::vector<uint32_t> tx_waiters_, tx_resuming_;
  // Per tx slot, the bytes an answer carries that must not change until it is
  // acknowledged (they outlive retransmissions): a fetching atomic's old values, or a
  // small read's copy (kSnapshotReadBytes). Made the first time a slot carries one, as
  // large as it needs (at least kSnapshotReadBytes, at most a packet's payload), and
  // kept, so steady state allocates nothing. atomic_scratch_: where an atomic leaves its
  // old values before its answer has a slot.
  struct AnswerCopy {
    std::unique_ptr<uint8_t[]> bytes;
    uint64_t capacity = 0;
  };
  std::vector<AnswerCopy> answer_copies_;
  std::vector<uint8_t> atomic_scratch_;
  Time now_{};
  SesStats stats_;
};

// Maps a target's SES return code to the status the initiator reports.
Status status_from_return_code(wire::ReturnCode rc);
wire::ReturnCode return_code_from_status(Status s);

}  // namespace spray::ses
