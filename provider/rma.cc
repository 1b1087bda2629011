// RMA operations (fi_read/fi_write and their v/msg/inject/data forms): one-sided reads
// and writes of a peer's registered memory, named by (address, key). Every form funnels
// into post_rma. The target checks key, rights and bounds (memory_region.h) before a byte
// moves; a bad key, range or right completes the operation in error at the initiator
// and leaves the target's memory untouched. Writes with immediate data also complete
// at the target (FI_REMOTE_CQ_DATA on its receive CQ).
#include <optional>

#include "provider/endpoint.h"

namespace spray::fi {
namespace {

constexpr uint64_t kRmaFlags = FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA |
                               FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_INJECT_COMPLETE |
                               FI_MORE | FI_FENCE | FI_RMA | FI_READ | FI_WRITE;

Endpoint& ep_of(fid_ep* f) {
  return *fid_to<Endpoint>(f);
}

struct RmaOp {
  bool write = false;
  // Source (write) or destination (read): one piece or several (staging.h); nullopt when
  // the call gave an invalid buffer.
  std::optional<Pieces> local;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  uint64_t addr = 0;  // at the target: virtual address or offset, per its mr_mode
  uint64_t key = 0;
  bool has_data = false;
  uint64_t data = 0;
  void* context = nullptr;
  uint64_t flags = 0;
  bool inject_call = false;  // fi_inject_write*: no completion at all
};

ssize_t post_rma(Endpoint& ep, const RmaOp& r) {
  if (!r.local) return -FI_EINVAL;
  const size_t len = r.local->bytes;
  if (r.flags & ~kRmaFlags) return -FI_EBADFLAGS;
  if (ep.type != FI_EP_RDM || !(ep.info->caps & FI_RMA)) {
    SPRAY_WARN(FI_LOG_EP_DATA, "RMA on an endpoint opened without FI_RMA\n");
    return -FI_ENOSYS;
  }
  std::lock_guard lock(ep.domain->mutex);
  if (!ep.enabled) return -FI_EOPBADSTATE;
  if (len > ep.info->ep_attr->max_msg_size) return -FI_EMSGSIZE;
  const bool inject = (r.flags & FI_INJECT) != 0;
  if (inject && (!r.write || len > ep.inject_size)) return -FI_EINVAL;
  const pds::PeerIndex peer = ep.peer(r.peer);
  if (peer == pds::kNoPeer) {
    SPRAY_WARN(FI_LOG_EP_DATA, "RMA to fi_addr %lu, which names no address vector entry\n",
               static_cast<unsigned long>(r.peer));
    return -FI_EINVAL;
  }
  const bool report = !r.inject_call && (!ep.tx_selective || (r.flags & FI_COMPLETION));
  const uint64_t kind = FI_RMA | (r.write ? FI_WRITE : FI_READ);
  const uint32_t slot = ep.take_op(r.context, kind, nullptr, report);
  if (slot == Endpoint::kNone) {
    endpoint_progress(ep);
    return -FI_EAGAIN;
  }
  int error = FI_SUCCESS;
  void* local = r.write ? const_cast<void*>(ep.outgoing(slot, *r.local, inject, error))
                        : ep.incoming(slot, *r.local, error);
  if (error != FI_SUCCESS) {
    ep.release_op(slot);
    if (error == -FI_EAGAIN) endpoint_progress(ep);  // inject buffers return as writes end
    return error;
  }
  ses::SendSpec spec;
  spec.has_data = r.has_data;
  spec.data = r.data;
  spec.mode = ep.ordered ? pds::Mode::kRod : pds::Mode::kRud;
  const Status s = r.write ? ep.engine->write(peer, local, len, r.addr, r.key, slot, spec)
                           : ep.engine->read(peer, local, len, r.addr, r.key, slot, spec.mode);
  if (s != Status::kOk) {
    ep.release_op(slot);
    if (s == Status::kAgain) endpoint_progress(ep);
    return -to_fi_errno(s);
  }
  if (!(r.flags & FI_MORE)) endpoint_transmit(ep);  // FI_MORE: as for sends (msg.cc)
  return FI_SUCCESS;
}

// The *msg forms: up to kIovLimit local pieces, one remote range of their total length
// (rma_iov_limit is 1).
ssize_t from_msg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags, bool write) {
  if (!msg) return -FI_EINVAL;
  RmaOp r;
  r.local = pieces_of(msg->msg_iov, msg->iov_count);
  if (!r.local || msg->rma_iov_count != 1 || !msg->rma_iov ||
      msg->rma_iov[0].len != r.local->bytes) {
    return -FI_EINVAL;
  }
  r.write = write;
  r.peer = msg->addr;
  r.addr = msg->rma_iov[0].addr;
  r.key = msg->rma_iov[0].key;
  r.has_data = write && (flags & FI_REMOTE_CQ_DATA);
  r.data = msg->data;
  r.context = msg->context;
  r.flags = flags;
  return post_rma(ep_of(f), r);
}

// A write of `local` (every write form differs from this only in data and flags).
// `inject_call`: fi_inject_write*, which report no completion at all.
RmaOp write_op(const std::optional<Pieces>& local, fi_addr_t dest, uint64_t addr, uint64_t key,
               void* ctx, uint64_t flags, bool inject_call = false) {
  RmaOp r;
  r.write = true;
  r.local = local;
  r.peer = dest;
  r.addr = addr;
  r.key = key;
  r.context = ctx;
  r.flags = flags;
  r.inject_call = inject_call;
  return r;
}
RmaOp with_data(RmaOp r, uint64_t data) {
  r.has_data = true;
  r.data = data;
  r.flags |= FI_REMOTE_CQ_DATA;
  return r;
}

RmaOp read_op(const std::optional<Pieces>& local, fi_addr_t src, uint64_t addr, uint64_t key,
              void* ctx, uint64_t flags) {
  RmaOp r = write_op(local, src, addr, key, ctx, flags);
  r.write = false;
  return r;
}

ssize_t r_read(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key,
               void* ctx) {
  return post_rma(ep_of(f),
                  read_op(pieces_of(buf, len), src, addr, key, ctx, ep_of(f).tx_op_flags));
}
ssize_t r_readv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr,
                uint64_t key, void* ctx) {
  return post_rma(ep_of(f),
                  read_op(pieces_of(iov, count), src, addr, key, ctx, ep_of(f).tx_op_flags));
}
ssize_t r_readmsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) {
  return from_msg(f, msg, flags, false);
}
ssize_t r_write(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr,
                uint64_t key, void* ctx) {
  return post_rma(ep_of(f),
                  write_op(pieces_of(buf, len), dest, addr, key, ctx, ep_of(f).tx_op_flags));
}
ssize_t r_writev(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t addr,
                 uint64_t key, void* ctx) {
  return post_rma(ep_of(f),
                  write_op(pieces_of(iov, count), dest, addr, key, ctx, ep_of(f).tx_op_flags));
}
ssize_t r_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) {
  return from_msg(f, msg, flags, true);
}
ssize_t r_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr,
                 uint64_t key) {
  return post_rma(ep_of(f),
                  write_op(pieces_of(buf, len), dest, addr, key, nullptr, FI_INJECT, true));
}
ssize_t r_writedata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                    uint64_t addr, uint64_t key, void* ctx) {
  return post_rma(
      ep_of(f),
      with_data(write_op(pieces_of(buf, len), dest, addr, key, ctx, ep_of(f).tx_op_flags), data));
}
ssize_t r_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                     uint64_t addr, uint64_t key) {
  return post_rma(
      ep_of(f),
      with_data(write_op(pieces_of(buf, len), dest, addr, key, nullptr, FI_INJECT, true), data));
}

}  // namespace

fi_ops_rma rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = r_read,
    .readv = r_readv,
    .readmsg = r_readmsg,
    .write = r_write,
    .writev = r_writev,
    .writemsg = r_writemsg,
    .inject = r_inject,
    .writedata = r_writedata,
    .injectdata = r_injectdata,
};

}  // namespace spray::fi
