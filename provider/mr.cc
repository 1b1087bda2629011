// fid_mr: a registered memory region. Message operations need none (we never require
// FI_MR_LOCAL); keys are domain-unique, chosen by us under FI_MR_PROV_KEY and by the
// application otherwise (a key already in use is refused with -FI_ENOKEY).
#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

int mr_close(fid* f) {
  auto* mr = fid_to<MemoryRegion>(f);
  {
    std::lock_guard lock(mr->domain->mutex);
    mr->domain->keys.erase(mr->fid.key);
    --mr->domain->refs;
  }
  delete mr;
  return FI_SUCCESS;
}

int mr_bind(fid*, fid* bfid, uint64_t) {
  if (!bfid || (bfid->fclass != FI_CLASS_EP && bfid->fclass != FI_CLASS_CNTR)) return -FI_EINVAL;
  return FI_SUCCESS;  // FI_MR_ENDPOINT is not required; binding is accepted and harmless
}

int mr_control(fid*, int command, void*) {
  return command == FI_ENABLE ? FI_SUCCESS : -FI_ENOSYS;
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

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) {
  if (!f || f->fclass != FI_CLASS_DOMAIN || !out) return -FI_EINVAL;
  if (!buf && len > 0) return -FI_EINVAL;
  if (flags != 0) return -FI_EBADFLAGS;
  (void)offset;
  auto* d = fid_to<Domain>(f);
  std::lock_guard lock(d->mutex);
  const bool prov_key = (d->info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  uint64_t key = requested_key;
  if (prov_key) {
    while (d->keys.count(d->next_key)) ++d->next_key;
    key = d->next_key++;
  } else if (d->keys.count(key)) {
    SPRAY_WARN(FI_LOG_MR, "memory key %lu already in use\n", static_cast<unsigned long>(key));
    return -FI_ENOKEY;
  }
  auto* mr = new (std::nothrow) MemoryRegion;
  if (!mr) return -FI_ENOMEM;
  mr->domain = d;
  mr->access = access;
  mr->base = buf;
  mr->length = len;
  mr->fid.fid.fclass = FI_CLASS_MR;
  mr->fid.fid.context = context;
  mr->fid.fid.ops = &mr_fi_ops;
  mr->fid.mem_desc = mr;
  mr->fid.key = key;
  d->keys[key] = mr;
  ++d->refs;
  *out = &mr->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
