// Atomics, both sides: the initiator's one-packet ATOMIC/FETCH_ATOMIC request with its
// extension header, and the target's check, application (atomic_op.h) and answer.
//
// At the target an atomic is applied as soon as its packet arrives, in the engine's
// receive path: PDS hands each request to SES once, so no retransmission applies it
// again. Errors of the request's meaning (key, bounds, rights, an opcode or type we do
// not apply, a misaligned address) are answered with UET's return code, so the
// initiator's operation fails with a reason; a packet whose headers contradict
// themselves is dropped as malformed, as any forged packet is.
#include <cstring>

#include "transport/ses/atomic_op.h"
#include "transport/ses/ses.h"

namespace spray::ses {
namespace {

// The bits of one element at `p`, zero-extended (how the compare-and-swap extension
// carries a value of up to 64 bits).
uint64_t element_bits(const void* p, size_t bytes) {
  uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian host: the low bytes
  return v;
}

}  // namespace

// --- initiator ---------------------------------------------------------------------------

Status Ses::atomic(PeerIndex peer, const AtomicSpec& a, uint64_t remote_addr, uint64_t key,
                   UserContext ctx, pds::Mode mode, Time now) {
  const bool fetching = a.result != nullptr;
  const size_t element = amo_element_bytes(a.datatype);
  if (a.count == 0 || check_atomic(a.op, a.datatype, fetching) != wire::ReturnCode::kOk) {
    return Status::kInvalidArgument;
  }
  const bool compare_swap = wire::is_compare_swap(a.op);
  if ((compare_swap && (a.count != 1 || !a.compare || !a.operands)) ||
      (!compare_swap && a.op != wire::AmoOpcode::kRead && !a.operands)) {
    return Status::kInvalidArgument;
  }
  const uint64_t length = uint64_t{a.count} * element;
  if (length > max_atomic_bytes()) return Status::kTooLong;
  if (const Status s = check_operation(peer, a.operands ? a.operands : a.result, length);
      s != Status::kOk) {
    return s;
  }
  const uint32_t slot = new_tx(TxKind::kAtomic, peer, length);
  if (slot == kNone) return Status::kAgain;
  TxMessage& m = tx_[slot];
  m.op = fetching ? OpKind::kFetchAtomic : OpKind::kAtomic;
  m.user_op = true;
  m.src = static_cast<const uint8_t*>(a.operands);
  m.dst = static_cast<uint8_t*>(a.result);
  m.remote_addr = remote_addr;
  m.key_or_tag = key;
  m.context = ctx;
  m.spec.mode = mode;
  m.amo_op = a.op;
  m.amo_type = a.datatype;
  m.fetching = fetching;
  if (compare_swap) {
    m.amo_compare = element_bits(a.compare, element);
    m.amo_swap = element_bits(a.operands, element);
  }
  m.needs_response = true;  // only the target knows if key, bounds and type were good
  m.msg_id = next_rma_id(peer);
  m.run.packet_count = 1;
  return start(slot, mode, now);
}

size_t Ses::build_atomic_extension(const TxMessage& m, std::span<uint8_t> out) const {
  if (!wire::is_compare_swap(m.amo_op)) {
    wire::AtomicExtension x;
    x.opcode = m.amo_op;
    x.datatype = m.amo_type;
    return wire::encode(x, out);
  }
  wire::AtomicCompareSwapExtension x;
  x.common.opcode = m.amo_op;
  x.common.datatype = m.amo_type;
  x.compare_low = m.amo_compare;
  x.swap_low = m.amo_swap;
  return wire::encode(x, out);
}

// --- target ------------------------------------------------------------------------------

RxResult Ses::on_atomic(PeerIndex peer, const wire::SesStandardRequest& h,
                        std::span<const uint8_t> rest, Time now) {
  const uint16_t id = h.common.message_id;
  constexpr uint8_t kWhole = wire::ses_flags::kStartOfMessage | wire::ses_flags::kEndOfMessage;
  if (!(id & 0x8000) || (h.common.flags & kWhole) != kWhole) return RxResult::kMalformed;
  wire::AtomicExtension x;
  if (wire::decode(rest, x) != wire::DecodeError::kOk) return RxResult::kMalformed;
  uint64_t compare = 0, swap = 0;
  size_t extension = wire::kAtomicExtensionBytes;
  if (wire::is_compare_swap(x.opcode)) {
    wire::AtomicCompareSwapExtension c;
    if (wire::decode(rest, c) != wire::DecodeError::kOk) return RxResult::kMalformed;
    // High halves are for 128-bit types, which execute_atomic refuses with a reason;
    // for a type of 64 bits or fewer they contradict the type: dropped as malformed.
    if ((c.compare_high != 0 || c.swap_high != 0) && amo_element_bytes(x.datatype) != 0) {
      return RxResult::kMalformed;
    }
    compare = c.compare_low;
    swap = c.swap_low;
    extension = wire::kAtomicCompareSwapExtensionBytes;
  }
  const auto operands = rest.subspan(extension);
  const bool carries = x.opcode != wire::AmoOpcode::kRead && !wire::is_compare_swap(x.opcode);
  if (operands.size() != (carries ? h.request_length : 0)) return RxResult::kMalformed;

  const bool fetching = h.common.opcode == wire::SesOpcode::kFetchAtomic;
  const bool room = tx_room_for(1);
  // Without a tx slot for the answer, the answer waits in an rx slot (as a read's does);
  // without that either, PDS refuses the packet and its sender retries: nothing applied.
  uint32_t waiting = kNone;
  if (!room) {
    if (!rx_room_for(peer, id, false)) return RxResult::kNoResource;
    const auto slot = rx_.acquire();
    if (!slot) return RxResult::kNoResource;
    waiting = *slot;
  }
  if (atomic_scratch_.size() < payload_per_packet_) atomic_scratch_.resize(payload_per_packet_);
  const wire::ReturnCode rc = execute_atomic(peer, h, x, compare, swap, operands,
                                             fetching ? atomic_scratch_.data() : nullptr);
  const bool ok = rc == wire::ReturnCode::kOk;
  const uint32_t modified = ok ? h.request_length : 0;
  const std::span<const uint8_t> old_values(atomic_scratch_.data(), ok && fetching ? modified : 0);
  if (room) {
    answer_atomic(peer, id, rc, modified, old_values, now);
    return RxResult::kAccepted;
  }
  RxMessage& m = rx_[waiting];
  m.peer = peer;
  m.msg_id = id;
  m.status = status_from_return_code(rc);
  m.total = modified;
  if (!old_values.empty()) {  // the slow path of a full table: a heap copy is fine here
    m.unexpected = std::make_unique_for_overwrite<uint8_t[]>(old_values.size());
    std::memcpy(m.unexpected.get(), old_values.data(), old_values.size());
  }
  wait_for_tx(waiting, TxWait::kAtomicResponse);
  return RxResult::kAccepted;
}

wire::ReturnCode Ses::execute_atomic(PeerIndex peer, const wire::SesStandardRequest& h,
                                     const wire::AtomicExtension& x, uint64_t compare,
                                     uint64_t swap, std::span<const uint8_t> operands,
                                     uint8_t* old_values) {
  const bool fetching = h.common.opcode == wire::SesOpcode::kFetchAtomic;
  wire::ReturnCode rc = check_atomic(x.opcode, x.datatype, fetching);
  const size_t element = amo_element_bytes(x.datatype);
  const uint64_t length = h.request_length;
  if (rc == wire::ReturnCode::kOk &&
      (length == 0 || length % element != 0 || length > payload_per_packet_ ||
       (wire::is_compare_swap(x.opcode) && length != element))) {
    rc = wire::ReturnCode::kAmoUnsupportedSize;
  }
  uint8_t* target = nullptr;
  if (rc == wire::ReturnCode::kOk) {
    // Reading needs the right to read, changing the right to write; fetching and
    // changing both.
    uint32_t need = 0;
    if (fetching) need |= access::kRemoteRead;
    if (x.opcode != wire::AmoOpcode::kRead) need |= access::kRemoteWrite;
    const Status s = regions_.resolve(h.match_bits, h.buffer_offset, length, need, target);
    if (s != Status::kOk) rc = return_code_from_status(s);
  }
  if (rc == wire::ReturnCode::kOk && reinterpret_cast<uintptr_t>(target) % element != 0) {
    rc = wire::ReturnCode::kAmoUnaligned;
  }
  if (rc != wire::ReturnCode::kOk) {
    ++stats_.atomic_errors;
    return rc;
  }
  apply_atomic(x.opcode, x.datatype, target, operands.empty() ? nullptr : operands.data(), compare,
               swap, static_cast<uint32_t>(length / element), old_values);
  ++stats_.atomics_applied;
  if (cfg_.report_remote_access) {
    (void)report_remote_access(fetching ? OpKind::kRemoteFetchAtomic : OpKind::kRemoteAtomic, peer,
                               h.match_bits, x.opcode == wire::AmoOpcode::kRead ? 0 : length);
  }
  return rc;
}

void Ses::answer_atomic(PeerIndex peer, uint16_t id, wire::ReturnCode rc, uint32_t modified,
                        std::span<const uint8_t> old_values, Time now) {
  if (old_values.empty()) {
    (void)queue_response(peer, id, rc, modified, now);
    return;
  }
  const uint32_t slot = new_tx(TxKind::kReadResponse, peer, old_values.size());
  if (slot == kNone) return;  // the caller made room; the initiator times out otherwise
  uint8_t* results = answer_copy(slot, old_values.size());
  std::memcpy(results, old_values.data(), old_values.size());
  TxMessage& m = tx_[slot];
  m.src = results;
  m.msg_id = id;
  m.run.packet_count = 1;
  (void)start(slot, pds::Mode::kRud, now);
}

}  // namespace spray::ses
