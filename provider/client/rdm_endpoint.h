// RdmEndpoint: what a libfabric client needs for one RDM endpoint on any provider, opened
// in one call and closed in reverse order: the fi_info, fabric, domain, an AV
// (FI_AV_TABLE), a CQ (tagged format) and the endpoint, bound to both and enabled.
//
// Its users are libfabric clients like any application, not parts of the provider: the
// collectives' FabricLink, the NCCL plugin's NetEndpoint, spray-fi-rate and
// spray-fi-atomic-rate. They differ only in what they ask for (RdmEndpointSpec) and do
// their own posting and progress on ep() and cq() (and registration on domain()).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct fid_fabric;
struct fid_domain;
struct fid_av;
struct fid_cq;
struct fid_ep;

namespace spray::fi_client {

struct RdmEndpointSpec {
  std::string provider;       // fabric_attr->prov_name: "spray", "tcp", "shm", ...
  uint64_t caps = FI_TAGGED;  // capabilities the endpoint must have
  uint64_t mode = 0;          // modes the caller supports (FI_CONTEXT | FI_CONTEXT2, ...)
  uint64_t msg_order = 0;     // ordering required of sends and receives (FI_ORDER_SAS)
  fi_threading threading = FI_THREAD_UNSPEC;
  size_t cq_entries = 0;  // 0: the provider's default
  // The CQ's wait object. With FI_WAIT_UNSPEC, a provider that offers none gets a CQ
  // without one (cq_can_block() then says so) rather than failing the open.
  fi_wait_obj cq_wait = FI_WAIT_NONE;
  // What the caller asked for, in words, for the error when no provider offers it.
  std::string described = "tagged RDM endpoint";
};

class RdmEndpoint {
 public:
  // It asks for mr_mode 0: local buffers need no registration, so providers that
  // require FI_MR_LOCAL are filtered out, and regions the caller registers for remote
  // access (on domain()) are named by offset and the caller's key unless the provider's
  // mr_mode still says FI_MR_VIRT_ADDR or FI_MR_PROV_KEY. nullptr and `error` (naming
  // the provider and the call that failed) on failure.
  static std::unique_ptr<RdmEndpoint> open(const RdmEndpointSpec& spec, std::string& error);
  ~RdmEndpoint();
  RdmEndpoint(const RdmEndpoint&) = delete;
  RdmEndpoint& operator=(const RdmEndpoint&) = delete;

  const fi_info& info() const { return *info_; }
  fid_domain* domain() const { return domain_; }  // for memory registration
  fid_av* av() const { return av_; }
  fid_cq* cq() const { return cq_; }
  fid_ep* ep() const { return ep_; }
  // True when the CQ has a wait object: fi_cq_sread blocks.
  bool cq_can_block() const { return cq_can_block_; }

  // The endpoint's name (fi_getname), what peers enter into their AVs; empty if the
  // provider will not tell it.
  std::vector<uint8_t> name() const;
  // Enters the endpoint named `name` into the AV: its address, or FI_ADDR_NOTAVAIL and
  // `error` if the provider refuses the name.
  fi_addr_t enter(const std::vector<uint8_t>& name, std::string& error);

 private:
  RdmEndpoint() = default;

  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  bool cq_can_block_ = false;
};

}  // namespace spray::fi_client
