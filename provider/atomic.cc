// Atomic operations (fi_atomic, fi_fetch_atomic, fi_compare_atomic and their v/msg/inject
// forms, the *valid queries and fi_query_atomic): UET ATOMIC and FETCH_ATOMIC requests
// on a peer's registered memory, named by (address, key) as RMA is. Every form funnels
// into post_atomic.
//
// What is offered: the 8-64 bit integers, float and double; every fi_op on them but the
// bitwise ones (and masked swap) on floating point. fi_atomic takes FI_MIN..FI_BXOR and
// FI_ATOMIC_WRITE, fi_fetch_atomic those and FI_ATOMIC_READ, fi_compare_atomic the
// FI_CSWAP family and FI_MSWAP with a count of 1 (UET carries its values in the header).
// An operation's elements travel in one packet: at most kMaxAtomicBytes. The target
// applies each element with a real atomic instruction (transport/ses/atomic_op.h), so
// atomics are atomic against each other from any endpoint and against the target
// process's own atomic updates. Immediate data (FI_REMOTE_CQ_DATA) is not carried.
#include <rdma/fi_atomic.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "provider/endpoint.h"
#include "transport/ses/atomic_op.h"

namespace spray::fi {
namespace {

// The most bytes of elements one operation may carry, for every MTU the provider uses
// (the smallest, 1500-byte Ethernet, leaves 1388 bytes of payload per packet).
constexpr size_t kMaxAtomicBytes = 1024;

constexpr uint64_t kAtomicFlags = FI_COMPLETION | FI_INJECT | FI_TRANSMIT_COMPLETE |
                                  FI_DELIVERY_COMPLETE | FI_INJECT_COMPLETE | FI_MORE | FI_FENCE |
                                  FI_ATOMIC | FI_READ | FI_WRITE;

// Which call an operation came through: it decides the opcodes it may use.
enum class Form : uint8_t { kWrite, kFetch, kCompare };

Endpoint& ep_of(fid_ep* f) {
  return *fid_to<Endpoint>(f);
}

std::optional<wire::AmoDatatype> uet_datatype(fi_datatype t) {
  switch (t) {
    case FI_INT8:
      return wire::AmoDatatype::kInt8;
    case FI_UINT8:
      return wire::AmoDatatype::kUint8;
    case FI_INT16:
      return wire::AmoDatatype::kInt16;
    case FI_UINT16:
      return wire::AmoDatatype::kUint16;
    case FI_INT32:
      return wire::AmoDatatype::kInt32;
    case FI_UINT32:
      return wire::AmoDatatype::kUint32;
    case FI_INT64:
      return wire::AmoDatatype::kInt64;
    case FI_UINT64:
      return wire::AmoDatatype::kUint64;
    case FI_FLOAT:
      return wire::AmoDatatype::kFloat;
    case FI_DOUBLE:
      return wire::AmoDatatype::kDouble;
    default:
      return std::nullopt;  // complex, long double and the rest
  }
}

std::optional<wire::AmoOpcode> uet_opcode(fi_op op) {
  switch (op) {
    case FI_MIN:
      return wire::AmoOpcode::kMin;
    case FI_MAX:
      return wire::AmoOpcode::kMax;
    case FI_SUM:
      return wire::AmoOpcode::kSum;
    case FI_PROD:
      return wire::AmoOpcode::kProd;
    case FI_LOR:
      return wire::AmoOpcode::kLogicalOr;
    case FI_LAND:
      return wire::AmoOpcode::kLogicalAnd;
    case FI_BOR:
      return wire::AmoOpcode::kBitwiseOr;
    case FI_BAND:
      return wire::AmoOpcode::kBitwiseAnd;
    case FI_LXOR:
      return wire::AmoOpcode::kLogicalXor;
    case FI_BXOR:
      return wire::AmoOpcode::kBitwiseXor;
    case FI_ATOMIC_READ:
      return wire::AmoOpcode::kRead;
    case FI_ATOMIC_WRITE:
      return wire::AmoOpcode::kWrite;
    case FI_CSWAP:
      return wire::AmoOpcode::kCompareSwap;
    case FI_CSWAP_NE:
      return wire::AmoOpcode::kCompareSwapNotEqual;
    case FI_CSWAP_LE:
      return wire::AmoOpcode::kCompareSwapLessEqual;
    case FI_CSWAP_LT:
      return wire::AmoOpcode::kCompareSwapLess;
    case FI_CSWAP_GE:
      return wire::AmoOpcode::kCompareSwapGreaterEqual;
    case FI_CSWAP_GT:
      return wire::AmoOpcode::kCompareSwapGreater;
    case FI_MSWAP:
      return wire::AmoOpcode::kMaskedSwap;
    default:
      return std::nullopt;
  }
}

// Whether `form` offers `op` on `datatype`; if so, the largest count it takes.
std::optional<size_t> max_count(Form form, fi_datatype datatype, fi_op op) {
  const auto type = uet_datatype(datatype);
  const auto opcode = uet_opcode(op);
  if (!type || !opcode) return std::nullopt;
  const bool compare = wire::is_compare_swap(*opcode);
  if ((form == Form::kCompare) != compare) return std::nullopt;
  if (form == Form::kWrite && *opcode == wire::AmoOpcode::kRead) return std::nullopt;
  if (ses::check_atomic(*opcode, *type, form != Form::kWrite) != wire::ReturnCode::kOk) {
    return std::nullopt;
  }
  return compare ? 1 : kMaxAtomicBytes / ses::amo_element_bytes(*type);
}

int valid(Form form, fi_datatype datatype, fi_op op, size_t* count) {
  const auto n = max_count(form, datatype, op);
  if (!n) return -FI_EOPNOTSUPP;
  if (count) *count = *n;
  return FI_SUCCESS;
}

// One side of an atomic (operands, compare values or results) as the application gave
// it: up to kIovLimit iocs; the plain calls give one.
struct Iocs {
  const fi_ioc* ioc = nullptr;
  size_t count = 0;
};

// The elements `side` names in all, or nullopt for more than kIovLimit iocs or more than
// `most` elements.
std::optional<size_t> elements(const Iocs& side, size_t most) {
  if (side.count > kIovLimit || (side.count && !side.ioc)) return std::nullopt;
  size_t total = 0;
  for (size_t i = 0; i < side.count; ++i) {
    if (side.ioc[i].count > most - total) return std::nullopt;
    total += side.ioc[i].count;
  }
  return total;
}

struct AtomicOp {
  Form form = Form::kWrite;
  Iocs operands;  // compare forms: the swap value
  Iocs compare;
  Iocs result;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  uint64_t addr = 0;  // at the target: virtual address or offset, per its mr_mode
  uint64_t key = 0;
  fi_datatype datatype = FI_UINT64;
  fi_op op = FI_SUM;
  void* context = nullptr;
  uint64_t flags = 0;
  bool inject_call = false;  // fi_inject_atomic: no completion at all
};

// Where the engine reads an atomic's operands and compare values and writes its results.
struct AtomicBuffers {
  const void* operands = nullptr;
  const void* compare = nullptr;
  void* result = nullptr;
};

// The buffers of the operation in `slot`. Sides of one piece pass as they are; sides of
// several share one staging buffer of three `bytes`-long parts (operands, compare values,
// results), gathered now or scattered at completion (staging.h). An inject's operands go
// to an inject buffer. FI_SUCCESS or the error (-FI_EAGAIN, -FI_ENOMEM).
int atomic_buffers(Endpoint& ep, uint32_t slot, const Pieces& operands, const Pieces& compare,
                   const Pieces& result, size_t bytes, bool inject, AtomicBuffers& out) {
  int error = FI_SUCCESS;
  if (inject) {  // write form only: no compare values or results
    out.operands = ep.outgoing(slot, operands, true, error);
    return error;
  }
  if (operands.contiguous() && compare.contiguous() && result.contiguous()) {
    out = {operands.only(), compare.only(), result.only()};
    return FI_SUCCESS;
  }
  uint8_t* parts = ep.stage(slot, 3 * bytes, error);
  if (!parts) return error;
  const auto gathered = [&](const Pieces& p, uint8_t* part) -> const void* {
    if (p.contiguous()) return p.only();
    gather(p, part);
    return part;
  };
  out.operands = gathered(operands, parts);
  out.compare = gathered(compare, parts + bytes);
  out.result = result.only();
  if (!result.contiguous()) {
    out.result = parts + 2 * bytes;
    ep.staging.scatter_on_completion(ep.ops[slot].staged, result, 2 * bytes);
  }
  return FI_SUCCESS;
}

ssize_t post_atomic(Endpoint& ep, const AtomicOp& a) {
  if (a.flags & ~kAtomicFlags) return -FI_EBADFLAGS;
  if (ep.type != FI_EP_RDM || !(ep.info->caps & FI_ATOMIC)) {
    SPRAY_WARN(FI_LOG_EP_DATA, "atomic on an endpoint opened without FI_ATOMIC\n");
    return -FI_ENOSYS;
  }
  const auto most = max_count(a.form, a.datatype, a.op);
  if (!most) {
    SPRAY_WARN(FI_LOG_EP_DATA, "atomic op %d on datatype %d is not supported by this call\n",
               static_cast<int>(a.op), static_cast<int>(a.datatype));
    return -FI_EOPNOTSUPP;
  }
  // The operand iocs give the count (FI_ATOMIC_READ reads none of their bytes); compare
  // values and results must name as many elements.
  const auto count = elements(a.operands, *most);
  if (!count || *count == 0) return -FI_EINVAL;
  const bool fetches = a.form != Form::kWrite;
  const bool compares = a.form == Form::kCompare;
  if ((fetches && elements(a.result, *most) != count) ||
      (compares && elements(a.compare, *most) != count)) {
    return -FI_EINVAL;
  }
  const size_t element_bytes = ses::amo_element_bytes(*uet_datatype(a.datatype));
  const size_t bytes = *count * element_bytes;
  const bool reads_operands = a.op != FI_ATOMIC_READ;
  const auto side = [&](const Iocs& iocs, bool used) -> std::optional<Pieces> {
    return used ? pieces_of(iocs.ioc, iocs.count, element_bytes) : Pieces{};
  };
  const auto operands = side(a.operands, reads_operands);
  const auto compare = side(a.compare, compares);
  const auto result = side(a.result, fetches);
  if (!operands || !compare || !result) return -FI_EINVAL;
  const bool inject = (a.flags & FI_INJECT) != 0;
  if (inject && (a.form != Form::kWrite || bytes > ep.inject_size)) return -FI_EINVAL;
  std::lock_guard lock(ep.domain->mutex);
  if (!ep.enabled) return -FI_EOPBADSTATE;
  const pds::PeerIndex peer = ep.peer(a.peer);
  if (peer == pds::kNoPeer) {
    SPRAY_WARN(FI_LOG_EP_DATA, "atomic to fi_addr %lu, which names no address vector entry\n",
               static_cast<unsigned long>(a.peer));
    return -FI_EINVAL;
  }
  const bool report = !a.inject_call && (!ep.tx_selective || (a.flags & FI_COMPLETION));
  const uint64_t kind = FI_ATOMIC | (a.form == Form::kWrite ? FI_WRITE : FI_READ);
  const uint32_t slot = ep.take_op(a.context, kind, nullptr, report);
  if (slot == Endpoint::kNone) {
    endpoint_progress(ep);
    return -FI_EAGAIN;
  }
  AtomicBuffers buffers;
  if (const int error =
          atomic_buffers(ep, slot, *operands, *compare, *result, bytes, inject, buffers);
      error != FI_SUCCESS) {
    ep.release_op(slot);
    if (error == -FI_EAGAIN) endpoint_progress(ep);  // inject buffers return as atomics end
    return error;
  }
  ses::AtomicSpec spec;
  spec.op = *uet_opcode(a.op);
  spec.datatype = *uet_datatype(a.datatype);
  spec.count = static_cast<uint32_t>(*count);
  spec.operands = reads_operands ? buffers.operands : nullptr;
  spec.compare = buffers.compare;
  spec.result = buffers.result;
  const Status s = ep.engine->atomic(peer, spec, a.addr, a.key, slot,
                                     ep.ordered ? pds::Mode::kRod : pds::Mode::kRud);
  if (s != Status::kOk) {
    ep.release_op(slot);
    if (s == Status::kAgain) endpoint_progress(ep);
    return -to_fi_errno(s);
  }
  if (!(a.flags & FI_MORE)) endpoint_transmit(ep);  // FI_MORE: as for sends (msg.cc)
  return FI_SUCCESS;
}

// The target of a *msg form: its one rma_ioc (rma_iov_limit is 1), whose count must match
// the operands'.
bool from_msg(const fi_msg_atomic* msg, AtomicOp& a) {
  if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov) return false;
  a.operands = {msg->msg_iov, msg->iov_count};
  if (elements(a.operands, std::numeric_limits<size_t>::max()) != msg->rma_iov[0].count) {
    return false;
  }
  a.peer = msg->addr;
  a.addr = msg->rma_iov[0].addr;
  a.key = msg->rma_iov[0].key;
  a.datatype = msg->datatype;
  a.op = msg->op;
  a.context = msg->context;
  return true;
}

AtomicOp op_of(Form form, Iocs operands, fi_addr_t dest, uint64_t addr, uint64_t key,
               fi_datatype datatype, fi_op op, void* context, uint64_t flags) {
  AtomicOp a;
  a.form = form;
  a.operands = operands;
  a.peer = dest;
  a.addr = addr;
  a.key = key;
  a.datatype = datatype;
  a.op = op;
  a.context = context;
  a.flags = flags;
  return a;
}

// --- fi_atomic ---------------------------------------------------------------------------

ssize_t a_writev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
                 uint64_t key, fi_datatype datatype, fi_op op, void* context) {
  return post_atomic(ep_of(f), op_of(Form::kWrite, {iov, count}, dest, addr, key, datatype, op,
                                     context, ep_of(f).tx_op_flags));
}
ssize_t a_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr,
                uint64_t key, fi_datatype datatype, fi_op op, void* context) {
  const fi_ioc ioc{const_cast<void*>(buf), count};  // only read from
  return a_writev(f, &ioc, nullptr, 1, dest, addr, key, datatype, op, context);
}
ssize_t a_writemsg(fid_ep* f, const fi_msg_atomic* msg, uint64_t flags) {
  AtomicOp a;
  if (!from_msg(msg, a)) return -FI_EINVAL;
  a.flags = flags;
  return post_atomic(ep_of(f), a);
}
ssize_t a_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr,
                 uint64_t key, fi_datatype datatype, fi_op op) {
  const fi_ioc ioc{const_cast<void*>(buf), count};
  AtomicOp a = op_of(Form::kWrite, {&ioc, 1}, dest, addr, key, datatype, op, nullptr, FI_INJECT);
  a.inject_call = true;
  return post_atomic(ep_of(f), a);
}

// --- fi_fetch_atomic ---------------------------------------------------------------------

ssize_t a_readwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_ioc* resultv, void**,
                     size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
                     fi_datatype datatype, fi_op op, void* context) {
  AtomicOp a = op_of(Form::kFetch, {iov, count}, dest, addr, key, datatype, op, context,
                     ep_of(f).tx_op_flags);
  a.result = {resultv, result_count};
  return post_atomic(ep_of(f), a);
}
ssize_t a_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result, void*,
                    fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype datatype, fi_op op,
                    void* context) {
  const fi_ioc ioc{const_cast<void*>(buf), count};
  fi_ioc result_ioc{result, count};
  return a_readwritev(f, &ioc, nullptr, 1, &result_ioc, nullptr, 1, dest, addr, key, datatype, op,
                      context);
}
ssize_t a_readwritemsg(fid_ep* f, const fi_msg_atomic* msg, fi_ioc* resultv, void**,
                       size_t result_count, uint64_t flags) {
  AtomicOp a;
  if (!from_msg(msg, a)) return -FI_EINVAL;
  a.form = Form::kFetch;
  a.result = {resultv, result_count};
  a.flags = flags;
  return post_atomic(ep_of(f), a);
}

// --- fi_compare_atomic -------------------------------------------------------------------

ssize_t a_compwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, const fi_ioc* comparev,
                     void**, size_t compare_count, fi_ioc* resultv, void**, size_t result_count,
                     fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype datatype, fi_op op,
                     void* context) {
  AtomicOp a = op_of(Form::kCompare, {iov, count}, dest, addr, key, datatype, op, context,
                     ep_of(f).tx_op_flags);
  a.compare = {comparev, compare_count};
  a.result = {resultv, result_count};
  return post_atomic(ep_of(f), a);
}
ssize_t a_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*,
                    void* result, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                    fi_datatype datatype, fi_op op, void* context) {
  const fi_ioc ioc{const_cast<void*>(buf), count};
  const fi_ioc compare_ioc{const_cast<void*>(compare), count};
  fi_ioc result_ioc{result, count};
  return a_compwritev(f, &ioc, nullptr, 1, &compare_ioc, nullptr, 1, &result_ioc, nullptr, 1, dest,
                      addr, key, datatype, op, context);
}
ssize_t a_compwritemsg(fid_ep* f, const fi_msg_atomic* msg, const fi_ioc* comparev, void**,
                       size_t compare_count, fi_ioc* resultv, void**, size_t result_count,
                       uint64_t flags) {
  AtomicOp a;
  if (!from_msg(msg, a)) return -FI_EINVAL;
  a.form = Form::kCompare;
  a.compare = {comparev, compare_count};
  a.result = {resultv, result_count};
  a.flags = flags;
  return post_atomic(ep_of(f), a);
}

int a_writevalid(fid_ep*, fi_datatype datatype, fi_op op, size_t* count) {
  return valid(Form::kWrite, datatype, op, count);
}
int a_readwritevalid(fid_ep*, fi_datatype datatype, fi_op op, size_t* count) {
  return valid(Form::kFetch, datatype, op, count);
}
int a_compwritevalid(fid_ep*, fi_datatype datatype, fi_op op, size_t* count) {
  return valid(Form::kCompare, datatype, op, count);
}

}  // namespace

int query_atomic(fi_datatype datatype, fi_op op, fi_atomic_attr* attr, uint64_t flags) {
  if (flags & FI_TAGGED) return -FI_EOPNOTSUPP;  // tagged atomics: not offered
  const Form form = (flags & FI_COMPARE_ATOMIC) ? Form::kCompare
                    : (flags & FI_FETCH_ATOMIC) ? Form::kFetch
                                                : Form::kWrite;
  const auto n = max_count(form, datatype, op);
  if (!n) return -FI_EOPNOTSUPP;
  if (attr) {
    attr->count = *n;
    attr->size = ses::amo_element_bytes(*uet_datatype(datatype));
  }
  return FI_SUCCESS;
}

fi_ops_atomic atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = a_write,
    .writev = a_writev,
    .writemsg = a_writemsg,
    .inject = a_inject,
    .readwrite = a_readwrite,
    .readwritev = a_readwritev,
    .readwritemsg = a_readwritemsg,
    .compwrite = a_compwrite,
    .compwritev = a_compwritev,
    .compwritemsg = a_compwritemsg,
    .writevalid = a_writevalid,
    .readwritevalid = a_readwritevalid,
    .compwritevalid = a_compwritevalid,
};

}  // namespace spray::fi
