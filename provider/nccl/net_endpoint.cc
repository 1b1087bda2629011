#include "provider/nccl/net_endpoint.h"

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "provider/nccl/comm.h"
#include "provider/nccl/log.h"

namespace spray::nccl {
namespace {

constexpr size_t kCompletionBatch = 32;  // completions read per fi_cq_read
// CQ entries: every operation NCCL can have in flight on a few hundred comms.
constexpr size_t kCqEntries = 16384;

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
  fi_client::RdmEndpointSpec spec;
  spec.provider = provider;
  spec.caps = FI_TAGGED | FI_DIRECTED_RECV;
  spec.mode = FI_CONTEXT | FI_CONTEXT2;
  spec.msg_order = FI_ORDER_SAS;
  spec.threading = FI_THREAD_DOMAIN;
  spec.cq_entries = kCqEntries;
  spec.cq_wait = FI_WAIT_NONE;  // NCCL's proxy thread polls test()
  spec.described = "tagged RDM endpoint with directed receive and send-after-send order";
  e->fi_ = fi_client::RdmEndpoint::open(spec, error);
  if (!e->fi_) return nullptr;
  e->name_ = e->fi_->name();
  if (e->name_.empty() || e->name_.size() > kMaxNameBytes) {
    error = fmt::format("the endpoint's name takes {} bytes; a handle holds {}", e->name_.size(),
                        kMaxNameBytes);
    return nullptr;
  }
  const fi_info& info = e->fi_->info();
  e->max_message_bytes_ = info.ep_attr->max_msg_size;
  e->inject_bytes_ = info.tx_attr->inject_size;
  if (info.nic && info.nic->link_attr && info.nic->link_attr->speed > 0) {
    e->link_speed_mbps_ = static_cast<int>(info.nic->link_attr->speed / 1000000);
  }
  return e;
}

NetEndpoint::~NetEndpoint() = default;

bool NetEndpoint::address_of(std::span<const uint8_t> name, fi_addr_t& out, std::string& error) {
  std::vector<uint8_t> key(name.begin(), name.end());
  if (auto it = addresses_.find(key); it != addresses_.end()) {
    out = it->second;
    return true;
  }
  std::string why;
  const fi_addr_t address = fi_->enter(key, why);
  if (address == FI_ADDR_NOTAVAIL) {
    error = "the peer's name: " + why;
    return false;
  }
  addresses_.emplace(std::move(key), address);
  out = address;
  return true;
}

void NetEndpoint::progress() {
  fi_cq_tagged_entry entries[kCompletionBatch];
  for (;;) {
    const ssize_t n = fi_cq_read(fi_->cq(), entries, kCompletionBatch);
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
    if (fi_cq_readerr(fi_->cq(), &err, 0) != 1) return;
    auto* op = static_cast<Operation*>(err.op_context);
    if (!op) {
      warn("NET/Spray: an error completion without an operation: {}", fi_strerror(err.err));
      continue;
    }
    const ncclResult_t result = result_of(err.err);
    if (result != ncclSuccess) {
      warn("NET/Spray: {} {} failed: {} ({})",
           op->request->comm->kind == Comm::Kind::send ? "send" : "receive", op->index,
           fi_strerror(err.err),
           fi_cq_strerror(fi_->cq(), err.prov_errno, err.err_data, nullptr, 0));
    }
    op->request->complete(op->index, err.len, result);
  }
}

}  // namespace spray::nccl
