// fid_ep: opening, binding, enabling and closing an endpoint; its address (fi_getname);
// options; cancel; and progress, which turns engine completions into CQ entries.
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>

#include "provider/endpoint.h"
#include "provider/endpoint_name.h"
#include "provider/security.h"
#include "transport/datapath/clock.h"
#include "transport/tss/key_derivation.h"
#include "transport/wire/ses_header.h"

namespace spray::fi {
namespace {

// The target side of a write that carried immediate data: an entry on the receive CQ
// with no operation context (fi_cq(3), FI_REMOTE_CQ_DATA).
void complete_remote_write(Endpoint& ep, const ses::Completion& c) {
  if (!ep.rx_cq) return;
  CqEntry e;
  e.entry.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
  e.entry.len = c.length;
  e.entry.data = c.data;
  e.source = ep.source(c.peer);
  ep.rx_cq->entries.push_back(e);
}

// A peer's RMA or atomic on our memory, as FI_RMA_EVENT counts it (fi_endpoint(3),
// fi_mr(3)): reads, fetching and compare atomics on the endpoint's FI_REMOTE_READ
// counter; writes and plain atomics on its FI_REMOTE_WRITE counter; and every write
// or atomic that changed a region on the counter that region is bound to. A write with
// immediate data also gets its CQ entry. Only accesses that succeeded are reported.
void complete_remote_access(Endpoint& ep, const ses::Completion& c) {
  const bool reads = c.op == ses::OpKind::kRemoteRead || c.op == ses::OpKind::kRemoteFetchAtomic;
  if (Counter* cntr = reads ? ep.remote_read_cntr : ep.remote_write_cntr) ++cntr->value;
  const bool changed = c.op == ses::OpKind::kRemoteWrite || c.op == ses::OpKind::kRemoteAtomic ||
                       (c.op == ses::OpKind::kRemoteFetchAtomic && c.length > 0);
  if (changed) {
    const auto region = ep.domain->keys.find(c.memory_key);
    if (region != ep.domain->keys.end() && region->second->remote_write_cntr) {
      ++region->second->remote_write_cntr->value;
    }
  }
  if (c.op == ses::OpKind::kRemoteWrite && c.has_data) complete_remote_write(ep, c);
}

// The counter an operation of `flags` counts on, if one is bound.
Counter* counter_for(const Endpoint& ep, uint64_t flags) {
  if (flags & FI_RECV) return ep.recv_cntr;
  if (flags & FI_READ) return ep.read_cntr;
  if (flags & FI_WRITE) return ep.write_cntr;
  return ep.send_cntr;
}

// The CQ entry and counter update of operation `op` ending as `c` says.
void report(Endpoint& ep, const ses::Completion& c, const Endpoint::Op& op) {
  const bool receive = (op.flags & FI_RECV) != 0;
  CompletionQueue* cq = receive ? ep.rx_cq : ep.tx_cq;
  Counter* cntr = counter_for(ep, op.flags);
  if (c.status == Status::kOk) {
    if (cntr) ++cntr->value;
    if (!op.report || !cq) return;
    CqEntry e;
    e.entry.op_context = op.context;
    e.entry.flags = op.flags | (c.has_data ? FI_REMOTE_CQ_DATA : 0);
    if (receive) {
      e.entry.len = c.length;
      e.entry.buf = op.buf;
      e.entry.tag = c.tag;
      e.entry.data = c.has_data ? c.data : 0;
      e.source = ep.source(c.peer);
    }
    cq->entries.push_back(e);
    return;
  }
  if (c.status == Status::kPeerUnreachable || c.status == Status::kNoPdcAvailable) {
    warn_of_failed_pdcs(ep);
  }
  // Errors are always reported (selective completion suppresses successes only).
  if (cntr) ++cntr->errors;
  if (!cq) return;
  fi_cq_err_entry err{};
  err.op_context = op.context;
  // A truncated receive still reports what it placed, its overflow, tag and data.
  err.flags = op.flags | (c.has_data ? FI_REMOTE_CQ_DATA : 0);
  err.buf = receive ? op.buf : nullptr;
  err.len = receive ? c.length : 0;
  err.olen = receive ? c.overflow : 0;
  err.tag = c.tag;
  err.data = c.has_data ? c.data : 0;
  err.err = to_fi_errno(c.status);
  err.prov_errno = static_cast<int>(c.status);
  cq->push_error(err);
}

void complete(Endpoint& ep, const ses::Completion& c) {
  if (ses::is_remote_access(c.op)) return complete_remote_access(ep, c);
  const uint32_t index = static_cast<uint32_t>(c.context);
  if (index >= ep.ops.size() || !ep.ops[index].in_use) return;
  Endpoint::Op op = ep.ops[index];
  // A multi-receive buffer's messages each report their part of it; the completion that
  // releases the buffer (its last message's, or a cancel's) carries FI_MULTI_RECV.
  if (op.multi) {
    if (c.buffer) op.buf = c.buffer;
    if (c.released) op.flags |= FI_MULTI_RECV;
  }
  // Several pieces: what landed in the staging buffer goes to them (staging.h). A
  // receive placed c.length bytes (a truncated one its prefix); a read or fetching atomic
  // placed all of them if it succeeded.
  if (op.staged != Endpoint::kNone) {
    const bool receive = (op.flags & FI_RECV) != 0;
    const size_t placed = receive                   ? c.length
                          : c.status == Status::kOk ? std::numeric_limits<size_t>::max()
                                                    : 0;
    ep.staging.complete(op.staged, placed);
  }
  if (!op.multi || c.released) ep.release_op(index);
  report(ep, c, op);
}

int ep_close(fid* f) {
  auto* ep = fid_to<Endpoint>(f);
  Domain* d = ep->domain;
  {
    std::lock_guard lock(d->mutex);
    for (CompletionQueue* cq : {ep->tx_cq, ep->rx_cq}) {
      if (!cq) continue;
      if (cq->wait_fd && ep->engine->wait_fd() >= 0) cq->wait_fd->remove(ep->engine->wait_fd());
      auto& v = cq->endpoints;
      v.erase(std::remove(v.begin(), v.end(), ep), v.end());
    }
    for (Counter* c : ep->counters()) {
      if (!c) continue;
      if (c->wait_fd && ep->engine->wait_fd() >= 0) c->wait_fd->remove(ep->engine->wait_fd());
      auto& v = c->endpoints;
      v.erase(std::remove(v.begin(), v.end(), ep), v.end());
    }
    if (ep->av) --ep->av->refs;
    mr_forget_endpoint(*d, *ep);
    d->endpoints.erase(std::remove(d->endpoints.begin(), d->endpoints.end(), ep),
                       d->endpoints.end());
    --d->refs;
  }
  // The progress thread may be asleep in poll() on this endpoint's sockets, which keeps
  // them (and their ports) open; it gathers no descriptor of ours from here on.
  if (d->progress_thread && !d->progress_thread->finish_poll()) {
    FI_WARN(&provider, FI_LOG_EP_CTRL,
            "endpoint close: the progress thread started no pass within %lld ms; the "
            "endpoint's port stays bound until the thread's poll ends\n",
            static_cast<long long>(ProgressThread::kFinishPollBound.count()));
  }
  if (ep->engine) {
    // Out of the domain's lists, so no other thread reaches the engine: it runs here
    // without the mutex, and the domain's other endpoints progress meanwhile.
    ep->engine->close_pdcs(Duration::milliseconds(params().close_wait_ms));
    FI_INFO(&provider, FI_LOG_EP_CTRL, "endpoint %s closed: %s\n",
            ep->engine->local_address().to_string().c_str(), ep->engine->stats().c_str());
  }
  ep->engine.reset();
  fi_freeinfo(ep->info);
  delete ep;
  return FI_SUCCESS;
}

void attach(std::vector<Endpoint*>& v, Endpoint* ep) {
  if (std::find(v.begin(), v.end(), ep) == v.end()) v.push_back(ep);
}

int ep_bind(fid* f, fid* bfid, uint64_t flags) {
  auto* ep = fid_to<Endpoint>(f);
  if (!bfid) return -FI_EINVAL;
  std::lock_guard lock(ep->domain->mutex);
  if (ep->enabled) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "fi_ep_bind after fi_enable\n");
    return -FI_EINVAL;
  }
  switch (bfid->fclass) {
    case FI_CLASS_AV: {
      auto* av = fid_to<AddressVector>(bfid);
      if (ep->av) return -FI_EINVAL;  // one AV per endpoint
      if (av->domain != ep->domain) return -FI_EINVAL;
      ep->av = av;
      ++av->refs;
      return FI_SUCCESS;
    }
    case FI_CLASS_CQ: {
      auto* cq = fid_to<CompletionQueue>(bfid);
      if (cq->domain != ep->domain) return -FI_EINVAL;
      if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) return -FI_EBADFLAGS;
      if (!(flags & (FI_TRANSMIT | FI_RECV))) return -FI_EBADFLAGS;
      if (cq->wait_fd) {
        if (const int rc = watch_endpoint(*cq->wait_fd, *ep); rc != FI_SUCCESS) return rc;
      }
      if (flags & FI_TRANSMIT) {
        ep->tx_cq = cq;
        ep->tx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
      }
      if (flags & FI_RECV) {
        ep->rx_cq = cq;
        ep->rx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
      }
      attach(cq->endpoints, ep);
      return FI_SUCCESS;
    }
    case FI_CLASS_CNTR: {
      auto* c = fid_to<Counter>(bfid);
      if (c->domain != ep->domain) return -FI_EINVAL;
      constexpr uint64_t kRemote = FI_REMOTE_READ | FI_REMOTE_WRITE;
      if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | kRemote)) {
        SPRAY_WARN(FI_LOG_EP_CTRL,
                   "counter events %#lx not supported (FI_SEND, FI_RECV, FI_READ, FI_WRITE, "
                   "FI_REMOTE_READ, FI_REMOTE_WRITE)\n",
                   static_cast<unsigned long>(flags));
        return -FI_ENOSYS;
      }
      if ((flags & kRemote) && !(ep->info->caps & FI_RMA_EVENT)) {
        SPRAY_WARN(FI_LOG_EP_CTRL,
                   "FI_REMOTE_READ/FI_REMOTE_WRITE counters need an endpoint opened with "
                   "FI_RMA_EVENT\n");
        return -FI_EINVAL;
      }
      if (c->wait_fd) {
        if (const int rc = watch_endpoint(*c->wait_fd, *ep); rc != FI_SUCCESS) return rc;
      }
      if (flags & FI_SEND) ep->send_cntr = c;
      if (flags & FI_RECV) ep->recv_cntr = c;
      if (flags & FI_READ) ep->read_cntr = c;
      if (flags & FI_WRITE) ep->write_cntr = c;
      if (flags & FI_REMOTE_READ) ep->remote_read_cntr = c;
      if (flags & FI_REMOTE_WRITE) ep->remote_write_cntr = c;
      attach(c->endpoints, ep);
      return FI_SUCCESS;
    }
    case FI_CLASS_EQ:
      return FI_SUCCESS;  // connectionless: no connection events to deliver
    default:
      return -FI_EINVAL;
  }
}

int ep_control(fid* f, int command, void* arg) {
  auto* ep = fid_to<Endpoint>(f);
  std::lock_guard lock(ep->domain->mutex);
  switch (command) {
    case FI_ENABLE:
      if (!ep->av) {
        SPRAY_WARN(FI_LOG_EP_CTRL, "fi_enable: no address vector bound\n");
        return -FI_ENOAV;
      }
      if (!ep->tx_cq && !ep->send_cntr && !ep->read_cntr && !ep->write_cntr) return -FI_ENOCQ;
      if (!ep->rx_cq && !ep->recv_cntr) return -FI_ENOCQ;
      ep->enabled = true;
      return FI_SUCCESS;
    case FI_GETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT) {
        *flags = ep->tx_op_flags;
      } else if (*flags & FI_RECV) {
        *flags = ep->rx_op_flags;
      } else {
        return -FI_EINVAL;
      }
      return FI_SUCCESS;
    }
    case FI_SETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      if (!flags) return -FI_EINVAL;
      if (*flags & FI_TRANSMIT) {
        ep->tx_op_flags = *flags & ~FI_TRANSMIT;
      } else if (*flags & FI_RECV) {
        ep->rx_op_flags = *flags & ~FI_RECV;
      } else {
        return -FI_EINVAL;
      }
      return FI_SUCCESS;
    }
    default:
      return -FI_ENOSYS;
  }
}

ssize_t ep_cancel(fid* f, void* context) {
  auto* ep = fid_to<Endpoint>(f);
  std::lock_guard lock(ep->domain->mutex);
  for (uint32_t i = 0; i < ep->ops.size(); ++i) {
    const Endpoint::Op& op = ep->ops[i];
    if (op.in_use && op.context == context && (op.flags & FI_RECV)) {
      // A multi-receive buffer with messages still landing in it is released (with
      // FI_ECANCELED) after they have.
      if (ep->engine->cancel_recv(i) == Status::kOk) {
        endpoint_progress(*ep);  // delivers the FI_ECANCELED entry
        return FI_SUCCESS;
      }
    }
  }
  return -FI_ENOENT;
}

int ep_getopt(fid* f, int level, int name, void* val, size_t* len) {
  auto* ep = fid_to<Endpoint>(f);
  if (level != FI_OPT_ENDPOINT || !val || !len) return -FI_ENOPROTOOPT;
  switch (name) {
    case FI_OPT_MIN_MULTI_RECV: {
      if (*len < sizeof(size_t)) return -FI_ETOOSMALL;
      std::lock_guard lock(ep->domain->mutex);
      *static_cast<size_t*>(val) = ep->min_multi_recv;
      *len = sizeof(size_t);
      return FI_SUCCESS;
    }
    case FI_OPT_CM_DATA_SIZE:
      if (*len < sizeof(size_t)) return -FI_ETOOSMALL;
      *static_cast<size_t*>(val) = 0;
      *len = sizeof(size_t);
      return FI_SUCCESS;
    default:
      return -FI_ENOPROTOOPT;
  }
}

int ep_setopt(fid* f, int level, int name, const void* val, size_t len) {
  auto* ep = fid_to<Endpoint>(f);
  if (level != FI_OPT_ENDPOINT || !val) return -FI_ENOPROTOOPT;
  if (name == FI_OPT_MIN_MULTI_RECV) {
    if (len != sizeof(size_t)) return -FI_EINVAL;
    // Under the domain's mutex: a progress thread (FI_PROGRESS_AUTO) reads it.
    std::lock_guard lock(ep->domain->mutex);
    ep->min_multi_recv = *static_cast<const size_t*>(val);
    return FI_SUCCESS;
  }
  return -FI_ENOPROTOOPT;
}

int no_tx_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_rx_ctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
ssize_t tx_size_left(fid_ep* f) {
  auto* ep = fid_to<Endpoint>(f);
  std::lock_guard lock(ep->domain->mutex);
  return static_cast<ssize_t>(ep->tx_ops_limit - ep->tx_ops_in_use);
}
ssize_t rx_size_left(fid_ep* f) {
  auto* ep = fid_to<Endpoint>(f);
  std::lock_guard lock(ep->domain->mutex);
  return static_cast<ssize_t>(ep->rx_ops_limit - ep->rx_ops_in_use);
}

int ep_getname(fid_t f, void* addr, size_t* addrlen) {
  auto* ep = fid_to<Endpoint>(f);
  if (!addrlen) return -FI_EINVAL;
  const size_t room = addr ? *addrlen : 0;
  sockaddr_storage name{};  // room for every format's name
  const size_t need = encode_name(ep->engine->local_address(), &name, sizeof(name));
  if (addr) std::memcpy(addr, &name, std::min(room, need));
  *addrlen = need;
  return room < need ? -FI_ETOOSMALL : FI_SUCCESS;
}
int no_setname(fid_t, void*, size_t) {
  return -FI_ENOSYS;
}
int no_getpeer(fid_ep*, void*, size_t*) {
  return -FI_ENOSYS;
}
int no_connect(fid_ep*, const void*, const void*, size_t) {
  return -FI_EOPNOTSUPP;
}
int no_listen(fid_pep*) {
  return -FI_EOPNOTSUPP;
}
int no_accept(fid_ep*, const void*, size_t) {
  return -FI_EOPNOTSUPP;
}
int no_reject(fid_pep*, fid_t, const void*, size_t) {
  return -FI_EOPNOTSUPP;
}
int no_shutdown(fid_ep*, uint64_t) {
  return -FI_EOPNOTSUPP;
}
int no_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) {
  return -FI_EOPNOTSUPP;
}

fi_ops ep_fi_ops = {
    .size = sizeof(fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_ep ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = no_tx_ctx,
    .rx_ctx = no_rx_ctx,
    .rx_size_left = rx_size_left,
    .tx_size_left = tx_size_left,
};

fi_ops_cm cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = no_setname,
    .getname = ep_getname,
    .getpeer = no_getpeer,
    .connect = no_connect,
    .listen = no_listen,
    .accept = no_accept,
    .reject = no_reject,
    .shutdown = no_shutdown,
    .join = no_join,
};

// The UET JobID of an endpoint opened with `info` in `d`: the authorization key of its own
// attributes, else its domain's, else FI_SPRAY_JOB_ID. nullopt, with the reason in
// `error`, for a key or a value that names no JobID.
std::optional<uint32_t> endpoint_job_id(const fi_info* info, const Domain& d, std::string& error) {
  const fi_ep_attr* e = info->ep_attr;
  const fi_domain_attr* dom = d.info ? d.info->domain_attr : nullptr;
  const auto from_key = [&error](const uint8_t* key, size_t size, const char* whose) {
    std::string why;
    const std::optional<uint32_t> job = job_id_of_auth_key(key, size, why);
    if (!job) error = std::string("the ") + whose + "'s auth_key names no JobID: " + why;
    return job;
  };
  if (e->auth_key != nullptr || e->auth_key_size != 0) {
    return from_key(e->auth_key, e->auth_key_size, "endpoint");
  }
  if (dom && (dom->auth_key != nullptr || dom->auth_key_size != 0)) {
    return from_key(dom->auth_key, dom->auth_key_size, "domain");
  }
  const int job = params().job_id;
  if (job < 0 || static_cast<uint32_t>(job) > wire::kMaxJobId) {
    error = "FI_SPRAY_JOB_ID=" + std::to_string(job) + " is not a UET JobID (0 to " +
            std::to_string(wire::kMaxJobId) + ")";
    return std::nullopt;
  }
  return static_cast<uint32_t>(job);
}

}  // namespace

pds::PeerIndex Endpoint::peer(fi_addr_t addr) {
  if (!av || addr >= av->addrs.size() || !av->valid[addr]) return pds::kNoPeer;
  if (addr >= peer_of.size()) peer_of.resize(addr + 1, pds::kNoPeer);
  if (peer_of[addr] == pds::kNoPeer) {
    const pds::PeerIndex p = engine->add_peer(av->addrs[addr]);
    if (p == pds::kNoPeer) return p;
    peer_of[addr] = p;
    if (p >= fi_addr_of.size()) fi_addr_of.resize(p + 1, FI_ADDR_NOTAVAIL);
    fi_addr_of[p] = addr;
  }
  return peer_of[addr];
}

fi_addr_t Endpoint::source(pds::PeerIndex p) {
  if (p == pds::kNoPeer) return FI_ADDR_NOTAVAIL;
  if (p < fi_addr_of.size() && fi_addr_of[p] != FI_ADDR_NOTAVAIL) return fi_addr_of[p];
  if (!av) return FI_ADDR_NOTAVAIL;
  const fi_addr_t a = av->find(engine->peer_address(p));
  if (a != FI_ADDR_NOTAVAIL) {  // learned: the sender is in our AV after all
    if (p >= fi_addr_of.size()) fi_addr_of.resize(p + 1, FI_ADDR_NOTAVAIL);
    fi_addr_of[p] = a;
  }
  return a;
}

// A secured endpoint takes up the key file again when it changed (security.h); a file
// that does not parse is ignored with a warning, and the endpoint keeps its keys.
void take_up_key_file(Endpoint& ep, Time now) {
  if (!ep.key_watch->changed(now)) return;
  DomainKeys keys;
  std::string error;
  if (!read_domain_keys(ep.key_watch->path(), keys, error)) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "%s; the endpoint keeps the keys it has\n", error.c_str());
    return;
  }
  ep.engine->update_tss_keys(keys);
  FI_INFO(&provider, FI_LOG_EP_CTRL, "endpoint %s: TSS keys of associations%s%s, sealing with %d\n",
          ep.engine->local_address().to_string().c_str(), keys.by_association[0] ? " 0" : "",
          keys.by_association[1] ? " 1" : "", keys.sealing ? 1 : 0);
}

ProgressDone endpoint_progress(Endpoint& ep) {
  ProgressDone done;
  if (!ep.engine) return done;
  const Time now = dp::monotonic_now();
  if (ep.key_watch && ep.key_watch->due(now)) take_up_key_file(ep, now);
  done.packets = ep.engine->progress(now);
  ses::Completion c;
  for (; ep.engine->poll_completion(c); ++done.completions) complete(ep, c);
  return done;
}

namespace {

// How long the other endpoints of a domain may go without progress while the application
// posts on one of them: a quarter of the shortest retransmission timeout, so a neighbour
// answers before its peer's first resend. Endpoints of one domain may be each other's
// peers (tests, a process with several rails), and one that is not progressed
// acknowledges nothing: two endpoints posting fetch-atomics to a third, 100 us apart,
// never reading the CQ, had their PDCs failed by the suite's patience (~17 ms) when
// nothing else drove the target (FI_SPRAY_STANDBY_PROGRESS_MS=0). With the standby
// thread it depends on that thread getting a CPU and the domain mutex in time, which a
// loaded CI host may not give (the likely cause of tss.Atomic.contention__every_fetch_
// and_add_counts_once failing once on 2026-11-28, 36 of 400 applied).
Duration others_wait_at_most() {
  return Duration::microseconds(std::max(params().rto_min_us / 4, 1));
}

void count_application_pass(Domain& d, Time now) {
  // One writer (the mutex is held): a plain increment, no locked instruction.
  d.application_passes.store(d.application_passes.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
  if (d.endpoints.size() > 1) d.all_progressed_at = now;
}

}  // namespace

void endpoint_transmit(Endpoint& ep) {
  if (!ep.engine) return;
  Domain& d = *ep.domain;
  if (d.endpoints.size() > 1) {
    const Time now = dp::monotonic_now();
    if (now - d.all_progressed_at >= others_wait_at_most()) {
      // The others first: what this post sends reaches a neighbour at the next call, as
      // it would reach a peer in another process.
      count_application_pass(d, now);
      for (Endpoint* other : d.endpoints) {
        if (other != &ep) endpoint_progress(*other);
      }
      endpoint_progress(ep);
      return;
    }
  }
  if (ep.engine->receive_poll_is_a_system_call()) {
    (void)ep.engine->transmit(dp::monotonic_now());
  } else {
    endpoint_progress(ep);  // the receive poll is cheap, and takes what arrived meanwhile
  }
}

bool domain_progress(Domain& d) {
  count_application_pass(d, d.endpoints.size() > 1 ? dp::monotonic_now() : Time{});
  bool busy = false;
  for (Endpoint* ep : d.endpoints) {
    const ProgressDone done = endpoint_progress(*ep);
    busy = busy || done.packets > 0 || done.completions > 0;
  }
  return busy;
}

bool wait_for_progress_thread(Domain& d, int timeout_ms) {
  if (!d.progress_thread || !d.progress_thread->always()) return false;
  std::unique_lock lock(d.mutex);
  d.completions_delivered.wait_for(lock, std::chrono::milliseconds(timeout_ms));
  return true;
}

void arm_for_timers(WaitFd& wait, const std::vector<Endpoint*>& endpoints) {
  const bool in_flight = std::any_of(endpoints.begin(), endpoints.end(), [](Endpoint* ep) {
    return ep->engine && ep->engine->tx_in_use() > 0;
  });
  wait.arm(in_flight ? Duration::microseconds(params().rto_min_us) : Duration{});
}

bool ready_to_block(const std::vector<Endpoint*>& endpoints) {
  return std::all_of(endpoints.begin(), endpoints.end(),
                     [](Endpoint* ep) { return !ep->engine || ep->engine->prepare_wait(); });
}

bool ready_to_sleep(const std::vector<Endpoint*>& endpoints, bool on_descriptors) {
  if (on_descriptors) return ready_to_block(endpoints);
  for (Endpoint* ep : endpoints) {
    if (ep->engine) ep->engine->send_held_acks();
  }
  return true;
}

int watch_endpoint(WaitFd& wait, Endpoint& ep) {
  const int fd = ep.engine->wait_fd();
  if (fd < 0) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "the %s datapath has no descriptor for a FI_WAIT_FD object\n",
               params().datapath.c_str());
    return -FI_EOPNOTSUPP;
  }
  return wait.add(fd) ? FI_SUCCESS : -FI_EIO;
}

void endpoint_wait(Endpoint& ep, int timeout_ms) {
  if (ep.engine) ep.engine->wait(Duration::milliseconds(timeout_ms));
}

int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** out, void* context) {
  if (!info || !info->ep_attr) return -FI_EINVAL;
  const fi_ep_type type = info->ep_attr->type;
  if (type != FI_EP_RDM && type != FI_EP_DGRAM) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "endpoint type %d not supported (RDM, DGRAM)\n", type);
    return -FI_ENOSYS;
  }
  auto* d = fid_to<Domain>(domain);
  auto ep = std::make_unique<Endpoint>();
  ep->domain = d;
  ep->info = fi_dupinfo(info);
  ep->type = type;
  ep->ordered = type == FI_EP_RDM && info->tx_attr && (info->tx_attr->msg_order & kRdmMsgOrder);
  if (info->tx_attr) ep->tx_op_flags = info->tx_attr->op_flags;
  if (info->rx_attr) ep->rx_op_flags = info->rx_attr->op_flags;

  std::string error;
  const std::optional<uint32_t> job_id = endpoint_job_id(info, *d, error);
  if (!job_id) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "%s\n", error.c_str());
    fi_freeinfo(ep->info);
    return -FI_EINVAL;
  }
  // The key file is watched from before it is read, so that no change slips between.
  std::optional<KeyFileWatch> key_watch;
  if (!params().tss_key_file.empty()) {
    key_watch.emplace(params().tss_key_file);
    key_watch->changed(dp::monotonic_now());
  }
  std::optional<tss::TssConfig> security;
  DomainKeys keys;
  if (!endpoint_security(security, keys, error)) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "%s\n", error.c_str());
    fi_freeinfo(ep->info);
    return -FI_EINVAL;
  }
  bool out_of_memory = false;
  try {  // the engine's tables and the datapath's buffers are its large allocations
    ep->engine = open_endpoint_engine(info, *job_id, security, error);
    if (security) tss::wipe(security->domain_key);  // the engine holds its own copy
  } catch (const std::bad_alloc&) {
    out_of_memory = true;
    error = "out of memory for the transport's tables and buffers";
  }
  if (!ep->engine) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "cannot open the %s datapath: %s\n", params().datapath.c_str(),
               error.c_str());
    fi_freeinfo(ep->info);
    return out_of_memory ? -FI_ENOMEM : -FI_EADDRNOTAVAIL;
  }
  if (security) {
    ep->engine->update_tss_keys(keys);  // the file's other key, if it holds two
    ep->key_watch = std::move(key_watch);
  }

  ep->tx_ops_limit = std::max<size_t>(info->tx_attr ? info->tx_attr->size : 0, 1024);
  ep->rx_ops_limit = std::max<size_t>(info->rx_attr ? info->rx_attr->size : 0, 1024);
  const size_t slots = ep->tx_ops_limit + ep->rx_ops_limit;
  ep->ops.resize(slots);
  ep->free_ops.reserve(slots);
  for (size_t i = slots; i-- > 0;) ep->free_ops.push_back(static_cast<uint32_t>(i));
  ep->inject_size = static_cast<size_t>(params().inject_size);
  const size_t injects = 256;
  ep->inject_storage.resize(injects * ep->inject_size);
  for (size_t i = injects; i-- > 0;) ep->free_injects.push_back(static_cast<uint32_t>(i));

  ep->fid.fid.fclass = FI_CLASS_EP;
  ep->fid.fid.context = context;
  ep->fid.fid.ops = &ep_fi_ops;
  ep->fid.ops = &ep_ops;
  ep->fid.cm = &cm_ops;
  ep->fid.msg = &msg_ops;
  ep->fid.tagged = &tagged_ops;  // on DGRAM every tagged call fails with -FI_ENOSYS
  ep->fid.rma = &rma_ops;        // and every RMA call
  ep->fid.atomic = &atomic_ops;  // and every atomic
  {
    std::lock_guard lock(d->mutex);
    if (!d->mr_endpoint_mode()) {  // domain-wide regions registered before us
      for (auto& [key, mr] : d->keys) {
        if (const int rc = mr_register_at(*mr, *ep); rc != FI_SUCCESS) {
          mr_forget_endpoint(*d, *ep);
          fi_freeinfo(ep->info);
          return rc;
        }
      }
    }
    d->endpoints.push_back(ep.get());
    ++d->refs;
  }
  *out = &ep.release()->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
