// NetEndpoint: the NCCL net plugin's one libfabric endpoint (FI_EP_RDM, tagged, directed
// receive) on the provider SPRAY_NCCL_PROVIDER names (default `spray`), with its AV and
// CQ. Every comm of the process shares it; progress() reads its completions and hands
// each to the Operation it belongs to.
//
// Only the public libfabric API is used, so the same plugin runs over `tcp` or `shm` as
// well, which the tests use to tell the plugin's faults from the provider's.
//
// Thread safety: NCCL calls the plugin from its proxy thread and, while connecting, from
// others; every entry point holds mutex() for the whole call (a batch of completions,
// never a lock per packet).
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "provider/client/rdm_endpoint.h"

namespace spray::nccl {

class NetEndpoint {
 public:
  // Opens fabric, domain, AV, CQ and endpoint on `provider`; null and `error` (naming the
  // provider and the call that failed) otherwise.
  static std::unique_ptr<NetEndpoint> open(const std::string& provider, std::string& error);
  ~NetEndpoint();
  NetEndpoint(const NetEndpoint&) = delete;
  NetEndpoint& operator=(const NetEndpoint&) = delete;

  std::mutex& mutex() { return mutex_; }
  fid_ep* ep() const { return fi_->ep(); }
  const std::string& provider() const { return provider_; }
  // The endpoint's own name (fi_getname), what peers enter into their AVs.
  std::span<const uint8_t> name() const { return name_; }
  // Largest send the provider copies at once (FI_INJECT); 0 when it copies none.
  size_t inject_bytes() const { return inject_bytes_; }
  // Largest message the provider takes.
  size_t max_message_bytes() const { return max_message_bytes_; }
  // Link speed the provider reports for its NIC, Mbit/s; 0 when it reports none.
  int link_speed_mbps() const { return link_speed_mbps_; }

  // The AV address of the endpoint named `name`, entering it the first time.
  // false and `error` for a name the provider refuses.
  bool address_of(std::span<const uint8_t> name, fi_addr_t& out, std::string& error);

  // Reads the completions that are ready (in batches) and passes each to its operation.
  void progress();

 private:
  NetEndpoint() = default;

  std::mutex mutex_;
  std::string provider_;
  std::unique_ptr<fi_client::RdmEndpoint> fi_;  // the libfabric objects
  std::vector<uint8_t> name_;
  size_t max_message_bytes_ = 0;
  size_t inject_bytes_ = 0;
  int link_speed_mbps_ = 0;
  std::map<std::vector<uint8_t>, fi_addr_t> addresses_;  // peer name -> AV address
};

}  // namespace spray::nccl
