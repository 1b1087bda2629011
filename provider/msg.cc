// Message and tagged operations (fi_send/fi_recv/fi_tsend/fi_trecv and their v/msg/
// inject/data forms). Both tables funnel into post_send / post_recv, which check the
// call, take an operation slot and hand the buffer to the engine.
#include <cstring>
#include <string>

#include "provider/endpoint.h"
#include "transport/datapath/clock.h"

namespace spray::fi {
namespace {

constexpr uint64_t kSendFlags = FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA |
                                FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_INJECT_COMPLETE |
                                FI_MORE | FI_FENCE;
constexpr uint64_t kRecvFlags = FI_COMPLETION | FI_MORE;

Endpoint& ep_of(fid_ep* f) {
  return *fid_to<Endpoint>(f);
}

// ---- FI_MSG -------------------------------------------------------------------------

ssize_t m_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, void* ctx) {
  return post_recv(ep_of(ep), pieces_of(buf, len), src, false, 0, 0, ctx, ep_of(ep).rx_op_flags);
}
ssize_t m_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src, void* ctx) {
  return post_recv(ep_of(ep), pieces_of(iov, count), src, false, 0, 0, ctx, ep_of(ep).rx_op_flags);
}
ssize_t m_recvmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) {
  if (!msg) return -FI_EINVAL;
  return post_recv(ep_of(ep), pieces_of(msg->msg_iov, msg->iov_count), msg->addr, false, 0, 0,
                   msg->context, flags);
}
ssize_t m_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, void* ctx) {
  return post_send(ep_of(ep), pieces_of(buf, len), dest, false, 0, false, 0, ctx,
                   ep_of(ep).tx_op_flags, false);
}
ssize_t m_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest, void* ctx) {
  return post_send(ep_of(ep), pieces_of(iov, count), dest, false, 0, false, 0, ctx,
                   ep_of(ep).tx_op_flags, false);
}
ssize_t m_sendmsg(fid_ep* ep, const fi_msg* msg, uint64_t flags) {
  if (!msg) return -FI_EINVAL;
  return post_send(ep_of(ep), pieces_of(msg->msg_iov, msg->iov_count), msg->addr, false, 0,
                   (flags & FI_REMOTE_CQ_DATA) != 0, msg->data, msg->context, flags, false);
}
ssize_t m_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest) {
  return post_send(ep_of(ep), pieces_of(buf, len), dest, false, 0, false, 0, nullptr, FI_INJECT,
                   true);
}
ssize_t m_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                   void* ctx) {
  return post_send(ep_of(ep), pieces_of(buf, len), dest, false, 0, true, data, ctx,
                   ep_of(ep).tx_op_flags | FI_REMOTE_CQ_DATA, false);
}
ssize_t m_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest) {
  return post_send(ep_of(ep), pieces_of(buf, len), dest, false, 0, true, data, nullptr,
                   FI_INJECT | FI_REMOTE_CQ_DATA, true);
}

// ---- FI_TAGGED ----------------------------------------------------------------------

bool tagged_ok(fid_ep* ep) {
  return ep_of(ep).type == FI_EP_RDM;
}

ssize_t t_recv(fid_ep* ep, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag,
               uint64_t ignore, void* ctx) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_recv(ep_of(ep), pieces_of(buf, len), src, true, tag, ignore, ctx,
                   ep_of(ep).rx_op_flags);
}
ssize_t t_recvv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                uint64_t ignore, void* ctx) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_recv(ep_of(ep), pieces_of(iov, count), src, true, tag, ignore, ctx,
                   ep_of(ep).rx_op_flags);
}
ssize_t t_recvmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  if (!msg) return -FI_EINVAL;
  const auto b = pieces_of(msg->msg_iov, msg->iov_count);
  if (flags & (FI_PEEK | FI_CLAIM | FI_DISCARD)) {
    return post_probe(ep_of(ep), b, msg->addr, msg->tag, msg->ignore, msg->context, flags);
  }
  return post_recv(ep_of(ep), b, msg->addr, true, msg->tag, msg->ignore, msg->context, flags);
}
ssize_t t_send(fid_ep* ep, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
               void* ctx) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_send(ep_of(ep), pieces_of(buf, len), dest, true, tag, false, 0, ctx,
                   ep_of(ep).tx_op_flags, false);
}
ssize_t t_sendv(fid_ep* ep, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                void* ctx) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_send(ep_of(ep), pieces_of(iov, count), dest, true, tag, false, 0, ctx,
                   ep_of(ep).tx_op_flags, false);
}
ssize_t t_sendmsg(fid_ep* ep, const fi_msg_tagged* msg, uint64_t flags) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  if (!msg) return -FI_EINVAL;
  return post_send(ep_of(ep), pieces_of(msg->msg_iov, msg->iov_count), msg->addr, true, msg->tag,
                   (flags & FI_REMOTE_CQ_DATA) != 0, msg->data, msg->context, flags, false);
}
ssize_t t_inject(fid_ep* ep, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_send(ep_of(ep), pieces_of(buf, len), dest, true, tag, false, 0, nullptr, FI_INJECT,
                   true);
}
ssize_t t_senddata(fid_ep* ep, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                   uint64_t tag, void* ctx) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_send(ep_of(ep), pieces_of(buf, len), dest, true, tag, true, data, ctx,
                   ep_of(ep).tx_op_flags | FI_REMOTE_CQ_DATA, false);
}
ssize_t t_injectdata(fid_ep* ep, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                     uint64_t tag) {
  if (!tagged_ok(ep)) return -FI_ENOSYS;
  return post_send(ep_of(ep), pieces_of(buf, len), dest, true, tag, true, data, nullptr,
                   FI_INJECT | FI_REMOTE_CQ_DATA, true);
}

}  // namespace

ssize_t post_send(Endpoint& ep, const std::optional<Pieces>& given, fi_addr_t dest, bool tagged,
                  uint64_t tag, bool has_data, uint64_t data, void* context, uint64_t flags,
                  bool inject_call) {
  if (!given) return -FI_EINVAL;
  const Pieces& buffer = *given;
  const size_t len = buffer.bytes;
  if (flags & ~kSendFlags & ~(FI_TRANSMIT | FI_MSG | FI_TAGGED)) return -FI_EBADFLAGS;
  std::lock_guard lock(ep.domain->mutex);
  if (!ep.enabled) {
    SPRAY_WARN(FI_LOG_EP_DATA, "send on an endpoint that is not enabled\n");
    return -FI_EOPBADSTATE;
  }
  if (len > ep.info->ep_attr->max_msg_size) return -FI_EMSGSIZE;
  const bool inject = (flags & FI_INJECT) != 0;
  if (inject && len > ep.inject_size) return -FI_EINVAL;
  const pds::PeerIndex peer = ep.peer(dest);
  if (peer == pds::kNoPeer) {
    SPRAY_WARN(FI_LOG_EP_DATA, "send to fi_addr %lu, which names no address vector entry\n",
               static_cast<unsigned long>(dest));
    return -FI_EINVAL;
  }
  const bool report = !inject_call && (!ep.tx_selective || (flags & FI_COMPLETION));
  const uint64_t kind = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
  const uint32_t slot = ep.take_op(context, kind, nullptr, report);
  if (slot == Endpoint::kNone) {
    endpoint_progress(ep);
    return -FI_EAGAIN;
  }
  int error = FI_SUCCESS;
  const void* payload = ep.outgoing(slot, buffer, inject, error);
  if (error != FI_SUCCESS) {
    ep.release_op(slot);
    if (error == -FI_EAGAIN) endpoint_progress(ep);  // inject buffers return as sends end
    return error;
  }
  ses::SendSpec spec;
  spec.tagged = tagged;
  spec.tag = tag;
  spec.has_data = has_data;
  spec.data = data;
  spec.mode = ep.ordered ? pds::Mode::kRod : pds::Mode::kRud;
  spec.completion_awaited = report || ep.send_cntr != nullptr;
  const Status s = ep.type == FI_EP_DGRAM ? ep.engine->send_datagram(peer, payload, len, slot, spec)
                                          : ep.engine->send(peer, payload, len, slot, spec);
  if (s != Status::kOk) {
    ep.release_op(slot);
    if (s == Status::kAgain) endpoint_progress(ep);
    return -to_fi_errno(s);
  }
  // Put it on the wire now, not at the next poll (over kernel UDP before looking at what
  // arrived: see endpoint_transmit). With FI_MORE the caller has more sends to post at
  // once, and they leave together (one burst) with the first without it.
  if (!(flags & FI_MORE)) endpoint_transmit(ep);
  return FI_SUCCESS;
}

ssize_t post_recv(Endpoint& ep, const std::optional<Pieces>& given, fi_addr_t src, bool tagged,
                  uint64_t tag, uint64_t ignore, void* context, uint64_t flags) {
  if (!given) return -FI_EINVAL;
  const Pieces& buffer = *given;
  const bool multi = (flags & FI_MULTI_RECV) != 0;
  if (flags & ~kRecvFlags & ~(FI_RECV | FI_MSG | FI_TAGGED | FI_MULTI_RECV)) return -FI_EBADFLAGS;
  if (multi &&
      (tagged || buffer.bytes == 0 || !buffer.contiguous() || !(ep.info->caps & FI_MULTI_RECV))) {
    SPRAY_WARN(FI_LOG_EP_DATA,
               "FI_MULTI_RECV needs the capability and an untagged receive with one buffer\n");
    return -FI_EINVAL;
  }
  std::lock_guard lock(ep.domain->mutex);
  if (!ep.enabled) {
    SPRAY_WARN(FI_LOG_EP_DATA, "receive on an endpoint that is not enabled\n");
    return -FI_EOPBADSTATE;
  }
  ses::RecvSpec spec;
  spec.length = buffer.bytes;
  spec.tagged = tagged;
  spec.tag = tag;
  spec.ignore = ignore;
  const bool directed = (ep.info->caps & FI_DIRECTED_RECV) && src != FI_ADDR_UNSPEC;
  if (directed) {
    spec.source = ep.peer(src);
    if (spec.source == pds::kNoPeer) return -FI_EINVAL;
  }
  const bool report = !ep.rx_selective || (flags & FI_COMPLETION);
  // The CQ entry names the application's (first) buffer, even when the bytes are staged.
  const uint32_t slot =
      ep.take_op(context, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), buffer.only(), report);
  if (slot == Endpoint::kNone) {
    endpoint_progress(ep);
    return -FI_EAGAIN;
  }
  int error = FI_SUCCESS;
  spec.buffer = static_cast<uint8_t*>(ep.incoming(slot, buffer, error));
  if (error != FI_SUCCESS) {
    ep.release_op(slot);
    return error;
  }
  spec.context = slot;
  spec.multi = multi;
  spec.multi_min_free = ep.min_multi_recv;
  ep.ops[slot].multi = multi;
  const Status s = ep.engine->post_recv(spec);
  if (s != Status::kOk) {
    ep.release_op(slot);
    return -to_fi_errno(s);
  }
  return FI_SUCCESS;
}

// FI_PEEK (optionally with FI_CLAIM or FI_DISCARD) looks for an unexpected message and
// completes at once: successfully with the message's length, tag, data and source, or
// with FI_ENOMSG. FI_CLAIM alone receives the message an earlier FI_PEEK|FI_CLAIM with
// the same context claimed; with FI_DISCARD it drops it. The context is the claim's key.
ssize_t post_probe(Endpoint& ep, const std::optional<Pieces>& given, fi_addr_t src, uint64_t tag,
                   uint64_t ignore, void* context, uint64_t flags) {
  if (!given) return -FI_EINVAL;
  const Pieces& buffer = *given;
  const bool peek = flags & FI_PEEK;
  const bool claim = flags & FI_CLAIM;
  const bool discard = flags & FI_DISCARD;
  if (flags & ~kRecvFlags & ~(FI_RECV | FI_TAGGED | FI_PEEK | FI_CLAIM | FI_DISCARD)) {
    return -FI_EBADFLAGS;
  }
  if ((claim && discard && peek) || (!peek && !claim) || (claim && !context)) {
    SPRAY_WARN(FI_LOG_EP_DATA,
               "invalid probe flags %#lx (FI_PEEK[|FI_CLAIM|FI_DISCARD], or FI_CLAIM[|FI_DISCARD] "
               "with the claim's context)\n",
               static_cast<unsigned long>(flags));
    return -FI_EINVAL;
  }
  std::lock_guard lock(ep.domain->mutex);
  if (!ep.enabled) return -FI_EOPBADSTATE;
  const bool receives = !peek && !discard;  // FI_CLAIM alone: the claimed message lands
  ses::RecvSpec spec;
  spec.length = receives ? buffer.bytes : 0;
  spec.tagged = true;
  spec.tag = tag;
  spec.ignore = ignore;
  spec.discard = discard && !peek;
  if ((ep.info->caps & FI_DIRECTED_RECV) && src != FI_ADDR_UNSPEC) {
    spec.source = ep.peer(src);
    if (spec.source == pds::kNoPeer) return -FI_EINVAL;
  }
  const uint32_t slot =
      ep.take_op(context, FI_RECV | FI_TAGGED, peek ? nullptr : buffer.only(), true);
  if (slot == Endpoint::kNone) {
    endpoint_progress(ep);
    return -FI_EAGAIN;
  }
  if (receives) {
    int error = FI_SUCCESS;
    spec.buffer = static_cast<uint8_t*>(ep.incoming(slot, buffer, error));
    if (error != FI_SUCCESS) {
      ep.release_op(slot);
      return error;
    }
  }
  spec.context = slot;
  const auto claim_key = reinterpret_cast<uintptr_t>(context);
  Status s;
  if (peek) {
    ep.engine->progress(dp::monotonic_now());  // see what has arrived by now
    const auto action = claim     ? ses::ProbeAction::kClaim
                        : discard ? ses::ProbeAction::kDiscard
                                  : ses::ProbeAction::kPeek;
    s = ep.engine->probe(spec, action, claim_key);
  } else {
    s = ep.engine->recv_claimed(spec, claim_key);
  }
  if (s != Status::kOk) {
    ep.release_op(slot);
    SPRAY_WARN(FI_LOG_EP_DATA, "probe refused: %s\n", std::string(to_string(s)).c_str());
    return -to_fi_errno(s);
  }
  endpoint_progress(ep);  // delivers the probe's completion
  return FI_SUCCESS;
}

fi_ops_msg msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = m_recv,
    .recvv = m_recvv,
    .recvmsg = m_recvmsg,
    .send = m_send,
    .sendv = m_sendv,
    .sendmsg = m_sendmsg,
    .inject = m_inject,
    .senddata = m_senddata,
    .injectdata = m_injectdata,
};

fi_ops_tagged tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = t_recv,
    .recvv = t_recvv,
    .recvmsg = t_recvmsg,
    .send = t_send,
    .sendv = t_sendv,
    .sendmsg = t_sendmsg,
    .inject = t_inject,
    .senddata = t_senddata,
    .injectdata = t_injectdata,
};

}  // namespace spray::fi
