// fid_mr: a registered memory region. Message operations need none (we never require
// FI_MR_LOCAL). Keys are domain-unique, chosen by us under FI_MR_PROV_KEY and by the
// application otherwise (a key already in use is refused with -FI_ENOKEY). Peers address
// a region by its virtual address under FI_MR_VIRT_ADDR, else by offset from its start
// (plus the registration's offset). A region with FI_REMOTE_READ/FI_REMOTE_WRITE is
// entered into the engine of every endpoint of the domain, or, under FI_MR_ENDPOINT,
// into the one endpoint it is bound to when it is enabled; every remote access is
// checked there against key, rights and bounds. A region may be bound to a counter
// (FI_REMOTE_WRITE) that FI_RMA_EVENT endpoints advance for each write or atomic that
// changes it.
#include <algorithm>

#include "provider/endpoint.h"

namespace spray::fi {
namespace {

uint32_t remote_rights(uint64_t access) {
  return ((access & FI_REMOTE_READ) ? ses::access::kRemoteRead : 0u) |
         ((access & FI_REMOTE_WRITE) ? ses::access::kRemoteWrite : 0u);
}

int mr_close(fid* f) {
  auto* mr = fid_to<MemoryRegion>(f);
  {
    std::lock_guard lock(mr->domain->mutex);
    for (Endpoint* ep : mr->registered_at) {
      if (ep->engine) (void)ep->engine->deregister_memory(mr->fid.key);
    }
    mr->domain->keys.erase(mr->fid.key);
    if (mr->remote_write_cntr) --mr->remote_write_cntr->regions;
    --mr->domain->refs;
  }
  delete mr;
  return FI_SUCCESS;
}

// A counter of the peers' writes and atomics that change the region (FI_REMOTE_WRITE,
// the one event fi_mr(3) defines for regions). Counted by FI_RMA_EVENT endpoints.
int bind_counter(MemoryRegion& mr, Counter& c, uint64_t flags) {
  if (flags != FI_REMOTE_WRITE) return -FI_EBADFLAGS;
  std::lock_guard lock(mr.domain->mutex);
  if (c.domain != mr.domain) return -FI_EINVAL;
  if (mr.remote_write_cntr && mr.remote_write_cntr != &c) {
    SPRAY_WARN(FI_LOG_MR, "memory key %lu is already bound to another counter\n",
               static_cast<unsigned long>(mr.fid.key));
    return -FI_EINVAL;
  }
  // Its descriptor is signalled by the endpoints bound to it; a region has none to offer.
  if (c.wait_fd) {
    SPRAY_WARN(FI_LOG_MR,
               "a FI_WAIT_FD counter cannot count a memory region's accesses "
               "(bind it to the endpoint with FI_REMOTE_WRITE instead)\n");
    return -FI_EOPNOTSUPP;
  }
  if (!mr.remote_write_cntr) ++c.regions;
  mr.remote_write_cntr = &c;
  return FI_SUCCESS;
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) {
  auto* mr = fid_to<MemoryRegion>(f);
  if (!bfid || (bfid->fclass != FI_CLASS_EP && bfid->fclass != FI_CLASS_CNTR)) return -FI_EINVAL;
  if (bfid->fclass == FI_CLASS_CNTR) return bind_counter(*mr, *fid_to<Counter>(bfid), flags);
  if (!mr->domain->mr_endpoint_mode()) return FI_SUCCESS;  // domain-wide already: harmless
  if (flags != 0) return -FI_EBADFLAGS;
  auto* ep = fid_to<Endpoint>(bfid);
  std::lock_guard lock(mr->domain->mutex);
  if (ep->domain != mr->domain || (mr->bound && mr->bound != ep)) return -FI_EINVAL;
  mr->bound = ep;
  return FI_SUCCESS;
}

int mr_control(fid* f, int command, void*) {
  auto* mr = fid_to<MemoryRegion>(f);
  if (command != FI_ENABLE) return -FI_ENOSYS;
  if (!mr->domain->mr_endpoint_mode()) return FI_SUCCESS;
  std::lock_guard lock(mr->domain->mutex);
  if (!mr->bound) {
    SPRAY_WARN(FI_LOG_MR, "fi_mr_enable under FI_MR_ENDPOINT before fi_mr_bind to an endpoint\n");
    return -FI_EINVAL;
  }
  return mr_register_at(*mr, *mr->bound);
}

fi_ops mr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = mr_close,
    .bind = mr_bind,
    .control = mr_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

}  // namespace

int mr_register_at(MemoryRegion& mr, Endpoint& ep) {
  const uint32_t rights = remote_rights(mr.access);
  if (!rights || !ep.engine) return FI_SUCCESS;  // local use only: nothing for peers to check
  if (std::find(mr.registered_at.begin(), mr.registered_at.end(), &ep) != mr.registered_at.end()) {
    return FI_SUCCESS;
  }
  ses::MemoryRegion r;
  r.addr = static_cast<uint8_t*>(const_cast<void*>(mr.base));
  r.length = mr.length;
  r.base_address = mr.remote_base;
  r.key = mr.fid.key;
  r.access = rights;
  const Status s = ep.engine->register_memory(r);
  if (s != Status::kOk) {
    SPRAY_WARN(FI_LOG_MR, "cannot enter memory key %lu into an endpoint: %s\n",
               static_cast<unsigned long>(mr.fid.key), std::string(to_string(s)).c_str());
    return s == Status::kAgain ? -FI_ENOSPC : -FI_EINVAL;
  }
  mr.registered_at.push_back(&ep);
  return FI_SUCCESS;
}

void mr_forget_endpoint(Domain& d, Endpoint& ep) {
  for (auto& [key, mr] : d.keys) {
    auto& at = mr->registered_at;
    // Its engine runs on a while as it closes (close_pdcs), and this region may be
    // closed meanwhile: peers' RMA to it is refused from now on.
    if (ep.engine && std::find(at.begin(), at.end(), &ep) != at.end()) {
      (void)ep.engine->deregister_memory(key);
    }
    at.erase(std::remove(at.begin(), at.end(), &ep), at.end());
    if (mr->bound == &ep) mr->bound = nullptr;
  }
}

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) {
  if (!f || f->fclass != FI_CLASS_DOMAIN || !out) return -FI_EINVAL;
  if (!buf && len > 0) return -FI_EINVAL;
  if (flags & ~uint64_t{FI_RMA_EVENT}) return -FI_EBADFLAGS;  // it needs no preparation here
  constexpr uint64_t kAccess =
      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if (access & ~kAccess) return -FI_EINVAL;
  auto* d = fid_to<Domain>(f);
  std::lock_guard lock(d->mutex);
  const auto mode = static_cast<uint64_t>(d->info->domain_attr->mr_mode);
  uint64_t key = requested_key;
  if (mode & FI_MR_PROV_KEY) {
    while (d->keys.count(d->next_key)) ++d->next_key;
    key = d->next_key++;
  } else if (d->keys.count(key)) {
    SPRAY_WARN(FI_LOG_MR, "memory key %lu already in use\n", static_cast<unsigned long>(key));
    return -FI_ENOKEY;
  }
  auto mr = std::make_unique<MemoryRegion>();
  mr->domain = d;
  mr->access = access;
  mr->base = buf;
  mr->length = len;
  mr->remote_base = (mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(buf) : offset;
  mr->fid.fid.fclass = FI_CLASS_MR;
  mr->fid.fid.context = context;
  mr->fid.fid.ops = &mr_fi_ops;
  mr->fid.mem_desc = mr.get();
  mr->fid.key = key;
  if (!d->mr_endpoint_mode()) {
    for (Endpoint* ep : d->endpoints) {
      if (const int rc = mr_register_at(*mr, *ep); rc != FI_SUCCESS) {
        for (Endpoint* done : mr->registered_at) (void)done->engine->deregister_memory(key);
        return rc;
      }
    }
  }
  d->keys[key] = mr.get();
  ++d->refs;
  *out = &mr.release()->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
