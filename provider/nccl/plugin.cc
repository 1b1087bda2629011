// The NCCL net plugin `spray` (libnccl-net-spray.so, NCCL_NET_PLUGIN=spray): NCCL's
// ncclNet_v8 calls, each a short non-blocking step on the plugin's one libfabric
// endpoint (net_endpoint.h) and the comms and requests of comm.h.
//
// Host memory only (NCCL_PTR_HOST): without GPUDirect, NCCL stages GPU data through host
// buffers, which is what it does with its own socket transport too. Memory registration
// records the range (isend/irecv check their buffers lie in it); nothing is registered
// with the provider, since the protocol is messages only.
//
// Errors: NCCL's misuse (a wrong comm or request pointer, too many buffers, a negative
// size, a buffer outside its registration) is ncclInternalError; a corrupt handle is
// ncclInvalidArgument; a send larger than its receive is ncclInvalidUsage; a peer that
// is gone is ncclRemoteError. Each comes with a WARN line saying what happened.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "provider/nccl/comm.h"
#include "provider/nccl/log.h"
#include "provider/nccl/net_endpoint.h"

namespace spray::nccl {
namespace {

// The speed reported when the provider names none (Mbit/s): the 100 Gbit/s class of
// NIC an Ultra Ethernet host has; NCCL uses it only to weigh paths against each other.
constexpr int kDefaultSpeedMbps = 100000;
// How long closing a comm waits for the provider to hand back its operations. Sends to
// a dead peer fail within the provider's retry budget (FI_SPRAY_RETRIES x RTO, 8 s at
// the defaults); a comm still held after this is leaked, never freed under the provider.
constexpr auto kCloseTimeout = std::chrono::seconds(30);

// What regMr hands NCCL: the registered range, checked by isend and irecv.
struct Registration {
  static constexpr uint32_t kMagic = 0x53504d52;  // "SPMR"
  uint32_t magic = kMagic;
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

std::mutex open_mutex;
// The plugin's endpoint, opened by init() and kept for the life of the process (NCCL has
// no call that ends a plugin).
std::atomic<NetEndpoint*> the_endpoint{nullptr};
std::atomic<uint32_t> next_id{1};  // listen and send-comm ids, unique in the process

uint32_t new_id() {
  return next_id.fetch_add(1) & kMaxCommId;
}

void* to_nccl(Comm* c) {
  return static_cast<void*>(c);
}
template <class T>
T* as(void* p, Comm::Kind kind) {
  return static_cast<T*>(comm_of(p, kind));
}

Request* request_of(void* p) {
  auto* r = static_cast<Request*>(p);
  return r && r->magic == Request::kMagic && r->state == Request::State::active ? r : nullptr;
}

// What is wrong with a buffer of `size` bytes at `data` passed with registration
// `mhandle` (null: none, allowed since nothing is registered with the provider); "" if
// nothing is.
std::string buffer_problem(const void* data, int size, void* mhandle, size_t max_bytes) {
  if (size < 0) return fmt::format("a negative size ({})", size);
  const auto bytes = static_cast<size_t>(size);
  if (bytes > max_bytes) {
    return fmt::format("{} bytes, more than the provider's largest message ({})", bytes, max_bytes);
  }
  if (size > 0 && !data) return fmt::format("no buffer for {} bytes", bytes);
  if (!mhandle) return "";
  auto* reg = static_cast<Registration*>(mhandle);
  if (reg->magic != Registration::kMagic) return "a memory handle regMr did not return";
  const auto begin = reinterpret_cast<uintptr_t>(data);
  if (begin < reg->begin || begin > reg->end || bytes > reg->end - begin) {
    return fmt::format("{} bytes at {} outside their registration [{:#x}, {:#x})", bytes, data,
                       reg->begin, reg->end);
  }
  return "";
}

// The error of a comm an injected send failed on, said once more.
ncclResult_t failed_comm(const Comm& c, const char* call) {
  warn("NET/Spray: {}: an earlier send on this comm failed after it was reported done", call);
  return c.failed;
}

// Posts the hello receive of `l` if none is posted. ncclSuccess also when the provider
// asked to try later (accept() does).
ncclResult_t post_hello_receive(ListenComm& l) {
  if (l.hello_receive) return ncclSuccess;
  Request* r = l.take(1);
  if (!r) return ncclInternalError;  // never: its only request is free when none is posted
  const ssize_t rc = fi_trecv(l.endpoint.ep(), &l.hello, sizeof l.hello, nullptr, FI_ADDR_UNSPEC,
                              hello_tag(l.id), 0, &r->operations[0].context);
  if (rc != 0) {
    l.give_back(*r);
    if (rc == -FI_EAGAIN) return ncclSuccess;
    warn("NET/Spray: listen: fi_trecv for a hello failed: {}", fi_strerror(static_cast<int>(-rc)));
    return ncclSystemError;
  }
  r->posted = 1;
  l.hello_receive = r;
  return ncclSuccess;
}

// Hands the provider the buffers of `r` not yet posted, in order; stops at -FI_EAGAIN.
// On another error, the request ends at the buffers already posted, failed.
void post_receives(ReceiveComm& c, Request& r) {
  while (r.posted < r.count) {
    const PendingReceive& p = r.pending[r.posted];
    const ssize_t rc = fi_trecv(c.endpoint.ep(), p.data, p.capacity, nullptr, c.peer, p.tag, 0,
                                &r.operations[r.posted].context);
    if (rc == -FI_EAGAIN) break;
    if (rc != 0) {
      warn("NET/Spray: irecv: fi_trecv failed: {}", fi_strerror(static_cast<int>(-rc)));
      r.error = ncclSystemError;
      r.count = r.posted;
      break;
    }
    ++r.posted;
  }
  c.partly_posted = r.posted < r.count ? &r : nullptr;
}

// Closes NCCL's comm `p`, which must be of `kind`: waits (bounded) until the provider
// has handed back every operation of it, then frees it; leaks it with a warning if the
// provider still holds some at the deadline. `what` names the call in warnings.
ncclResult_t close_comm(void* p, Comm::Kind kind, const char* what) {
  Comm* c = comm_of(p, kind);
  if (!c) {
    warn("NET/Spray: {}: not a {} comm", what,
         kind == Comm::Kind::send      ? "send"
         : kind == Comm::Kind::receive ? "receive"
                                       : "listen");
    return ncclInternalError;
  }
  NetEndpoint& e = c->endpoint;
  const auto deadline = std::chrono::steady_clock::now() + kCloseTimeout;
  {
    std::lock_guard lock(e.mutex());
    if (c->kind != Comm::Kind::send) c->cancel_receives();
  }
  for (;;) {
    {
      std::lock_guard lock(e.mutex());
      e.progress();
      if (!c->provider_holds_operations()) break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      warn(
          "NET/Spray: {}: the provider still holds operations after {} s; the comm is left "
          "allocated",
          what, kCloseTimeout.count());
      return ncclRemoteError;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  switch (c->kind) {
    case Comm::Kind::listen:
      delete static_cast<ListenComm*>(c);
      break;
    case Comm::Kind::send:
      delete static_cast<SendComm*>(c);
      break;
    case Comm::Kind::receive:
      delete static_cast<ReceiveComm*>(c);
      break;
  }
  return ncclSuccess;
}

// ---- ncclNet_v8 ----

ncclResult_t init(ncclDebugLogger_t logger) {
  set_logger(logger);
  std::lock_guard lock(open_mutex);
  if (the_endpoint.load()) return ncclSuccess;
  const char* provider = std::getenv("SPRAY_NCCL_PROVIDER");
  if (!provider || !*provider) provider = "spray";
  std::string error;
  std::unique_ptr<NetEndpoint> e = NetEndpoint::open(provider, error);
  if (!e) {
    warn("NET/Spray: {}", error);
    return ncclSystemError;
  }
  info("NET/Spray: libfabric provider '{}', endpoint name of {} bytes", provider, e->name().size());
  the_endpoint.store(e.release());
  return ncclSuccess;
}

NetEndpoint* endpoint_for(int dev, const char* call) {
  NetEndpoint* e = the_endpoint.load();
  if (!e) {
    warn("NET/Spray: {} before a successful init", call);
  } else if (dev != 0) {
    warn("NET/Spray: {}: no device {} (there is one, 0)", call, dev);
    return nullptr;
  }
  return e;
}

ncclResult_t devices(int* ndev) {
  if (!ndev) return ncclInternalError;
  *ndev = the_endpoint.load() ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t get_properties(int dev, ncclNetProperties_v8_t* props) {
  NetEndpoint* e = endpoint_for(dev, "getProperties");
  if (!e || !props) return ncclInternalError;
  static char name[] = "spray0";
  *props = {};
  props->name = name;
  props->pciPath = nullptr;  // a libfabric endpoint, not one PCI function
  props->guid = 0;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;  // a registration is a range, good on any comm
  props->speed = e->link_speed_mbps() > 0 ? e->link_speed_mbps() : kDefaultSpeedMbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0;
  return ncclSuccess;
}

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  NetEndpoint* e = endpoint_for(dev, "listen");
  if (!e || !handle || !listen_comm) return ncclInternalError;
  std::lock_guard lock(e->mutex());
  auto l = std::make_unique<ListenComm>(*e, new_id());
  if (const ncclResult_t rc = post_hello_receive(*l); rc != ncclSuccess) return rc;
  ListenHandle h{};
  h.magic = ListenHandle::kMagic;
  h.listen_id = l->id;
  h.name_bytes = static_cast<uint32_t>(e->name().size());
  std::memcpy(h.name, e->name().data(), e->name().size());
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listen_comm = to_nccl(l.release());
  return ncclSuccess;
}

ncclResult_t connect(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
  NetEndpoint* e = endpoint_for(dev, "connect");
  if (!e || !handle || !send_comm) return ncclInternalError;
  *send_comm = nullptr;
  ListenHandle h;
  std::memcpy(&h, handle, sizeof h);
  if (h.magic != ListenHandle::kMagic || h.name_bytes == 0 || h.name_bytes > kMaxNameBytes ||
      h.listen_id > kMaxCommId) {
    warn("NET/Spray: connect: the handle is not one listen() of this plugin wrote");
    return ncclInvalidArgument;
  }
  std::lock_guard lock(e->mutex());
  fi_addr_t peer;
  std::string error;
  if (!e->address_of({h.name, h.name_bytes}, peer, error)) {
    warn("NET/Spray: connect: {}", error);
    return ncclSystemError;
  }
  auto s = std::make_unique<SendComm>(*e, new_id());
  s->peer = peer;
  s->hello.magic = Hello::kMagic;
  s->hello.send_comm_id = s->id;
  s->hello.name_bytes = static_cast<uint32_t>(e->name().size());
  std::memcpy(s->hello.name, e->name().data(), e->name().size());
  Request* r = s->take(1);
  const ssize_t rc = fi_tsend(e->ep(), &s->hello, sizeof s->hello, nullptr, peer,
                              hello_tag(h.listen_id), &r->operations[0].context);
  if (rc == -FI_EAGAIN) {  // the provider's queue is full: NCCL calls again
    e->progress();
    return ncclSuccess;
  }
  if (rc != 0) {
    warn("NET/Spray: connect: sending the hello failed: {}", fi_strerror(static_cast<int>(-rc)));
    return ncclSystemError;
  }
  // Nobody tests the hello: its request goes back to the pool when it completes (a
  // failure shows again on the comm's first send).
  r->posted = 1;
  r->sizes[0] = sizeof s->hello;
  r->state = Request::State::abandoned;
  *send_comm = to_nccl(s.release());
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
  auto* l = as<ListenComm>(listen_comm, Comm::Kind::listen);
  if (!l || !recv_comm) {
    warn("NET/Spray: accept: not a listen comm");
    return ncclInternalError;
  }
  *recv_comm = nullptr;
  NetEndpoint& e = l->endpoint;
  std::lock_guard lock(e.mutex());
  if (const ncclResult_t rc = post_hello_receive(*l); rc != ncclSuccess) return rc;
  e.progress();
  Request* r = l->hello_receive;
  if (!r || r->outstanding()) return ncclSuccess;  // no hello yet: NCCL calls again
  const Hello hello = l->hello;
  const bool whole = r->error == ncclSuccess && r->sizes[0] == sizeof hello &&
                     hello.magic == Hello::kMagic && hello.name_bytes > 0 &&
                     hello.name_bytes <= kMaxNameBytes && hello.send_comm_id <= kMaxCommId;
  l->give_back(*r);
  l->hello_receive = nullptr;
  if (const ncclResult_t rc = post_hello_receive(*l); rc != ncclSuccess) return rc;
  if (!whole) {
    warn("NET/Spray: accept: dropped a malformed hello");
    return ncclSuccess;
  }
  fi_addr_t sender;
  std::string error;
  if (!e.address_of({hello.name, hello.name_bytes}, sender, error)) {
    warn("NET/Spray: accept: dropped a hello: {}", error);
    return ncclSuccess;
  }
  *recv_comm = to_nccl(new ReceiveComm(e, sender, hello.send_comm_id));
  return ncclSuccess;
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!comm_of(comm, Comm::Kind::send) && !comm_of(comm, Comm::Kind::receive)) {
    warn("NET/Spray: regMr: not a send or receive comm");
    return ncclInternalError;
  }
  if (type != NCCL_PTR_HOST || !mhandle || (!data && size > 0)) {
    warn("NET/Spray: regMr: only host memory can be registered (type {})", type);
    return ncclInternalError;
  }
  auto* reg = new Registration;
  reg->begin = reinterpret_cast<uintptr_t>(data);
  reg->end = reg->begin + size;
  *mhandle = reg;
  return ncclSuccess;
}

ncclResult_t reg_mr_dma_buf(void*, void*, size_t, int, uint64_t, int, void**) {
  warn("NET/Spray: regMrDmaBuf: DMA-BUF is not supported (ptrSupport is host only)");
  return ncclInternalError;
}

ncclResult_t dereg_mr(void*, void* mhandle) {
  auto* reg = static_cast<Registration*>(mhandle);
  if (!reg || reg->magic != Registration::kMagic) {
    warn("NET/Spray: deregMr: not a registration of this plugin");
    return ncclInternalError;
  }
  reg->magic = 0;
  delete reg;
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, int size, int tag, void* mhandle, void** request) {
  auto* s = as<SendComm>(send_comm, Comm::Kind::send);
  if (!s || !request) {
    warn("NET/Spray: isend: not a send comm");
    return ncclInternalError;
  }
  *request = nullptr;
  if (std::string why = buffer_problem(data, size, mhandle, s->endpoint.max_message_bytes());
      !why.empty()) {
    warn("NET/Spray: isend: {}", why);
    return ncclInternalError;
  }
  const auto bytes = static_cast<size_t>(size);
  NetEndpoint& e = s->endpoint;
  std::lock_guard lock(e.mutex());
  if (s->failed != ncclSuccess) return failed_comm(*s, "isend");
  Request* r = s->take(1);
  if (!r) return ncclSuccess;  // every request in flight: NCCL calls again
  r->sizes[0] = size;
  r->injected = bytes <= e.inject_bytes();
  const iovec iov{data, bytes};
  fi_msg_tagged msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = s->peer;
  msg.tag = data_tag(s->id, tag);
  msg.context = &r->operations[0].context;
  const ssize_t rc = fi_tsendmsg(e.ep(), &msg, FI_COMPLETION | (r->injected ? FI_INJECT : 0));
  if (rc != 0) {
    s->give_back(*r);
    if (rc == -FI_EAGAIN) {
      e.progress();
      return ncclSuccess;
    }
    warn("NET/Spray: isend: fi_tsend failed: {}", fi_strerror(static_cast<int>(-rc)));
    return ncclSystemError;
  }
  r->posted = 1;
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                   void** request) {
  auto* c = as<ReceiveComm>(recv_comm, Comm::Kind::receive);
  if (!c || !request || !data || !sizes || !tags) {
    warn("NET/Spray: irecv: not a receive comm, or no buffers");
    return ncclInternalError;
  }
  *request = nullptr;
  if (n < 1 || n > kMaxRecvs) {
    warn("NET/Spray: irecv: {} buffers (maxRecvs is {})", n, kMaxRecvs);
    return ncclInternalError;
  }
  for (int i = 0; i < n; ++i) {
    if (std::string why = buffer_problem(data[i], sizes[i], mhandles ? mhandles[i] : nullptr,
                                         c->endpoint.max_message_bytes());
        !why.empty()) {
      warn("NET/Spray: irecv: buffer {}: {}", i, why);
      return ncclInternalError;
    }
  }
  NetEndpoint& e = c->endpoint;
  std::lock_guard lock(e.mutex());
  if (c->partly_posted) post_receives(*c, *c->partly_posted);
  if (c->partly_posted) return ncclSuccess;  // an earlier receive is still being posted
  Request* r = c->take(n);
  if (!r) return ncclSuccess;
  for (int i = 0; i < n; ++i) {
    r->pending[i] = {data[i], static_cast<size_t>(sizes[i]), data_tag(c->send_comm_id, tags[i])};
    r->sizes[i] = 0;
  }
  post_receives(*c, *r);
  if (r->posted == 0) {
    const ncclResult_t error = r->error;
    c->give_back(*r);
    c->partly_posted = nullptr;
    if (error == ncclSuccess) e.progress();  // -FI_EAGAIN: NCCL calls again
    return error;
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t iflush(void* recv_comm, int, void**, int*, void**, void** request) {
  if (!comm_of(recv_comm, Comm::Kind::receive) || !request) {
    warn("NET/Spray: iflush: not a receive comm");
    return ncclInternalError;
  }
  *request = nullptr;  // host memory: received data is visible once the receive completes
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  Request* r = request_of(request);
  if (!r || !done) {
    warn("NET/Spray: test: not a request in flight");
    return ncclInternalError;
  }
  *done = 0;
  NetEndpoint& e = r->comm->endpoint;
  std::lock_guard lock(e.mutex());
  ReceiveComm* partly_posted_on = nullptr;
  if (r->comm->kind == Comm::Kind::receive) {
    auto* c = static_cast<ReceiveComm*>(r->comm);
    if (c->partly_posted == r) post_receives(*c, *r);
    if (c->partly_posted == r) partly_posted_on = c;
  }
  e.progress();
  if (r->error != ncclSuccess) {
    const ncclResult_t error = r->error;
    if (partly_posted_on) {  // its remaining buffers are never posted
      partly_posted_on->partly_posted = nullptr;
      r->count = r->posted;
    }
    r->state = Request::State::abandoned;
    if (!r->outstanding()) r->comm->give_back(*r);
    return error;
  }
  if (r->comm->failed != ncclSuccess) return failed_comm(*r->comm, "test");
  if (r->returned < r->count && !r->injected) return ncclSuccess;
  if (sizes) std::memcpy(sizes, r->sizes, sizeof(int) * static_cast<size_t>(r->count));
  if (r->outstanding()) {
    r->state = Request::State::abandoned;  // an injected send the provider still holds
  } else {
    r->comm->give_back(*r);
  }
  *done = 1;
  return ncclSuccess;
}

ncclResult_t close_send(void* send_comm) {
  return close_comm(send_comm, Comm::Kind::send, "closeSend");
}

ncclResult_t close_recv(void* recv_comm) {
  return close_comm(recv_comm, Comm::Kind::receive, "closeRecv");
}

ncclResult_t close_listen(void* listen_comm) {
  return close_comm(listen_comm, Comm::Kind::listen, "closeListen");
}

}  // namespace
}  // namespace spray::nccl

extern "C" {
// The symbol NCCL looks up (dlsym "ncclNetPlugin_v8"; NCCL 2.20 and later try
// ncclNetPlugin_v9 first and fall back to it). No device offload, so getDeviceMr and
// irecvConsumed are null.
__attribute__((visibility("default"))) extern const ncclNet_v8_t ncclNetPlugin_v8;
const ncclNet_v8_t ncclNetPlugin_v8 = {
    "Spray",
    spray::nccl::init,
    spray::nccl::devices,
    spray::nccl::get_properties,
    spray::nccl::listen,
    spray::nccl::connect,
    spray::nccl::accept,
    spray::nccl::reg_mr,
    spray::nccl::reg_mr_dma_buf,
    spray::nccl::dereg_mr,
    spray::nccl::isend,
    spray::nccl::irecv,
    spray::nccl::iflush,
    spray::nccl::test,
    spray::nccl::close_send,
    spray::nccl::close_recv,
    spray::nccl::close_listen,
    nullptr,
    nullptr,
};
}
