// fid_domain: owns the lock every child object takes, and the memory-key table.
#include <cstring>
#include <exception>

#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

int domain_close(fid* f) {
  auto* d = fid_to<Domain>(f);
  if (d->refs > 0) {
    SPRAY_WARN(FI_LOG_DOMAIN, "domain closed with %d objects still open\n", d->refs);
    return -FI_EBUSY;
  }
  d->progress_thread.reset();  // stops and joins it; no endpoint is left to progress
  fi_freeinfo(d->info);
  delete d;
  return FI_SUCCESS;
}

int no_scalable_ep(fid_domain*, fi_info*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int no_poll_open(fid_domain*, fi_poll_attr*, fid_poll**) {
  return -FI_ENOSYS;
}
int no_stx_ctx(fid_domain*, fi_tx_attr*, fid_stx**, void*) {
  return -FI_ENOSYS;
}
int no_srx_ctx(fid_domain*, fi_rx_attr*, fid_ep**, void*) {
  return -FI_ENOSYS;
}
int domain_query_atomic(fid_domain*, fi_datatype datatype, fi_op op, fi_atomic_attr* attr,
                        uint64_t flags) {
  return query_atomic(datatype, op, attr, flags);
}
int no_query_collective(fid_domain*, fi_collective_op, fi_collective_attr*, uint64_t) {
  return -FI_EOPNOTSUPP;
}
int endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags, void* context) {
  if (flags != 0) return -FI_EINVAL;
  return endpoint_open(d, info, ep, context);
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t key,
            uint64_t flags, fid_mr** mr, void* context) {
  if (count != 1) return -FI_EINVAL;  // mr_iov_limit is 1
  return mr_reg(f, iov[0].iov_base, iov[0].iov_len, access, offset, key, flags, mr, context);
}
int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr) {
  if (!attr || attr->iov_count != 1) return -FI_EINVAL;
  return mr_reg(f, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access, attr->offset,
                attr->requested_key, flags, mr, attr->context);
}

fi_ops domain_fi_ops = {
    .size = sizeof(fi_ops),
    .close = domain_close,
    .bind = no_bind,
    .control = no_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_domain domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = endpoint_open,
    .scalable_ep = no_scalable_ep,
    .cntr_open = cntr_open,
    .poll_open = no_poll_open,
    .stx_ctx = no_stx_ctx,
    .srx_ctx = no_srx_ctx,
    .query_atomic = domain_query_atomic,
    .query_collective = no_query_collective,
    .endpoint2 = endpoint2,
};

fi_ops_mr mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

}  // namespace

int domain_open(fid_fabric*, fi_info* info, fid_domain** out, void* context) {
  if (!info) return -FI_EINVAL;
  if (info->domain_attr && info->domain_attr->name &&
      std::strcmp(info->domain_attr->name, "spray") != 0) {
    SPRAY_WARN(FI_LOG_DOMAIN, "unknown domain '%s'\n", info->domain_attr->name);
    return -FI_EINVAL;
  }
  auto* d = new (std::nothrow) Domain;
  if (!d) return -FI_ENOMEM;
  d->info = fi_dupinfo(info);
  if (!d->info || !d->info->domain_attr) {
    const int error = d->info ? -FI_EINVAL : -FI_ENOMEM;
    fi_freeinfo(d->info);
    delete d;
    return error;
  }
  // mr.cc reads the bits: an application of the API before 1.5 names them by its enum.
  d->info->domain_attr->mr_mode = static_cast<int>(mr_mode_bits(d->info->domain_attr->mr_mode));
  if (d->info->domain_attr->data_progress == FI_PROGRESS_AUTO) {
    try {
      d->progress_thread = std::make_unique<ProgressThread>(*d, ProgressThread::Mode::kAlways,
                                                            std::chrono::milliseconds{});
    } catch (const std::exception& e) {  // no thread to be had: fail the open, not the process
      SPRAY_WARN(FI_LOG_DOMAIN, "cannot start the FI_PROGRESS_AUTO thread: %s\n", e.what());
      fi_freeinfo(d->info);
      delete d;
      return -FI_ENOMEM;
    }
  } else if (params().standby_progress_ms > 0) {
    try {
      d->progress_thread =
          std::make_unique<ProgressThread>(*d, ProgressThread::Mode::kWhenAway,
                                           std::chrono::milliseconds(params().standby_progress_ms));
    } catch (const std::exception& e) {  // manual progress works without it
      SPRAY_WARN(FI_LOG_DOMAIN,
                 "cannot start the standby progress thread (%s): peers may declare this "
                 "process unreachable while it makes no progress call\n",
                 e.what());
    }
  }
  d->fid.fid.fclass = FI_CLASS_DOMAIN;
  d->fid.fid.context = context;
  d->fid.fid.ops = &domain_fi_ops;
  d->fid.ops = &domain_ops;
  d->fid.mr = &mr_ops;
  *out = &d->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
