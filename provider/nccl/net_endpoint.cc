#include "provider/nccl/net_endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstring>

#include <fmt/format.h>

#include "provider/nccl/comm.h"
#include "provider/nccl/log.h"

namespace spray::nccl {
namespace {

constexpr size_t kCompletionBatch = 32;  // completions read per fi_cq_read
// CQ entries: every operation NCCL can have in flight on a few hundred comms.
constexpr size_t kCqEntries = 16384;

std::string fi_error(const char* call, int rc) {
  return fmt::format("{} failed: {}", call, fi_strerror(-rc));
}

// What NCCL should hear of an operation's failure.
ncclResult_t result_of(int fi_errno) {
  switch (fi_errno) {
    case FI_ETRUNC:
      return ncclInvalidUsage;  // a send larger than the receive posted for it
    case FI_ECANCELED:
      return ncclSuccess;  // we cancelled it ourselves, closing its comm
    default:
      return ncclRemoteError;  // the peer is gone or unreachable
  }
}

}  // namespace

std::unique_ptr<NetEndpoint> NetEndpoint::open(const std::string& provider, std::string& error) {
  std::unique_ptr<NetEndpoint> e(new NetEndpoint);
  e->provider_ = provider;
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  // Messages only, no RMA: no memory is registered with the provider, so providers that
  // require FI_MR_LOCAL are left out.
  hints->domain_attr->mr_mode = 0;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &e->info_);
  fi_freeinfo(hints);
  if (rc != 0) {
    error = fmt::format(
        "provider '{}' offers no tagged RDM endpoint with directed receive and "
        "send-after-send order: {}",
        provider, fi_strerror(-rc));
    return nullptr;
  }
  const fi_info* info = e->info_;
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = kCqEntries;
  cq_attr.wait_obj = FI_WAIT_NONE;  // NCCL's proxy thread polls test()
  if ((rc = fi_fabric(info->fabric_attr, &e->fabric_, nullptr)) != 0 ||
      (rc = fi_domain(e->fabric_, e->info_, &e->domain_, nullptr)) != 0 ||
      (rc = fi_av_open(e->domain_, &av_attr, &e->av_, nullptr)) != 0 ||
      (rc = fi_cq_open(e->domain_, &cq_attr, &e->cq_, nullptr)) != 0 ||
      (rc = fi_endpoint(e->domain_, e->info_, &e->ep_, nullptr)) != 0 ||
      (rc = fi_ep_bind(e->ep_, &e->av_->fid, 0)) != 0 ||
      (rc = fi_ep_bind(e->ep_, &e->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (rc = fi_enable(e->ep_)) != 0) {
    error = fi_error("opening the endpoint (fi_fabric ... fi_enable)", rc);
    return nullptr;
  }
  e->name_.resize(kMaxNameBytes);
  size_t bytes = e->name_.size();
  if ((rc = fi_getname(&e->ep_->fid, e->name_.data(), &bytes)) != 0) {
    error = fmt::format("{} (the endpoint's name takes {} bytes; a handle holds {})",
                        fi_error("fi_getname", rc), bytes, kMaxNameBytes);
    return nullptr;
  }
  e->name_.resize(bytes);
  e->max_message_bytes_ = info->ep_attr->max_msg_size;
  e->inject_bytes_ = info->tx_attr->inject_size;
  if (info->nic && info->nic->link_attr && info->nic->link_attr->speed > 0) {
    e->link_speed_mbps_ = static_cast<int>(info->nic->link_attr->speed / 1000000);
  }
  return e;
}

NetEndpoint::~NetEndpoint() {
  if (ep_) fi_close(&ep_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (av_) fi_close(&av_->fid);
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fi_freeinfo(info_);
}

bool NetEndpoint::address_of(std::span<const uint8_t> name, fi_addr_t& out, std::string& error) {
  std::vector<uint8_t> key(name.begin(), name.end());
  if (auto it = addresses_.find(key); it != addresses_.end()) {
    out = it->second;
    return true;
  }
  fi_addr_t address = FI_ADDR_NOTAVAIL;
  const int inserted = fi_av_insert(av_, key.data(), 1, &address, 0, nullptr);
  if (inserted != 1) {
    error = fmt::format("the provider refused the peer's name ({} bytes): {}", key.size(),
                        inserted < 0 ? fi_strerror(-inserted) : "not inserted");
    return false;
  }
  addresses_.emplace(std::move(key), address);
  out = address;
  return true;
}

void NetEndpoint::progress() {
  fi_cq_tagged_entry entries[kCompletionBatch];
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries, kCompletionBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        auto* op = static_cast<Operation*>(entries[i].op_context);
        op->request->complete(op->index, entries[i].len, ncclSuccess);
      }
      if (static_cast<size_t>(n) < kCompletionBatch) return;
      continue;
    }
    if (n != -FI_EAVAIL) return;  // -FI_EAGAIN: nothing more now
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq_, &err, 0) != 1) return;
    auto* op = static_cast<Operation*>(err.op_context);
    if (!op) {
      warn("NET/Spray: an error completion without an operation: {}", fi_strerror(err.err));
      continue;
    }
    const ncclResult_t result = result_of(err.err);
    if (result != ncclSuccess) {
      warn("NET/Spray: {} {} failed: {} ({})",
           op->request->comm->kind == Comm::Kind::send ? "send" : "receive", op->index,
           fi_strerror(err.err), fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0));
    }
    op->request->complete(op->index, err.len, result);
  }
}

}  // namespace spray::nccl
