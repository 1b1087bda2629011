// fid_fabric: the root object. Opens domains and event queues; nothing else lives here.
#include <cstring>

#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

int fabric_close(fid* f) {
  delete fid_to<Fabric>(f);
  return FI_SUCCESS;
}

int no_wait_open(fid_fabric*, fi_wait_attr*, fid_wait**) {
  return -FI_ENOSYS;  // wait sets: CQs and counters carry their own wait objects
}
int no_passive_ep(fid_fabric*, fi_info*, fid_pep**, void*) {
  return -FI_EOPNOTSUPP;  // connectionless endpoints only (RDM, DGRAM)
}
// Safe to block on the wait objects of `fids` only if none has anything to report.
int trywait(fid_fabric*, fid** fids, int count) {
  if (count < 0 || (count > 0 && !fids)) return -FI_EINVAL;
  for (int i = 0; i < count; ++i) {
    if (!fids[i]) return -FI_EINVAL;
    switch (fids[i]->fclass) {
      case FI_CLASS_CQ:
        if (const int rc = fid_to<CompletionQueue>(fids[i])->trywait(); rc != FI_SUCCESS) {
          return rc;
        }
        break;
      case FI_CLASS_CNTR:
        if (const int rc = fid_to<Counter>(fids[i])->trywait(); rc != FI_SUCCESS) return rc;
        break;
      default:
        return -FI_EINVAL;
    }
  }
  return FI_SUCCESS;
}
int domain2(fid_fabric* fabric, fi_info* info, fid_domain** domain, uint64_t flags, void* context) {
  if (flags != 0) return -FI_EINVAL;
  return domain_open(fabric, info, domain, context);
}

fi_ops fabric_fi_ops = {
    .size = sizeof(fi_ops),
    .close = fabric_close,
    .bind = no_bind,
    .control = no_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_fabric fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = domain_open,
    .passive_ep = no_passive_ep,
    .eq_open = eq_open,
    .wait_open = no_wait_open,
    .trywait = trywait,
    .domain2 = domain2,
};

}  // namespace

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context) {
  if (attr && attr->name && std::strcmp(attr->name, "spray") != 0) {
    SPRAY_WARN(FI_LOG_FABRIC, "unknown fabric name '%s' (ours is 'spray')\n", attr->name);
    return -FI_ENODATA;
  }
  auto* fabric = new (std::nothrow) Fabric;
  if (!fabric) return -FI_ENOMEM;
  fabric->fid.fid.fclass = FI_CLASS_FABRIC;
  fabric->fid.fid.context = context;
  fabric->fid.fid.ops = &fabric_fi_ops;
  fabric->fid.ops = &fabric_ops;
  fabric->fid.api_version = FI_VERSION(1, 17);
  *out = &fabric->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
