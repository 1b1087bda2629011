// SES as the target of RMA, and what a target owes its peers: writes placed and
// answered, reads served, and the answers (write responses, read responses, a rendezvous
// receive's read) that wait for a tx slot rather than be refused or dropped.
#include <algorithm>
#include <cstring>

#include "transport/ses/ses.h"

#include "transport/base/copy_bytes.h"

namespace spray::ses {

// --- RMA at the target -----------------------------------------------------------------

RxResult Ses::on_write(PeerIndex peer, const wire::SesStandardRequest& h,
                       std::span<const uint8_t> payload, Time now) {
  const bool som = h.common.has(wire::ses_flags::kStartOfMessage);
  const uint64_t offset = som ? 0 : h.message_offset;
  const uint64_t total = h.request_length;
  const uint16_t id = h.common.message_id;
  if (!(id & 0x8000) || offset > total || payload.size() > total - offset ||
      h.buffer_offset < offset) {
    return RxResult::kMalformed;
  }
  const uint64_t base = h.buffer_offset - offset;
  uint32_t slot = kNone;
  if (auto found = rx_by_id_.find(id_key(peer, id))) {
    slot = *found;
    const RxMessage& m = rx_[slot];
    if (!m.is_write || m.total != total || m.read_offset != base) return RxResult::kMalformed;
  } else {
    // A late packet of a write that ended here in part, its initiator taken for dead:
    // refused, not acknowledged, so that the initiator's write fails (see ended_writes_).
    if (ended_writes_.contains(peer, id)) return RxResult::kMalformed;
    if (!rx_room_for(peer, id, false)) return RxResult::kNoResource;  // writes are unordered
    const auto fresh = rx_.acquire();
    if (!fresh) return RxResult::kNoResource;
    slot = *fresh;
    RxMessage& m = rx_[slot];
    if (tx_room_for(1)) promise_tx(m, 1);  // for the response; else it waits for a slot
    m.peer = peer;
    m.msg_id = id;
    m.is_write = true;
    m.total = total;
    m.read_offset = base;  // the write's base address
    m.read_key = h.match_bits;
    rx_by_id_.insert(id_key(peer, id), slot);
    if (!(som && payload.size() == total)) list_held_message(slot);  // see held_messages_
  }
  RxMessage& m = rx_[slot];
  m.last_packet = now;
  // The whole range is checked on every packet, so a write lands entirely or not at all.
  uint8_t* dst = nullptr;
  const Status s = regions_.resolve(h.match_bits, base, total, access::kRemoteWrite, dst);
  if (s != Status::kOk) {
    if (m.status == Status::kOk) ++stats_.rma_errors;
    m.status = s;
  } else if (!payload.empty()) {
    copy_bytes(dst + offset, payload.data(), payload.size());
  }
  m.received += payload.size();
  if (som) {
    m.som_seen = true;
    m.has_data = h.common.has(wire::ses_flags::kHeaderData);
    m.data = h.header_data;
  }
  if (m.whole()) {
    if (m.status == Status::kOk && (m.has_data || cfg_.report_remote_access)) {
      Completion& c = report_remote_access(OpKind::kRemoteWrite, peer, m.read_key, m.total);
      c.data = m.data;
      c.has_data = m.has_data;
    }
    answer_write(slot, now);
  }
  return RxResult::kAccepted;
}

// A complete write's response; then its rx slot is free. Without a slot promised or
// free, it waits in tx_waiters_.
void Ses::answer_write(uint32_t slot, Time now) {
  RxMessage& m = rx_[slot];
  if (m.tx_promised == 0 && !tx_room_for(1)) {
    wait_for_tx(slot, TxWait::kWriteResponse);
    return;
  }
  redeem_tx(m);
  (void)queue_response(m.peer, m.msg_id, return_code_from_status(m.status), m.total, now);
  free_rx(slot);
}

RxResult Ses::on_read(PeerIndex peer, const wire::SesStandardRequest& h, Time now) {
  const uint16_t id = h.common.message_id;
  if (!(id & 0x8000) || !h.common.has(wire::ses_flags::kStartOfMessage)) {
    return RxResult::kMalformed;
  }
  // A read of one of our rendezvous sends is answered in the slot that send promised, so
  // it never waits for room; the first read of it, that is (a second, after a failure,
  // takes its chances like any read).
  const auto send = tx_by_rendezvous_key_.find(h.match_bits);
  if ((send && tx_[*send].peer == peer && release_read_response_promise(tx_[*send])) ||
      tx_room_for(1)) {
    serve_read(peer, id, h.match_bits, h.buffer_offset, h.request_length, now);
    return RxResult::kAccepted;
  }
  // No tx slot for the answer now: the request is kept in an rx slot and served when one
  // frees (see tx_committed), not refused.
  if (!rx_room_for(peer, id, false)) return RxResult::kNoResource;
  const auto slot = rx_.acquire();
  if (!slot) return RxResult::kNoResource;
  RxMessage& m = rx_[*slot];
  m.peer = peer;
  m.msg_id = id;
  m.read_key = h.match_bits;
  m.read_offset = h.buffer_offset;
  m.total = h.request_length;
  uint8_t* src = nullptr;
  if (m.total > 0 && m.total <= kSnapshotReadBytes && !tx_by_rendezvous_key_.find(m.read_key) &&
      regions_.resolve(m.read_key, m.read_offset, m.total, access::kRemoteRead, src) ==
          Status::kOk) {
    // A small read is answered with the memory as it is now (kSnapshotReadBytes). The slow
    // path of a full table: a heap copy is fine here.
    m.unexpected = std::make_unique_for_overwrite<uint8_t[]>(m.total);
    std::memcpy(m.unexpected.get(), src, m.total);
  }
  wait_for_tx(*slot, TxWait::kReadResponse);
  return RxResult::kAccepted;
}

// Answers a read request with its data, or with an error response (bad key, bounds,
// rights) or an empty one. Needs one tx slot, which the caller made sure of.
void Ses::serve_read(PeerIndex peer, uint16_t id, uint64_t key, uint64_t offset, uint64_t length,
                     Time now, const uint8_t* taken) {
  uint8_t* src = nullptr;
  const Status s =
      taken ? Status::kOk : regions_.resolve(key, offset, length, access::kRemoteRead, src);
  if (s != Status::kOk || length == 0) {
    if (s != Status::kOk) ++stats_.rma_errors;
    if (s == Status::kOk && cfg_.report_remote_access) {
      (void)report_remote_access(OpKind::kRemoteRead, peer, key, 0);
    }
    (void)queue_response(peer, id, return_code_from_status(s), 0, now);
    return;
  }
  const uint32_t slot = new_tx(TxKind::kReadResponse, peer, length);
  TxMessage& m = tx_[slot];
  m.src = src;
  m.key_or_tag = key;
  // A rendezvous send's data (read by its receiver) is never copied: on_read takes no
  // copy for such a key, so `taken` names a peer's read of registered memory.
  const auto send = taken ? std::nullopt : tx_by_rendezvous_key_.find(key);
  if (send) {
    m.rendezvous_tx = *send;  // the send's buffer must outlive this response
    ++tx_[*send].read_responses;
  } else {
    m.serves_remote_read = true;
    if (length <= kSnapshotReadBytes) {
      uint8_t* copy = answer_copy(slot, length);
      std::memcpy(copy, taken ? taken : src, length);
      m.src = copy;
    }
  }
  m.msg_id = id;
  m.run.packet_count = packets_for(length, m.payload_per_packet);
  (void)start(slot, pds::Mode::kRud, now);
}

uint8_t* Ses::answer_copy(uint32_t slot, uint64_t bytes) {
  if (answer_copies_.empty()) answer_copies_.resize(tx_.capacity());
  AnswerCopy& copy = answer_copies_[slot];
  if (copy.capacity < bytes) {
    copy.capacity = std::max(bytes, kSnapshotReadBytes);
    copy.bytes = std::make_unique_for_overwrite<uint8_t[]>(copy.capacity);
  }
  return copy.bytes.get();
}

Completion& Ses::report_remote_access(OpKind op, PeerIndex peer, uint64_t key, uint64_t length) {
  Completion& c = completions_.emplace();
  c.op = op;
  c.length = length;
  c.peer = peer;
  c.memory_key = key;
  return c;
}

// A RUDI packet is a self-contained write: full addressing in every packet, checked
// and executed on its own. Nothing is remembered, so repeating it is harmless.
RxResult Ses::on_rudi_request(PeerIndex peer, wire::NextHeader next, std::span<const uint8_t> bytes,
                              wire::ReturnCode& rc, uint16_t& msg_id) {
  (void)peer;
  wire::SesStandardRequest h;
  if (next != wire::NextHeader::kSesStandardRequest ||
      wire::decode(bytes, h) != wire::DecodeError::kOk ||
      h.common.opcode != wire::SesOpcode::kWrite) {
    ++stats_.malformed_packets;
    return RxResult::kMalformed;
  }
  const auto payload = bytes.subspan(wire::kSesStandardBytes);
  const bool som = h.common.has(wire::ses_flags::kStartOfMessage);
  const uint64_t offset = som ? 0 : h.message_offset;
  if ((!som && h.payload_length != payload.size()) || offset > h.request_length ||
      payload.size() > h.request_length - offset || h.buffer_offset < offset) {
    ++stats_.malformed_packets;
    return RxResult::kMalformed;
  }
  uint8_t* dst = nullptr;
  const Status s = regions_.resolve(h.match_bits, h.buffer_offset - offset, h.request_length,
                                    access::kRemoteWrite, dst);
  if (s == Status::kOk && !payload.empty())
    copy_bytes(dst + offset, payload.data(), payload.size());
  if (s != Status::kOk) ++stats_.rma_errors;
  rc = return_code_from_status(s);
  msg_id = h.common.message_id;
  return RxResult::kAccepted;
}

// --- answers waiting for a tx slot -----------------------------------------------------

void Ses::wait_for_tx(uint32_t slot, TxWait what) {
  RxMessage& m = rx_[slot];
  if (m.tx_wait != TxWait::kNone) return;
  m.tx_wait = what;
  tx_waiters_.push_back(slot);
}

void Ses::resume_waiting(Time now) {
  tx_resuming_.swap(tx_waiters_);  // one that still finds no room waits again
  for (size_t i = 0; i < tx_resuming_.size(); ++i) {
    const uint32_t slot = tx_resuming_[i];
    if (!rx_.in_use(slot) || rx_[slot].tx_wait == TxWait::kNone) continue;  // ended meanwhile
    if (!tx_room_for(1)) {  // no room for anyone: keep the rest, in order
      tx_waiters_.insert(tx_waiters_.end(), tx_resuming_.begin() + static_cast<ptrdiff_t>(i),
                         tx_resuming_.end());
      break;
    }
    RxMessage& m = rx_[slot];
    const TxWait what = m.tx_wait;
    m.tx_wait = TxWait::kNone;
    switch (what) {
      case TxWait::kRendezvousRead:
        start_rendezvous_read(slot, now);
        break;
      case TxWait::kReadResponse: {
        const PeerIndex peer = m.peer;
        const uint16_t id = m.msg_id;
        const uint64_t key = m.read_key, offset = m.read_offset, length = m.total;
        const std::unique_ptr<uint8_t[]> taken = std::move(m.unexpected);
        free_rx(slot);
        serve_read(peer, id, key, offset, length, now, taken.get());
        break;
      }
      case TxWait::kWriteResponse:
        answer_write(slot, now);
        break;
      case TxWait::kAtomicResponse: {
        const auto modified = static_cast<uint32_t>(m.total);
        answer_atomic(m.peer, m.msg_id, return_code_from_status(m.status), modified,
                      {m.unexpected.get(), m.unexpected ? modified : 0u}, now);
        free_rx(slot);
        break;
      }
      case TxWait::kNone:
        break;
    }
  }
  tx_resuming_.clear();
}

}  // namespace spray::ses
