// Engine: one transport endpoint. Ties SES, PDS and congestion control to a Datapath
// and to time supplied by its owner (DESIGN.md decisions 1, 4 and 6).
//
// Single-threaded: the owner calls progress(now) in a loop (the provider from
// fi_cq_read, the simulator from its event loop). Each call moves one burst: receive
// and dispatch a batch, run due timers, send queued ACKs/NACKs, then send data from
// PDCs that have window. No allocation, lock or system call per packet here; the
// datapath does its own I/O once per burst.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <optional>

#include "transport/base/status.h"
#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/engine/peer_table.h"
#include "transport/pds/pds.h"
#include "transport/pds/rudi.h"
#include "transport/ses/ses.h"
#include "transport/tss/key_derivation.h"
#include "transport/tss/secure_channels.h"
#include "transport/wire/pds_header.h"

namespace spray::engine {

struct EngineConfig {
  // How often peers that owe us a response are probed for liveness.
  Duration probe_interval = Duration::milliseconds(1);
  pds::PdsConfig pds{};
  pds::RudiConfig rudi{};
  ses::SesConfig ses{};
  uint32_t max_peers = 65536;
  // Over a datapath that reaches the peers on this host through shared memory and the
  // others over the network (auto; it tells them apart with is_host_local), the unloaded
  // round trip of the network ones, for their PDCs' congestion control; pds.cc.base_rtt
  // is then the local ones'. They differ several times over (a kernel UDP round trip
  // against a shared-memory one), and NSCC caps its window at 1.5 x line rate x base RTT:
  // with the local figure a network peer's stream waits for ACKs. 0: pds.cc.base_rtt for
  // every peer.
  Duration network_base_rtt{};
  // UET TSS: when set, every packet this engine sends is sealed (AES-256-GCM under a
  // key derived from the domain's) and every packet it takes must open, or is dropped
  // and counted (tss_stats()). Every endpoint of a job must agree: a secured endpoint
  // and an unsecured one cannot talk. Costs SecureChannels::kOverheadBytes of each
  // packet's MTU. See transport/tss/secure_channels.h.
  std::optional<tss::TssConfig> security;
};

// The MTU an engine's SES and congestion control fill on a datapath of `datapath_mtu`
// bytes: less TSS's header and tag when packets are sealed (EngineConfig::security).
inline constexpr uint32_t ses_mtu_bytes(uint32_t datapath_mtu, bool secured) {
  return secured ? datapath_mtu - tss::SecureChannels::kOverheadBytes : datapath_mtu;
}

struct EngineStats {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_malformed = 0;     // failed a PDS decode or SES validation
  uint64_t rx_unknown_peer = 0;  // the peer table was full
  uint64_t rx_refused = 0;       // SES had no room; NACKed for a later retry
  uint64_t rx_rod_dropped = 0;   // held ROD packet SES found malformed at delivery
  uint64_t rx_rod_stalls = 0;    // times SES had no room for a held ROD packet: its line waits
  uint64_t rx_rod_behind = 0;    // times a ROD line waited behind its peer's older stalled one
  uint64_t rx_foreign_job = 0;   // SES named another job (JobID): ignored, see of_our_job
  uint64_t tx_no_buffer = 0;     // the datapath had no buffer; retried next progress
};

inline constexpr size_t kBurst = 32;
inline constexpr size_t kTxBatch = 64;

template <dp::Datapath D>
class Engine {
 public:
  Engine(D& datapath, EngineConfig config)
      : dp_(datapath),
        cfg_(adjust(std::move(config), datapath)),
        peers_(cfg_.max_peers),
        pds_(cfg_.pds),
        ses_(cfg_.ses, pds_),
        rudi_(cfg_.rudi) {
    if (cfg_.security) {
      tss_.emplace(*cfg_.security, datapath.local_address());
      tss::wipe(cfg_.security->domain_key);  // tss_ holds the one copy it needs
    }
    rudi_retransmits_.reserve(cfg_.rudi.max_outstanding);
    rudi_replies_.reserve(kBurst);  // one rx burst's worth; grows only under a flood
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- peers --------------------------------------------------------------------------
  PeerIndex add_peer(const dp::NetAddr& addr) { return learn_peer(addr); }
  // The index of `addr` if the engine knows it (added, or heard from).
  std::optional<PeerIndex> find_peer(const dp::NetAddr& addr) const { return peers_.find(addr); }
  const dp::NetAddr& peer_address(PeerIndex p) const { return peers_.address(p); }
  dp::NetAddr local_address() const { return dp_.local_address(); }

  // --- clock -------------------------------------------------------------------------
  // Operations are stamped with the engine's clock, which progress(now) sets. An owner
  // that may post without progressing first (manual progress after a pause, or a run of
  // posts under FI_MORE) moves the clock here before each post; otherwise a send that
  // waits for a PDC counts the time since the last progress as waited (cfg.pds.pdc_wait)
  // and may fail at once. The clock never moves back.
  void advance_clock(Time now) { now_ = std::max(now_, now); }

  // --- operations (forwarded to SES; each completes once via poll_completion) --------
  Status send(PeerIndex peer, const void* buf, uint64_t len, ses::UserContext ctx,
              const ses::SendSpec& spec = {}) {
    if (!known(peer)) return Status::kInvalidArgument;
    const Status s = ses_.send(peer, buf, len, ctx, spec, now_);
    publish_readable_keys();  // a rendezvous send's key, before its header can leave
    return s;
  }
  Status post_recv(const ses::RecvSpec& spec) {
    if (spec.source != pds::kNoPeer && !known(spec.source)) return Status::kInvalidArgument;
    return ses_.post_recv(spec);
  }
  Status write(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
               ses::UserContext ctx, const ses::SendSpec& spec = {}) {
    if (!known(peer)) return Status::kInvalidArgument;
    return ses_.write(peer, local, len, remote_addr, key, ctx, spec, now_);
  }
  Status read(PeerIndex peer, void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
              ses::UserContext ctx, pds::Mode mode = pds::Mode::kRud) {
    if (!known(peer)) return Status::kInvalidArgument;
    return ses_.read(peer, local, len, remote_addr, key, ctx, mode, now_);
  }
  Status atomic(PeerIndex peer, const ses::AtomicSpec& spec, uint64_t remote_addr, uint64_t key,
                ses::UserContext ctx, pds::Mode mode = pds::Mode::kRud) {
    if (!known(peer)) return Status::kInvalidArgument;
    return ses_.atomic(peer, spec, remote_addr, key, ctx, mode, now_);
  }
  uint32_t max_atomic_bytes() const { return ses_.max_atomic_bytes(); }
  Status write_idempotent(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
                          uint64_t key, ses::UserContext ctx) {
    if (!known(peer)) return Status::kInvalidArgument;
    return ses_.write_idempotent(peer, local, len, remote_addr, key, ctx);
  }
  Status send_datagram(PeerIndex peer, const void* buf, uint64_t len, ses::UserContext ctx,
                       const ses::SendSpec& spec = {}) {
    if (!known(peer)) return Status::kInvalidArgument;
    return ses_.send_datagram(peer, buf, len, ctx, spec);
  }
  Status cancel_recv(ses::UserContext ctx) { return ses_.cancel_recv(ctx); }
  Status probe(const ses::RecvSpec& spec, ses::ProbeAction action, uint64_t claim_key = 0) {
    if (spec.source != pds::kNoPeer && !known(spec.source)) return Status::kInvalidArgument;
    return ses_.probe(spec, action, claim_key);
  }
  Status recv_claimed(const ses::RecvSpec& spec, uint64_t claim_key) {
    return ses_.recv_claimed(spec, claim_key);
  }
  Status register_memory(const ses::MemoryRegion& r) { return ses_.register_memory(r); }
  Status deregister_memory(uint64_t key) { return ses_.deregister_memory(key); }
  Status close(PeerIndex peer, pds::Mode mode = pds::Mode::kRud) {
    if (!known(peer)) return Status::kInvalidArgument;
    return pds_.close(peer, mode, now_);
  }
  // Before the engine goes away: starts closing all its PDCs (Pds::close_all). The owner
  // calls it, then progress(), until it returns 0 or the owner stops waiting.
  uint32_t close_all(Time now) { return pds_.close_all(now); }
  bool poll_completion(ses::Completion& out) {
    publish_readable_keys();  // ended sends' keys withdrawn before their completions show
    return ses_.poll_completion(out);
  }

  // --- progress -----------------------------------------------------------------------
  // One step: a receive burst, due timers, control packets, then data. Returns the
  // number of packets received and sent.
  size_t progress(Time now);
  // The transmit half of a step: what is ready to go (control packets, data the windows
  // allow, datagrams) leaves in one burst, without polling the receive side first. For
  // just after a post, so that the new message is not held behind a receive poll that
  // usually finds nothing (over kernel UDP a system call). Returns the packets sent.
  // Also sends the ACKs that earlier steps held back (see holds_acks) behind what it
  // sends, or alone once they are overdue.
  size_t transmit(Time now);
  // An ACK for a packet that asked for none at once (Pds::flush_acks) waits for a step
  // that sends something, at most PdsConfig::ack_hold_limit: a reply the application
  // posts after a poll or two that found nothing still carries it. An owner about to
  // sleep calls send_held_acks() first, so that no peer waits out the sleep for it.
  bool holds_acks() const { return pds_.holds_acks(); }
  size_t send_held_acks(Time now);  // returns the packets sent

  const EngineStats& stats() const { return stats_; }
  // What TSS sealed, opened and refused; all zero when the engine is not secured.
  const tss::TssStats& tss_stats() const {
    static const tss::TssStats kNone{};
    return tss_ ? tss_->stats() : kNone;
  }
  bool secured() const { return tss_.has_value(); }
  // The TSS state, for re-keying while running (SecureChannels::install_key, seal_with,
  // retire_key); nullptr when the engine is not secured.
  tss::SecureChannels* secure_channels() { return tss_ ? &*tss_ : nullptr; }
  pds::Pds& pds() { return pds_; }
  const pds::Pds& pds() const { return pds_; }
  ses::Ses& ses() { return ses_; }
  const PeerTable& peers() const { return peers_; }
  size_t memory_bytes() const {
    return sizeof(*this) + pds_.memory_bytes() + peers_.memory_bytes() +
           (tss_ ? tss_->memory_bytes() : 0);
  }

 private:
  static EngineConfig adjust(EngineConfig c, const D& datapath) {
    const uint32_t mtu = ses_mtu_bytes(datapath.mtu(), c.security.has_value());
    if constexpr (requires { datapath.entropy_values(); }) {  // see datapath.h
      const uint16_t values = datapath.entropy_values();
      if (values > 0 && c.pds.entropy_count > values) c.pds.entropy_count = values;
    }
    c.ses.mtu_bytes = mtu;
    c.ses.direct_reads = kDirectReads;
    c.ses.max_peers = c.max_peers;
    c.pds.cc.mtu_bytes = mtu;
    return c;
  }
  bool known(PeerIndex p) const { return p < peers_.size(); }
  // A datapath that sends payloads from where they lie (see PacketBuf::payload): data
  // packets then carry their headers alone and point at the message's memory.
  static constexpr bool kGathersPayload = requires { requires D::kGathersPayload; };
  // A datapath whose received packets do not carry the sender's EV (verbs): answers
  // are sprayed rather than returned on their request's EV.
  static constexpr bool kHidesArrivalEntropy = requires { requires D::kHidesArrivalEntropy; };
  // A datapath that can copy from a peer's memory (shared memory between processes):
  // rendezvous receives are then one copy, done here, instead of read requests. A
  // sender's datapath is told which rendezvous keys may be copied from (offered while
  // the send lives), and a copy made after its key was withdrawn fails.
  static constexpr bool kDirectReads = requires(D & d, const dp::NetAddr& a, uint8_t* p) {
    d.read_peer_memory(a, uint64_t{}, uint64_t{}, p, size_t{});
    d.offer_for_reading(uint64_t{});
    d.withdraw_from_reading(uint64_t{});
  };
  // Hands SES's offered and withdrawn rendezvous keys to the datapath, in order.
  void publish_readable_keys() {
    if constexpr (kDirectReads) {
      std::vector<ses::ReadableKeyChange>& changes = ses_.readable_key_changes();
      for (const ses::ReadableKeyChange& c : changes) {
        if (c.readable) {
          dp_.offer_for_reading(c.key);
        } else {
          dp_.withdraw_from_reading(c.key);
        }
      }
      changes.clear();
    }
  }
  // A datapath with paths of two kinds, shared memory on this host and the network
  // (auto): its network peers get EngineConfig::network_base_rtt, and its local peers
  // packets of host_local_mtu() bytes.
  static constexpr bool kSplitsLocalPeers = requires(D & d, const dp::NetAddr& a) {
    { d.is_host_local(a) } -> std::same_as<bool>;
    { d.host_local_mtu() } -> std::same_as<uint32_t>;
  };
  // The peer table's index of `addr`, adding it if new (kNoPeer when the table is full);
  // a new peer gets its path's base RTT and MTU (kSplitsLocalPeers). Decided once: a
  // peer whose endpoint opens on this host after we learnt it stays a network peer.
  PeerIndex learn_peer(const dp::NetAddr& addr) {
    const uint32_t known = peers_.size();
    const PeerIndex peer = peers_.insert(addr);
    if constexpr (kSplitsLocalPeers) {
      if (peer != pds::kNoPeer && peer >= known) {
        if (dp_.is_host_local(addr)) {
          ses_.set_peer_mtu(peer, ses_mtu_bytes(dp_.host_local_mtu(), cfg_.security.has_value()));
        } else if (cfg_.network_base_rtt.ps > 0) {
          pds_.set_peer_base_rtt(peer, cfg_.network_base_rtt);
        }
      }
    }
    return peer;
  }
  // Copies at most kDirectReadBytesPerProgress of the direct reads SES handed over, so one
  // large message cannot stall this engine's acknowledgements for milliseconds.
  void copy_direct_reads(Time now);
  static constexpr uint64_t kDirectReadBytesPerProgress = 1 << 20;
  // Bytes after which a transmit batch goes to the datapath before it holds kTxBatch
  // packets: D::kTxFlushBytes where a datapath's tx_burst is cheap and its peer waits on
  // it (shared memory); otherwise only full batches, as a system call per burst is dear
  // (over kernel UDP, flushing every 64 KiB cost 10-15 % of 1 MiB bandwidth).
  static constexpr size_t tx_flush_bytes() {
    if constexpr (requires { D::kTxFlushBytes; }) {
      return D::kTxFlushBytes;
    } else {
      return SIZE_MAX;
    }
  }
  // Whether a built packet counts toward tx_flush_bytes(): those D::flushes_early says
  // a peer waits on, where a datapath has paths of both kinds (auto: shared memory to
  // local peers, kernel UDP to the rest); every packet otherwise.
  bool counts_toward_flush(const dp::PacketBuf& b) {
    if constexpr (requires { dp_.flushes_early(b); }) {
      return dp_.flushes_early(b);
    } else {
      return true;
    }
  }

  // Both take `peer`, the peer table's index of the packet's source (kNoPeer for an
  // address not heard from yet), looked up once per packet by progress().
  // Returns true when the engine keeps the buffer (a ROD packet held for reordering).
  bool handle_packet(dp::PacketBuf* buf, PeerIndex peer, Time now);
  // Opens a received packet in place when the engine is secured (always true when not).
  // False: it did not open (counted in tss_stats) and is to be freed unread.
  bool open_packet(dp::PacketBuf* buf, PeerIndex peer);
  // The UET packet a received buffer holds, from its PDS header on: under TSS the
  // plaintext between the security header and the tag (which a trimmed packet lacks).
  std::span<const uint8_t> packet_bytes(const dp::PacketBuf& buf) const {
    if (!tss_) return {buf.data, buf.len};
    const bool trimmed = (buf.flags & dp::PacketBuf::kTrimmed) != 0;
    const uint32_t overhead =
        tss::SecureChannels::kHeaderBytes + (trimmed ? 0 : tss::SecureChannels::kIcvBytes);
    return {buf.data + tss::SecureChannels::kHeaderBytes, buf.len - overhead};
  }
  // Under TSS, the batch's packets are built behind room for the security header
  // (tx_buffer) and sealed here, just before they leave.
  void seal_tx_batch();
  // Whether a packet's SES header (`ses`: the bytes after its PDS header) carries our
  // JobID (ses.job_id). One that names another job is no business of this endpoint: it
  // is dropped before PDS sees it (no PDC opened, nothing acknowledged, no answer; from
  // an address we never heard of, before the address is learned) and counted. To its
  // sender we are then an endpoint that is not there, and its retries end its operations
  // with kPeerUnreachable. So a process that takes over the address (UDP port) of a dead
  // one, in another job, is never handed what was meant for the dead one.
  // Why not answer BAD_JOB_ID: the answer would tell anyone that an endpoint listens
  // here, and let forged packets make it send. A header too short to hold a JobID is
  // left to SES, which drops it as malformed.
  bool of_our_job(std::span<const uint8_t> ses) {
    const std::optional<uint32_t> job = wire::peek_job_id(ses);
    if (!job || *job == cfg_.ses.job_id) return true;
    ++stats_.rx_foreign_job;
    return false;
  }
  // The SES header and payload of a packet that carries them (RUD/ROD, RUDI, UUD), found
  // by decoding its PDS header; empty for any other packet or one that does not decode.
  static std::span<const uint8_t> ses_bytes(std::span<const uint8_t> in,
                                            const wire::Prologue& prologue);
  bool handle_request(PeerIndex peer, dp::PacketBuf* buf, std::span<const uint8_t> in, Time now);
  bool admit_sender(PeerIndex peer, wire::NextHeader next, std::span<const uint8_t> ses,
                    const wire::PdsRequest* over_pdc, uint16_t entropy, Time now);
  void on_stale_incarnation_nack(PeerIndex peer, const wire::PdsNack& nack, Time now);
  void apply_order_words(Time now);
  // `peer` restarted as `incarnation` (0: not known yet): PDS fails its PDCs, SES ends
  // what the old incarnation left and starts its orders again.
  void restart_peer(PeerIndex peer, uint16_t incarnation, Time now);
  void deliver_in_order(uint32_t pdc, Time now);
  static constexpr uint32_t kNoPdc = 0xffffffff;
  bool behind_a_stalled_line(PeerIndex peer, uint32_t pdc) const;
  void note_stalled(uint32_t pdc);
  void drain_reports(Time now);
  size_t send_control();
  size_t send_data(Time now);
  size_t send_datagrams();
  size_t send_rudi(Time now);
  void handle_rudi(PeerIndex peer, const wire::PdsRudi& h, std::span<const uint8_t> ses,
                   const dp::PacketBuf& buf, Time now);
  bool put_rudi_packet(const pds::RudiRetransmit& r, bool retransmit);
  void flush_tx();
  dp::PacketBuf* tx_buffer();

  D& dp_;
  EngineConfig cfg_;
  PeerTable peers_;
  pds::Pds pds_;
  ses::Ses ses_;
  pds::RudiTracker rudi_;
  std::optional<tss::SecureChannels> tss_;  // when cfg_.security
  std::vector<pds::RudiRetransmit> rudi_retransmits_;
  // RUDI answers to send: who, which packet id, the target's verdict and message id,
  // or a TRIMMED NACK when the request arrived without its payload.
  struct RudiReply {
    PeerIndex peer;
    uint32_t packet_id;
    wire::ReturnCode rc;
    uint16_t msg_id;
    bool trimmed;
    uint16_t entropy;  // the request's: each retransmission's answer takes a new path
  };
  std::vector<RudiReply> rudi_replies_;
  // ROD PDCs whose in-order delivery stalls, oldest first: SES refused their head packet,
  // or an older PDC from the same peer is stalled (behind_a_stalled_line).
  std::vector<uint32_t> stalled_rod_;
  std::vector<PeerIndex> probe_peers_;     // scratch: peers to probe this round
  std::vector<PeerIndex> unprobed_peers_;  // scratch: ... that SES had no tx slot for
  ses::DirectRead direct_read_{};          // the one being copied, while direct_read_active_
  uint64_t direct_read_copied_ = 0;        // its bytes copied so far
  bool direct_read_active_ = false;
  Time next_probe_{};
  Time now_{};
  EngineStats stats_;
  std::array<dp::PacketBuf*, kBurst> rx_batch_{};
  std::array<dp::PacketBuf*, kBurst> free_batch_{};
  std::array<dp::PacketBuf*, kTxBatch> tx_batch_{};
  size_t tx_count_ = 0;
  // Bytes in tx_batch_[0, tx_count_ - 1) (all but the one being filled) of packets that
  // count toward an early flush (counts_toward_flush).
  size_t tx_bytes_ = 0;
  uint16_t control_entropy_ = 0;  // rotates over EVs for ACKs, NACKs and CTRL
};

}  // namespace spray::engine

#include "transport/engine/engine_rudi.h"
#include "transport/engine/engine_rx.h"
#include "transport/engine/engine_tx.h"
