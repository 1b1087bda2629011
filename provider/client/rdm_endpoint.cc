#include "provider/client/rdm_endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cstring>

#include <fmt/format.h>

namespace spray::fi_client {
namespace {

std::string fi_error(const std::string& provider, const char* call, int rc) {
  return fmt::format("{} on provider '{}' failed: {}", call, provider, fi_strerror(-rc));
}

}  // namespace

std::unique_ptr<RdmEndpoint> RdmEndpoint::open(const RdmEndpointSpec& spec, std::string& error) {
  std::unique_ptr<RdmEndpoint> e(new RdmEndpoint);
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup(spec.provider.c_str());
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = spec.caps;
  hints->mode = spec.mode;
  hints->tx_attr->msg_order = spec.msg_order;
  hints->rx_attr->msg_order = spec.msg_order;
  hints->domain_attr->mr_mode = 0;
  hints->domain_attr->threading = spec.threading;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &e->info_);
  fi_freeinfo(hints);
  if (rc != 0) {
    error = fmt::format("provider '{}' offers no {}: {}", spec.provider, spec.described,
                        fi_strerror(-rc));
    return nullptr;
  }
  if ((rc = fi_fabric(e->info_->fabric_attr, &e->fabric_, nullptr)) != 0 ||
      (rc = fi_domain(e->fabric_, e->info_, &e->domain_, nullptr)) != 0) {
    error = fi_error(spec.provider, "fi_fabric/fi_domain", rc);
    return nullptr;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if ((rc = fi_av_open(e->domain_, &av_attr, &e->av_, nullptr)) != 0) {
    error = fi_error(spec.provider, "fi_av_open", rc);
    return nullptr;
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = spec.cq_entries;
  cq_attr.wait_obj = spec.cq_wait;
  rc = fi_cq_open(e->domain_, &cq_attr, &e->cq_, nullptr);
  if (rc != 0 && spec.cq_wait == FI_WAIT_UNSPEC) {
    cq_attr.wait_obj = FI_WAIT_NONE;  // this provider only polls
    rc = fi_cq_open(e->domain_, &cq_attr, &e->cq_, nullptr);
  }
  if (rc != 0) {
    error = fi_error(spec.provider, "fi_cq_open", rc);
    return nullptr;
  }
  e->cq_can_block_ = cq_attr.wait_obj != FI_WAIT_NONE;
  if ((rc = fi_endpoint(e->domain_, e->info_, &e->ep_, nullptr)) != 0 ||
      (rc = fi_ep_bind(e->ep_, &e->av_->fid, 0)) != 0 ||
      (rc = fi_ep_bind(e->ep_, &e->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (rc = fi_enable(e->ep_)) != 0) {
    error = fi_error(spec.provider, "fi_endpoint/bind/enable", rc);
    return nullptr;
  }
  return e;
}

RdmEndpoint::~RdmEndpoint() {
  for (fid* f : {ep_ ? &ep_->fid : nullptr, cq_ ? &cq_->fid : nullptr, av_ ? &av_->fid : nullptr,
                 domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr}) {
    if (f) fi_close(f);
  }
  if (info_) fi_freeinfo(info_);
}

std::vector<uint8_t> RdmEndpoint::name() const {
  std::vector<uint8_t> name(256);
  size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  if (rc != 0) return {};
  name.resize(len);
  return name;
}

fi_addr_t RdmEndpoint::enter(const std::vector<uint8_t>& name, std::string& error) {
  fi_addr_t address = FI_ADDR_NOTAVAIL;
  const int inserted = fi_av_insert(av_, name.data(), 1, &address, 0, nullptr);
  if (inserted != 1) {
    error = fmt::format("the provider refused the name ({} bytes): {}", name.size(),
                        inserted < 0 ? fi_strerror(-inserted) : "not inserted");
    return FI_ADDR_NOTAVAIL;
  }
  return address;
}

}  // namespace spray::fi_client
