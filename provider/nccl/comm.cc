#include "provider/nccl/comm.h"

#include <rdma/fi_endpoint.h>

#include "provider/nccl/net_endpoint.h"

namespace spray::nccl {

void Request::complete(int index, size_t bytes, ncclResult_t failure) {
  ++returned;
  // A send's size is the one posted: libfabric defines `len` for receives only.
  if (comm->kind != Comm::Kind::send) sizes[index] = static_cast<int>(bytes);
  if (failure != ncclSuccess && error == ncclSuccess) error = failure;
  if (state == State::abandoned) {
    if (failure != ncclSuccess && injected && comm->failed == ncclSuccess) comm->failed = failure;
    if (!outstanding()) comm->give_back(*this);
  }
}

Comm::Comm(Kind k, NetEndpoint& e, int request_count, int width)
    : kind(k),
      endpoint(e),
      requests(static_cast<size_t>(request_count)),
      operations_(requests.size() * static_cast<size_t>(width)),
      sizes_(operations_.size()),
      pending_(kind == Kind::receive ? operations_.size() : 0) {
  free_.reserve(requests.size());
  for (size_t i = requests.size(); i-- > 0;) {
    Request& r = requests[i];
    const size_t first = i * static_cast<size_t>(width);
    r.comm = this;
    r.operations = &operations_[first];
    r.sizes = &sizes_[first];
    r.pending = pending_.empty() ? nullptr : &pending_[first];
    for (int b = 0; b < width; ++b) {
      r.operations[b].request = &r;
      r.operations[b].index = b;
    }
    free_.push_back(&r);
  }
}

Request* Comm::take(int count) {
  if (free_.empty()) return nullptr;
  Request* r = free_.back();
  free_.pop_back();
  r->state = Request::State::active;
  r->count = count;
  r->posted = 0;
  r->returned = 0;
  r->error = ncclSuccess;
  r->injected = false;
  return r;
}

void Comm::give_back(Request& r) {
  r.state = Request::State::free;
  free_.push_back(&r);
}

bool Comm::provider_holds_operations() const {
  for (const Request& r : requests) {
    if (r.outstanding()) return true;
  }
  return false;
}

void Comm::cancel_receives() {
  for (Request& r : requests) {
    // Buffers from `returned` on may still be posted (completions come in any order, so
    // cancel all posted ones; cancelling one already complete is a no-op).
    for (int b = 0; r.outstanding() && b < r.posted; ++b) {
      fi_cancel(&endpoint.ep()->fid, &r.operations[b].context);
    }
  }
}

Comm* comm_of(void* p, Comm::Kind kind) {
  auto* c = static_cast<Comm*>(p);
  return c && c->kind == kind ? c : nullptr;
}

}  // namespace spray::nccl
