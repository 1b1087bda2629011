// The initiator side of SES: operations become messages, and messages become packets.
// What PDS reports of them becomes completions in ses_tx_completion.cc.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "transport/ses/ses.h"

#include "transport/base/copy_bytes.h"

namespace spray::ses {
namespace {

constexpr uint64_t kMaxMessageBytes = 0xffffffffULL;  // request length is 32 bits
constexpr uint16_t kRmaIdBit = 0x8000;
constexpr uint64_t kRendezvousKeyBase = 0xfffe000000000000ULL;  // internal keys

}  // namespace

Status status_from_return_code(wire::ReturnCode rc) {
  switch (rc) {
    case wire::ReturnCode::kOk:
      return Status::kOk;
    case wire::ReturnCode::kBadMemoryKey:
      return Status::kBadKey;
    case wire::ReturnCode::kBadAddress:
    case wire::ReturnCode::kAtOutOfRange:
      return Status::kOutOfBounds;
    case wire::ReturnCode::kPermissionViolation:
      return Status::kAccessDenied;
    case wire::ReturnCode::kTooLong:
      return Status::kTooLong;
    case wire::ReturnCode::kCancelled:
      return Status::kCanceled;
    case wire::ReturnCode::kUndeliverable:
      return Status::kPeerUnreachable;
    case wire::ReturnCode::kAmoUnsupportedOp:
    case wire::ReturnCode::kAmoUnsupportedDatatype:
    case wire::ReturnCode::kAmoUnsupportedSize:
      return Status::kUnsupported;
    case wire::ReturnCode::kAmoUnaligned:
      return Status::kUnaligned;
    default:
      return Status::kProtocolError;
  }
}

wire::ReturnCode return_code_from_status(Status s) {
  switch (s) {
    case Status::kOk:
      return wire::ReturnCode::kOk;
    case Status::kBadKey:
      return wire::ReturnCode::kBadMemoryKey;
    case Status::kOutOfBounds:
      return wire::ReturnCode::kBadAddress;
    case Status::kAccessDenied:
      return wire::ReturnCode::kPermissionViolation;
    case Status::kTooLong:
      return wire::ReturnCode::kTooLong;
    case Status::kCanceled:
      return wire::ReturnCode::kCancelled;
    case Status::kUnsupported:
      return wire::ReturnCode::kAmoUnsupportedOp;
    case Status::kUnaligned:
      return wire::ReturnCode::kAmoUnaligned;
    default:
      return wire::ReturnCode::kUndeliverable;
  }
}

Ses::Ses(const SesConfig& config, pds::Pds& pds)
    : cfg_(config),
      pds_(pds),
      payload_per_packet_(payload_bytes_per_packet(config.mtu_bytes)),
      max_payload_per_packet_(payload_per_packet_),
      peer_mtu_(config.max_peers, config.mtu_bytes),
      tx_(config.max_tx_messages),
      tx_generation_(config.max_tx_messages, 0),
      user_tx_limit_(config.max_tx_messages - reserved_slots(config.max_tx_messages)),
      rx_(config.max_rx_messages),
      rx_unordered_limit_(config.max_rx_messages - reserved_slots(config.max_rx_messages)),
      tx_by_id_(config.max_tx_messages),
      tx_by_rendezvous_key_(config.max_tx_messages),
      rx_by_id_(config.max_rx_messages),
      posted_(config.max_posted_receives),
      regions_(config.max_memory_regions),
      completions_(std::max<uint32_t>(config.completion_queue_entries, 1)),
      send_seq_(config.max_peers, 0),
      expect_seq_(config.max_peers, 0),
      probing_(config.max_peers, 0),
      answering_order_(config.max_peers, 0),
      incarnations_(config.max_peers,
                    config.incarnation != 0 ? config.incarnation : PeerIncarnations::draw(),
                    config.hello_after) {
  if (config.max_tx_messages > kMaxTxMessages) {
    throw std::invalid_argument("SesConfig::max_tx_messages above 2^20 (see Ses::ticket)");
  }
  if (config.max_tx_messages < 4) {  // the user's share must hold a rendezvous send (two)
    throw std::invalid_argument("SesConfig::max_tx_messages below 4");
  }
  if (config.incarnation == PeerIncarnations::kAcknowledgedUnknown) {
    throw std::invalid_argument("SesConfig::incarnation 0xffff (it means 'not known yet')");
  }
  // Queues hold message slots, so their reach is bounded by the pool: reserve it once
  // and the fast path never grows them.
  datagrams_.reserve(config.max_tx_messages);
  if (config.direct_reads) {
    direct_reads_.reserve(config.max_rx_messages);
    // Taken on every send and progress: at most an offer and a withdrawal a tx slot.
    readable_key_changes_.reserve(2 * size_t{config.max_tx_messages});
  }
  rudi_queue_.resize(config.max_tx_messages);
  finishing_.reserve(config.max_tx_messages);
  awaiting_.reserve(config.max_tx_messages);
  held_messages_.reserve(config.max_rx_messages);
  tx_waiters_.reserve(config.max_rx_messages);
  tx_resuming_.reserve(config.max_rx_messages);
}

uint32_t Ses::packets_for(uint64_t len, uint32_t payload_per_packet) {
  return len == 0 ? 1 : static_cast<uint32_t>((len + payload_per_packet - 1) / payload_per_packet);
}

void Ses::set_peer_mtu(PeerIndex peer, uint32_t mtu_bytes) {
  if (peer >= peer_mtu_.size()) return;
  peer_mtu_[peer] = std::max(mtu_bytes, cfg_.mtu_bytes);
  max_payload_per_packet_ =
      std::max(max_payload_per_packet_, payload_bytes_per_packet(peer_mtu_[peer]));
}

uint32_t Ses::new_tx(TxKind kind, PeerIndex peer, uint64_t len) {
  const auto slot = tx_.acquire();
  if (!slot) return kNone;
  TxMessage& m = tx_[*slot];
  m.kind = kind;
  m.peer = peer;
  m.length = len;
  const uint32_t mtu = peer < peer_mtu_.size() ? peer_mtu_[peer] : cfg_.mtu_bytes;
  m.payload_per_packet = payload_bytes_per_packet(mtu);
  // PDS counts each packet in flight as a full one (TxRun::packet_bytes): as long as
  // every path's, as before paths had MTUs of their own, unless this message's packets
  // are longer (a local peer's, and more than one such packet of payload). So a local
  // peer's window holds as many small messages as it did.
  m.run.packet_bytes = len > payload_per_packet_ ? mtu : cfg_.mtu_bytes;
  uint16_t& generation = tx_generation_[*slot];
  generation = static_cast<uint16_t>((generation + 1) % kTicketGenerations);
  m.run.message = ticket(*slot);
  return *slot;
}

uint16_t Ses::next_rma_id(PeerIndex peer) {
  for (;;) {
    const auto id = static_cast<uint16_t>(kRmaIdBit | (rma_counter_++ & 0x7fff));
    if (!tx_by_id_.find(id_key(peer, id))) return id;
  }
}

// Hands a prepared message to PDS. On failure the slot is released.
Status Ses::start(uint32_t slot, pds::Mode mode, Time now) {
  TxMessage& m = tx_[slot];
  m.packet_count = m.run.packet_count;
  m.run.next_packet = 0;
  // An answer is what the peer waits for with an operation of its own (a response, a
  // read request, read data). A MSG_ERR is not: we resend it ourselves (skips_), and a
  // PDC that fails with one aboard must not start a lost-answers notice at our end
  // (Pds::lost_answers_to), which refuses the peer's SYNs: two peers each failing to
  // tell the other of a skip refused each other's MSG_ERRs for their every try, and
  // the messages acknowledged after the skipped ones were never delivered (faults
  // sweep seed 21411). Nor is a NO_OP (a hello, a probe, an answer about our order): a
  // probe comes again if one is lost.
  m.run.answer = !m.user_op && m.kind != TxKind::kSkip && m.kind != TxKind::kHello &&
                 m.kind != TxKind::kProbe && m.kind != TxKind::kOrderAnswer;
  // Our PDCs to an unvouched peer may have been opened to its predecessor, which a
  // successor knows nothing of: an answer goes on the PDC the peer opened to us, which
  // is surely its (PeerIncarnations::unvouched).
  m.run.via_peers_pdc = m.run.answer && incarnations_.unvouched(m.peer);
  if (m.kind != TxKind::kResponse && m.kind != TxKind::kReadResponse) {
    incarnations_.will_learn_us(m.peer);  // a request: its header names our incarnation
  }
  // Eager sends only: they complete on their ACK, where a write completes on the
  // target's response (which its ACK would not hasten).
  m.run.ack_may_wait =
      m.kind == TxKind::kEager && m.user_op && !m.spec.completion_awaited && !m.needs_response;
  if (m.needs_response && !tx_by_id_.insert(id_key(m.peer, m.msg_id), slot)) {
    tx_.release(slot);
    return Status::kAgain;
  }
  const Status s = pds_.enqueue(m.peer, mode, &m.run, now);
  if (s != Status::kOk) {
    if (m.needs_response) tx_by_id_.erase(id_key(m.peer, m.msg_id));
    tx_.release(slot);
  }
  return s;
}

Status Ses::send(PeerIndex peer, const void* buf, uint64_t len, UserContext ctx,
                 const SendSpec& spec, Time now) {
  if (const Status s = check_operation(peer, buf, len); s != Status::kOk) return s;
  if (!skips_.empty()) send_skips([peer](const Skip& k) { return k.peer == peer; }, now);
  const bool rendezvous = len > cfg_.rendezvous_threshold_bytes;
  // A rendezvous send takes two of the user's slots: its own, and one promised for the
  // read response that will serve its receiver's read. Without the promise the read could
  // need a slot that only this engine's own waiting operations hold: two engines whose
  // tables were full of rendezvous sends to each other (and their receives' reads) refused
  // each other's read requests for good (spray-transfer --hosts 2 --message-slots 4
  // --bytes 70000 --messages 2 --loss 0 --reorder 0 --duplicate 0 --corrupt 0).
  if (rendezvous && tx_committed() + 2 > user_tx_limit_) return Status::kAgain;
  const uint32_t slot = new_tx(rendezvous ? TxKind::kRendezvous : TxKind::kEager, peer, len);
  if (slot == kNone) return Status::kAgain;
  TxMessage& m = tx_[slot];
  m.op = spec.tagged ? OpKind::kTaggedSend : OpKind::kSend;
  m.user_op = true;
  m.src = static_cast<const uint8_t*>(buf);
  m.key_or_tag = spec.tag;
  m.spec = spec;
  m.context = ctx;
  m.msg_id = static_cast<uint16_t>(send_seq_[peer] & 0x7fff);
  m.run.packet_count = rendezvous ? 1 : packets_for(len, m.payload_per_packet);
  if (rendezvous) {
    m.run.packet_bytes = cfg_.mtu_bytes;  // its one packet carries the header alone
    // Expose the source buffer to this peer's reads through a one-time internal key,
    // addressed by its virtual address: a receiver that can reach our memory directly
    // (DirectRead) copies from there; any other reads through the key as usual.
    m.needs_response = true;
    m.rendezvous_key = kRendezvousKeyBase | (rendezvous_keys_++ & 0xffffffffffffULL);
    MemoryRegion r{const_cast<uint8_t*>(m.src), len, reinterpret_cast<uint64_t>(m.src),
                   m.rendezvous_key, access::kRemoteRead};
    if (regions_.add(r) != Status::kOk) {
      tx_.release(slot);
      return Status::kAgain;
    }
    tx_by_rendezvous_key_.insert(m.rendezvous_key, slot);
  }
  const uint64_t key = m.rendezvous_key;
  const Status s = start(slot, spec.mode, now);
  if (s != Status::kOk) {
    if (rendezvous) {
      regions_.remove(key);
      tx_by_rendezvous_key_.erase(key);
    }
    return s;
  }
  ++send_seq_[peer];
  ++stats_.messages_sent;
  if (rendezvous) {
    ++stats_.rendezvous_sends;
    tx_[slot].read_response_promised = true;
    ++tx_promised_;
    if (cfg_.direct_reads) readable_key_changes_.push_back({key, true});
  }
  return Status::kOk;
}

template <class Due>
void Ses::send_skips(Due due, Time now) {
  auto keep = skips_.begin();
  for (auto it = skips_.begin(); it != skips_.end(); ++it) {
    bool sent = false;
    if (due(*it) && room_for_a_skip(*it)) {
      if (const uint32_t slot = new_tx(TxKind::kSkip, it->peer, 0); slot != kNone) {
        TxMessage& m = tx_[slot];
        m.msg_id = it->id;
        m.skip_failed_tries = it->failed_tries;
        m.run.packet_count = 1;
        m.run.packet_bytes = static_cast<uint32_t>(16 + wire::kSesStandardBytes);
        sent = start(slot, pds::Mode::kRud, now) == Status::kOk;
        if (sent) skips_sent_.emplace_back(it->peer, it->id);
      }
    }
    if (!sent) *keep++ = *it;
  }
  skips_.erase(keep, skips_.end());
  find_next_skip_due();
}

void Ses::find_next_skip_due() {
  next_skip_due_ = Time{INT64_MAX};
  for (const Skip& k : skips_) {
    if (skip_timed(k)) next_skip_due_ = std::min(next_skip_due_, k.not_before);
  }
}

// Hands what PDS reported to ses_tx_completion.cc, and sends the MSG_ERRs and hellos now
// due.
void Ses::take_pds_reports(Time now) {
  apply_pds_reports(now);
  if (next_skip_due_ <= now) {
    send_skips([now](const Skip& k) { return skip_timed(k) && k.not_before <= now; }, now);
  }
  if (incarnations_.hellos_due(now)) send_hellos(now);
}

void Ses::apply_pds_reports(Time now) {
  if (!pds_.acked().empty()) {
    on_acked(pds_.acked());
    pds_.acked().clear();
  }
  if (!pds_.failed().empty()) {
    on_failed(pds_.failed(), now);
    pds_.failed().clear();
  }
  if (!pds_.failed_peers().empty()) {
    on_peer_failed(pds_.failed_peers(), now);
    pds_.failed_peers().clear();
  }
}

// Every user operation passes here first. Beyond argument checks, it keeps the user's
// operations out of the last tx slots: those are for what peers' requests make this
// engine send (responses, read responses, a rendezvous receive's read), so answering a
// peer never waits for this engine's own operations to finish. Without the reserve,
// two engines whose tables are full of operations to each other refuse each other's
// requests for good, and every one of them fails (a chaos run with 4 slots did).
Status Ses::check_operation(PeerIndex peer, const void* buf, uint64_t len) const {
  if (peer >= cfg_.max_peers || (buf == nullptr && len != 0)) return Status::kInvalidArgument;
  if (len > kMaxMessageBytes) return Status::kTooLong;
  if (tx_committed() >= user_tx_limit_) return Status::kAgain;
  return Status::kOk;
}

// A user's RMA write, over a PDC (write) or RUDI (write_idempotent).
std::optional<uint32_t> Ses::new_write(PeerIndex peer, const void* local, uint64_t len,
                                       uint64_t remote_addr, uint64_t key, UserContext ctx) {
  const uint32_t slot = new_tx(TxKind::kWrite, peer, len);
  if (slot == kNone) return std::nullopt;
  TxMessage& m = tx_[slot];
  m.op = OpKind::kWrite;
  m.user_op = true;
  m.src = static_cast<const uint8_t*>(local);
  m.remote_addr = remote_addr;
  m.key_or_tag = key;
  m.context = ctx;
  m.msg_id = next_rma_id(peer);
  m.run.packet_count = packets_for(len, m.payload_per_packet);
  return slot;
}

Status Ses::write(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
                  uint64_t key, UserContext ctx, const SendSpec& spec, Time now) {
  if (const Status s = check_operation(peer, local, len); s != Status::kOk) return s;
  const auto slot = new_write(peer, local, len, remote_addr, key, ctx);
  if (!slot) return Status::kAgain;
  tx_[*slot].spec = spec;
  tx_[*slot].needs_response = true;  // only the target knows if key and bounds were good
  return start(*slot, spec.mode, now);
}

Status Ses::read(PeerIndex peer, void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
                 UserContext ctx, pds::Mode mode, Time now) {
  if (const Status s = check_operation(peer, local, len); s != Status::kOk) return s;
  const auto slot = new_read(peer, static_cast<uint8_t*>(local), len, remote_addr, key);
  if (!slot) return Status::kAgain;
  tx_[*slot].user_op = true;
  tx_[*slot].context = ctx;
  return start(*slot, mode, now);
}

// A read request: one packet out, data (or an error response) back.
std::optional<uint32_t> Ses::new_read(PeerIndex peer, uint8_t* dst, uint64_t len,
                                      uint64_t remote_addr, uint64_t key) {
  const uint32_t slot = new_tx(TxKind::kRead, peer, len);
  if (slot == kNone) return std::nullopt;
  TxMessage& m = tx_[slot];
  m.op = OpKind::kRead;
  m.dst = dst;
  m.remote_addr = remote_addr;
  m.key_or_tag = key;
  m.needs_response = true;
  m.msg_id = next_rma_id(peer);
  m.run.packet_count = 1;
  m.run.packet_bytes = static_cast<uint32_t>(16 + wire::kSesStandardBytes);
  return slot;
}

Status Ses::write_idempotent(PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
                             uint64_t key, UserContext ctx) {
  if (const Status s = check_operation(peer, local, len); s != Status::kOk) return s;
  const auto slot = new_write(peer, local, len, remote_addr, key, ctx);
  if (!slot) return Status::kAgain;
  TxMessage& m = tx_[*slot];
  m.packet_count = m.run.packet_count;  // RUDI: no PDS; each response counts a packet
  m.rudi_queued = true;
  m.over_rudi = true;
  rudi_queue_[(rudi_head_ + rudi_count_++) % rudi_queue_.size()] = *slot;
  return Status::kOk;
}

bool Ses::peek_rudi(pds::PacketRef& ref, PeerIndex& peer) {
  // A message that failed while queued is finished here, once the queue lets go of it.
  while (rudi_count_ > 0 && tx_[rudi_queue_[rudi_head_]].failing) {
    const uint32_t slot = rudi_queue_[rudi_head_];
    rudi_head_ = (rudi_head_ + 1) % rudi_queue_.size();
    --rudi_count_;
    tx_[slot].rudi_queued = false;
    finish_tx(slot);
  }
  if (rudi_count_ == 0) return false;
  const TxMessage& m = tx_[rudi_queue_[rudi_head_]];
  ref = {m.run.message, m.run.next_packet};
  peer = m.peer;
  return true;
}

void Ses::advance_rudi() {
  TxMessage& m = tx_[rudi_queue_[rudi_head_]];
  if (++m.run.next_packet < m.packet_count) return;
  m.rudi_queued = false;
  rudi_head_ = (rudi_head_ + 1) % rudi_queue_.size();
  --rudi_count_;
}

Status Ses::send_datagram(PeerIndex peer, const void* buf, uint64_t len, UserContext ctx,
                          const SendSpec& spec) {
  if (const Status s = check_operation(peer, buf, len); s != Status::kOk) return s;
  if (len > payload_per_packet_) return Status::kTooLong;
  const uint32_t slot = new_tx(TxKind::kDatagram, peer, len);
  if (slot == kNone) return Status::kAgain;
  TxMessage& m = tx_[slot];
  m.op = OpKind::kDatagramSend;
  m.user_op = true;
  m.src = static_cast<const uint8_t*>(buf);
  m.key_or_tag = spec.tag;
  m.spec = spec;
  m.context = ctx;
  m.msg_id = next_rma_id(peer);  // datagrams are not ordered
  m.packet_count = m.run.packet_count = 1;
  datagrams_.push_back(slot);
  return Status::kOk;
}

Status Ses::queue_response(PeerIndex peer, uint16_t msg_id, wire::ReturnCode rc, uint64_t length,
                           Time now) {
  const uint32_t slot = new_tx(TxKind::kResponse, peer, length);
  if (slot == kNone) return Status::kAgain;
  TxMessage& m = tx_[slot];
  m.msg_id = msg_id;
  m.return_code = rc;
  m.run.packet_count = 1;
  m.run.packet_bytes = static_cast<uint32_t>(16 + wire::kSesResponseBytes);
  return start(slot, pds::Mode::kRud, now);
}

// --- packet construction -------------------------------------------------------------

size_t Ses::build_packet(pds::PacketRef ref, std::span<uint8_t> out, wire::NextHeader& next) const {
  uint32_t payload = 0;
  const size_t h = build_header(ref, out, next, payload);
  if (h == 0 || out.size() < h + payload) return 0;
  if (payload > 0) copy_bytes(out.data() + h, payload_source(ref), payload);
  return h + payload;
}

const uint8_t* Ses::payload_source(pds::PacketRef ref) const {
  const uint32_t slot = live_slot(ref.message);
  if (slot == kNone) return nullptr;  // build_header said 0: nothing to carry
  return tx_[slot].src + uint64_t{ref.index} * tx_[slot].payload_per_packet;
}

size_t Ses::build_header(pds::PacketRef ref, std::span<uint8_t> out, wire::NextHeader& next,
                         uint32_t& payload_bytes) const {
  payload_bytes = 0;
  const uint32_t slot = live_slot(ref.message);
  // A packet of a message that has ended: it goes out empty, like one whose source is
  // gone, and PDS gives up on it in time rather than send another message's bytes.
  if (slot == kNone) return 0;
  const TxMessage& m = tx_[slot];
  const uint64_t offset = uint64_t{ref.index} * m.payload_per_packet;
  const bool no_payload = m.kind == TxKind::kRead || m.kind == TxKind::kRendezvous ||
                          m.kind == TxKind::kResponse ||
                          (m.kind == TxKind::kAtomic &&
                           (m.amo_op == wire::AmoOpcode::kRead || wire::is_compare_swap(m.amo_op)));
  const auto payload = static_cast<uint32_t>(
      no_payload ? 0 : std::min<uint64_t>(m.payload_per_packet, m.length - offset));
  payload_bytes = payload;
  const bool som = ref.index == 0;
  const bool eom = ref.index + 1 == m.packet_count;

  if (m.kind == TxKind::kResponse) {
    wire::SesResponse r;
    r.common.opcode = wire::SesResponseOpcode::kResponse;
    r.common.return_code = m.return_code;
    r.common.message_id = m.msg_id;
    r.common.job_id = cfg_.job_id;
    r.modified_length = static_cast<uint32_t>(m.length);
    next = wire::NextHeader::kSesResponse;
    return wire::encode(r, out);
  }
  if (m.kind == TxKind::kReadResponse) {
    if (m.source_gone) return 0;
    wire::SesResponseWithData r;
    r.common.opcode = wire::SesResponseOpcode::kResponseWithData;
    r.common.return_code = wire::ReturnCode::kOk;
    r.common.message_id = m.msg_id;
    r.common.job_id = cfg_.job_id;
    r.read_message_id = m.msg_id;
    r.payload_length = static_cast<uint16_t>(payload);
    r.modified_length = static_cast<uint32_t>(m.length);
    r.message_offset = static_cast<uint32_t>(offset);
    next = wire::NextHeader::kSesResponseWithData;
    return wire::encode(r, out);
  }

  wire::SesStandardRequest s;
  s.common.message_id = m.msg_id;
  s.common.job_id = cfg_.job_id;
  s.initiator = incarnations_.words_to(m.peer);
  s.common.flags = static_cast<uint8_t>((som ? wire::ses_flags::kStartOfMessage : 0) |
                                        (eom ? wire::ses_flags::kEndOfMessage : 0));
  if (som && m.spec.has_data) {
    s.common.flags |= wire::ses_flags::kHeaderData;
    s.header_data = m.spec.data;
  }
  if (!som) {
    s.payload_length = static_cast<uint16_t>(payload);
    s.message_offset = static_cast<uint32_t>(offset);
  }
  s.request_length = static_cast<uint32_t>(m.length);
  s.match_bits = m.key_or_tag;
  switch (m.kind) {
    case TxKind::kEager:
    case TxKind::kDatagram:
      s.common.opcode = m.spec.tagged ? wire::SesOpcode::kTaggedSend : wire::SesOpcode::kSend;
      s.buffer_offset = offset;
      break;
    case TxKind::kRendezvous:
      s.common.opcode =
          m.spec.tagged ? wire::SesOpcode::kRendezvousTaggedSend : wire::SesOpcode::kRendezvousSend;
      break;
    case TxKind::kWrite:
      s.common.opcode = wire::SesOpcode::kWrite;
      s.buffer_offset = m.remote_addr + offset;
      break;
    case TxKind::kRead:
      s.common.opcode = wire::SesOpcode::kRead;
      s.buffer_offset = m.remote_addr;
      break;
    case TxKind::kSkip:
      s.common.opcode = wire::SesOpcode::kMessageError;
      break;
    case TxKind::kHello:
    case TxKind::kProbe:
    case TxKind::kOrderAnswer:
      s.common.opcode = wire::SesOpcode::kNoOp;
      s.buffer_offset = m.remote_addr;  // what it says of the send order (on_no_op)
      break;
    case TxKind::kAtomic:
      s.common.opcode = m.fetching ? wire::SesOpcode::kFetchAtomic : wire::SesOpcode::kAtomic;
      s.buffer_offset = m.remote_addr;
      break;
    default:
      return 0;
  }
  size_t n = wire::encode(s, out);
  if (n == 0) return 0;
  if (m.kind == TxKind::kAtomic) {
    const size_t e = build_atomic_extension(m, out.subspan(n));
    if (e == 0) return 0;
    n += e;
  }
  if (m.kind == TxKind::kRendezvous) {
    wire::RendezvousExtension x;
    x.read_offset = reinterpret_cast<uint64_t>(m.src);  // the region's base: its first byte
    x.read_key = m.rendezvous_key;
    const size_t e = wire::encode(x, out.subspan(n));
    if (e == 0) return 0;
    n += e;
  }
  next = wire::NextHeader::kSesStandardRequest;
  return n;
}

}  // namespace spray::ses
