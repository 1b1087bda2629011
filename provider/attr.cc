// What the provider offers (fi_info templates) and fi_getinfo: narrowing the templates to
// an application's hints. A hint we cannot satisfy yields no entry (-FI_ENODATA), never a
// silently weaker one.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <tuple>

#include "provider/endpoint_name.h"
#include "provider/spray_fi.h"
#include "provider/staging.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/verbs/verbs_datapath.h"
#include "transport/engine/engine.h"
#include "transport/wire/ses_header.h"

namespace spray::fi {
namespace {

constexpr uint64_t kRmaCaps =
    FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kRdmCaps = FI_MSG | FI_TAGGED | kRmaCaps | FI_MULTI_RECV | FI_SEND | FI_RECV |
                              FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t kDgramCaps =
    FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
// FI_RMA_EVENT (counters of the peers' RMA and atomics on an endpoint's memory) costs the
// target a report per access, so RDM endpoints have it only when the hints ask for it
// (a secondary capability that is not reported unasked).
constexpr uint64_t kRdmOnRequest = FI_RMA_EVENT;
constexpr size_t kQueueSize = 1024;
constexpr size_t kMaxMsgSize = size_t{1} << 30;

// The largest datagram (DGRAM's max_msg_size): what SES carries in one packet on the path
// of `address` (whose MTU loses TSS's header and tag when packets are sealed).
size_t max_datagram_bytes(const std::string& address) {
  const bool secured = !params().tss_key_file.empty();
  return ses::payload_bytes_per_packet(engine::ses_mtu_bytes(datagram_bytes(address), secured));
}
// Memory registration modes we honour when the application offers them (we require none):
// provider-chosen keys, virtual addressing, regions bound to endpoints, and the promise
// that registered memory is allocated (true of any buffer we are given).
constexpr uint64_t kMrModes = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ENDPOINT | FI_MR_ALLOCATED;
constexpr uint64_t kMrBasicBits = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;

char* dup(const char* s) {
  return s ? strdup(s) : nullptr;
}

// Resolves "node" / "service" to a socket address, numeric or by name; without a node,
// the local `address` (default_address).
bool resolve(const char* node, const char* service, const std::string& address,
             sockaddr_storage& out, size_t& len) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = node ? 0 : AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string host = node ? node : address;
  if (getaddrinfo(host.c_str(), service, &hints, &res) != 0 || res == nullptr) return false;
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

bool set_addr(void*& field, size_t& field_len, const void* a, size_t len) {
  field = std::malloc(len);
  if (!field) return false;
  std::memcpy(field, a, len);
  field_len = len;
  return true;
}

fi_info* make_template(fi_ep_type type, const std::string& address) {
  fi_info* info = fi_allocinfo();
  if (!info) return nullptr;
  const bool rdm = type == FI_EP_RDM;
  info->caps = rdm ? kRdmCaps : kDgramCaps;
  info->mode = 0;
  info->addr_format = address_format_of(params().datapath);

  info->tx_attr->caps =
      info->caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE);
  info->tx_attr->msg_order = rdm ? kRdmMsgOrder : 0;
  info->tx_attr->comp_order = FI_ORDER_NONE;
  info->tx_attr->inject_size = static_cast<size_t>(params().inject_size);
  info->tx_attr->size = kQueueSize;
  info->tx_attr->iov_limit = kIovLimit;  // several pieces are staged (staging.h)
  info->tx_attr->rma_iov_limit = rdm ? 1 : 0;

  info->rx_attr->caps =
      info->caps & (FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA |
                    FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV);
  info->rx_attr->msg_order = rdm ? kRdmMsgOrder : 0;
  info->rx_attr->comp_order = FI_ORDER_NONE;
  info->rx_attr->size = kQueueSize;
  info->rx_attr->iov_limit = kIovLimit;

  info->ep_attr->type = type;
  info->ep_attr->protocol = FI_PROTO_UDP;
  info->ep_attr->protocol_version = 1;
  info->ep_attr->max_msg_size = rdm ? kMaxMsgSize : max_datagram_bytes(address);
  info->ep_attr->tx_ctx_cnt = 1;
  info->ep_attr->rx_ctx_cnt = 1;
  if (rdm) {
    // Tagged matching compares all 64 bits (with the receive's ignore mask), none
    // reserved: the generic format (FI_TAG_GENERIC in later libfabric headers; 1.17 lacks
    // the name).
    info->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
    // Data order on an RDM endpoint opened with any of kRdmMsgOrder: its writes, reads and
    // atomics to a peer go on one ROD PDC, and the peer applies each packet in PSN order
    // as it arrives (across PDCs too). So a read sees every write before it and a write
    // lands after every one before it, whatever their sizes (-1: any size); a read shows
    // none of the writes after it only up to Ses::kSnapshotReadBytes, since a larger one
    // is answered from memory as its packets leave.
    info->ep_attr->max_order_raw_size = SIZE_MAX;
    info->ep_attr->max_order_waw_size = SIZE_MAX;
    info->ep_attr->max_order_war_size = ses::Ses::kSnapshotReadBytes;
  }

  info->domain_attr->name = dup("spray");
  info->domain_attr->threading = FI_THREAD_SAFE;
  info->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  info->domain_attr->data_progress = FI_PROGRESS_MANUAL;
  info->domain_attr->resource_mgmt = FI_RM_ENABLED;
  info->domain_attr->av_type = FI_AV_UNSPEC;
  info->domain_attr->mr_mode = 0;
  info->domain_attr->mr_key_size = sizeof(uint64_t);
  info->domain_attr->cq_data_size = sizeof(uint64_t);
  info->domain_attr->cq_cnt = 256;
  info->domain_attr->ep_cnt = 256;
  info->domain_attr->tx_ctx_cnt = 256;
  info->domain_attr->rx_ctx_cnt = 256;
  info->domain_attr->max_ep_tx_ctx = 1;
  info->domain_attr->max_ep_rx_ctx = 1;
  info->domain_attr->mr_iov_limit = 1;
  info->domain_attr->mr_cnt = 4096;
  info->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

  info->fabric_attr->name = dup("spray");
  info->fabric_attr->prov_version = provider.version;
  return info;
}

// Copies a hint's authorization key into `info`'s attribute when it names a JobID; false
// (and a warning saying why) when it does not: such a hint matches nothing.
bool take_auth_key(const uint8_t* key, size_t size, uint8_t*& to, size_t& to_size) {
  if (key == nullptr && size == 0) return true;
  std::string why;
  if (!job_id_of_auth_key(key, size, why)) {
    SPRAY_WARN(FI_LOG_CORE, "auth_key: %s\n", why.c_str());
    return false;
  }
  to = static_cast<uint8_t*>(std::malloc(size));  // fi_freeinfo frees it
  if (to == nullptr) return false;
  std::memcpy(to, key, size);
  to_size = size;
  return true;
}

// Narrows `info` to `hints`; false when a hint cannot be met.
bool narrow(fi_info* info, const fi_info* hints) {
  const uint64_t on_request = info->ep_attr->type == FI_EP_RDM ? kRdmOnRequest : 0;
  if (hints->caps) {
    if (hints->caps & ~(info->caps | on_request)) return false;
    uint64_t caps = hints->caps;
    // A primary capability without direction bits means every direction (fi_getinfo(3)).
    if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & (FI_SEND | FI_RECV))) caps |= FI_SEND | FI_RECV;
    if ((caps & (FI_RMA | FI_ATOMIC)) &&
        !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))) {
      caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    // Events of remote access need remote access (fi_getinfo(3)).
    if ((caps & FI_RMA_EVENT) && !(caps & (FI_REMOTE_READ | FI_REMOTE_WRITE))) return false;
    info->caps = caps | (info->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM));
    info->rx_attr->caps |= caps & FI_RMA_EVENT;
  }
  info->tx_attr->caps &= info->caps;
  info->rx_attr->caps &= info->caps;
  info->mode = hints->mode & info->mode;

  if (hints->addr_format != FI_FORMAT_UNSPEC) {
    const bool verbs = info->addr_format == FI_ADDR_IB_UD;
    if (verbs ? hints->addr_format != FI_ADDR_IB_UD : !is_socket_format(hints->addr_format)) {
      return false;
    }
  }
  if (hints->addr_format == FI_SOCKADDR_IN6) info->addr_format = FI_SOCKADDR_IN6;

  if (const fi_ep_attr* e = hints->ep_attr) {
    if (e->type != FI_EP_UNSPEC && e->type != info->ep_attr->type) return false;
    if (e->max_msg_size > info->ep_attr->max_msg_size) return false;
    if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1) return false;
    if (e->max_order_raw_size > info->ep_attr->max_order_raw_size ||
        e->max_order_war_size > info->ep_attr->max_order_war_size ||
        e->max_order_waw_size > info->ep_attr->max_order_waw_size) {
      return false;
    }
    if (e->protocol != FI_PROTO_UNSPEC && e->protocol != info->ep_attr->protocol) return false;
    if (!take_auth_key(e->auth_key, e->auth_key_size, info->ep_attr->auth_key,
                       info->ep_attr->auth_key_size)) {
      return false;
    }
    if (e->mem_tag_format) info->ep_attr->mem_tag_format = e->mem_tag_format;
    if (e->max_msg_size) info->ep_attr->max_msg_size = e->max_msg_size;
  }
  if (const fi_tx_attr* t = hints->tx_attr) {
    if (t->caps & ~info->tx_attr->caps & ~info->caps) return false;
    if (t->msg_order & ~info->tx_attr->msg_order) return false;
    if (t->inject_size > info->tx_attr->inject_size || t->size > info->tx_attr->size) return false;
    if (t->iov_limit > info->tx_attr->iov_limit) return false;
    if (t->op_flags) info->tx_attr->op_flags = t->op_flags;
  }
  if (const fi_rx_attr* r = hints->rx_attr) {
    if (r->caps & ~info->rx_attr->caps & ~info->caps) return false;
    if (r->msg_order & ~info->rx_attr->msg_order) return false;
    if (r->size > info->rx_attr->size || r->iov_limit > info->rx_attr->iov_limit) return false;
    if (r->op_flags) info->rx_attr->op_flags = r->op_flags;
  }
  if (const fi_domain_attr* d = hints->domain_attr) {
    if (d->name && std::strcmp(d->name, "spray") != 0) return false;
    if (d->threading != FI_THREAD_UNSPEC) info->domain_attr->threading = d->threading;
    if (d->control_progress != FI_PROGRESS_UNSPEC) {
      info->domain_attr->control_progress = d->control_progress;
    }
    if (d->data_progress != FI_PROGRESS_UNSPEC) {
      info->domain_attr->data_progress = d->data_progress;
    }
    if (d->av_type != FI_AV_UNSPEC) info->domain_attr->av_type = d->av_type;
    if (d->resource_mgmt == FI_RM_DISABLED) info->domain_attr->resource_mgmt = FI_RM_DISABLED;
    // We require no mode bit; we honour the ones we can when the application offers them.
    if (d->mr_mode > 0) {
      info->domain_attr->mr_mode = static_cast<int>(mr_mode_bits(d->mr_mode) & kMrModes);
    }
    if (d->cq_data_size > info->domain_attr->cq_data_size) return false;
    if (d->mr_key_size > info->domain_attr->mr_key_size) return false;
    if (d->caps & ~(FI_LOCAL_COMM | FI_REMOTE_COMM)) return false;
    if (!take_auth_key(d->auth_key, d->auth_key_size, info->domain_attr->auth_key,
                       info->domain_attr->auth_key_size)) {
      return false;
    }
  }
  if (const fi_fabric_attr* f = hints->fabric_attr) {
    if (f->name && std::strcmp(f->name, "spray") != 0) return false;
    if (f->prov_name && !std::strstr(f->prov_name, "spray")) return false;
  }
  return true;
}

// Verbs names (GID and QP number) come only from names the application holds: a QP
// number exists once an endpoint does, so node and service cannot name an endpoint
// (fi_pingpong, for one, passes its peer's host and exchanges names itself).
bool verbs_addresses(fi_info* info, const char* node, const fi_info* hints) {
  if (node) {
    FI_INFO(&provider, FI_LOG_CORE,
            "node '%s' ignored: verbs endpoints are named by GID and QP number (fi_getname)\n",
            node);
  }
  for (auto [from, from_len, to, to_len] :
       {std::tuple{hints ? hints->src_addr : nullptr, hints ? hints->src_addrlen : 0,
                   &info->src_addr, &info->src_addrlen},
        std::tuple{hints ? hints->dest_addr : nullptr, hints ? hints->dest_addrlen : 0,
                   &info->dest_addr, &info->dest_addrlen}}) {
    if (!from) continue;
    if (from_len != sizeof(IbUdName)) return false;  // not an FI_ADDR_IB_UD name
    if (!set_addr(*to, *to_len, from, from_len)) return false;
  }
  return true;
}

// Fills src_addr / dest_addr from node, service and the hints; `address` is the local
// address when they name none.
bool addresses(fi_info* info, const char* node, const char* service, uint64_t flags,
               const fi_info* hints, const std::string& address) {
  sockaddr_storage a{};
  size_t len = 0;
  const bool source = (flags & FI_SOURCE) != 0;
  if (info->addr_format == FI_ADDR_IB_UD) return verbs_addresses(info, node, hints);
  if (hints && hints->src_addr) {
    if (!set_addr(info->src_addr, info->src_addrlen, hints->src_addr, hints->src_addrlen)) {
      return false;
    }
  } else {
    if (!resolve(source ? node : nullptr, source ? service : nullptr, address, a, len)) {
      return false;
    }
    if (!set_addr(info->src_addr, info->src_addrlen, &a, len)) return false;
  }
  if (hints && hints->dest_addr) {
    if (!set_addr(info->dest_addr, info->dest_addrlen, hints->dest_addr, hints->dest_addrlen)) {
      return false;
    }
  } else if (!source && (node || service)) {
    if (!resolve(node, service, address, a, len)) return false;
    if (!set_addr(info->dest_addr, info->dest_addrlen, &a, len)) return false;
  }
  const auto* src = static_cast<const sockaddr*>(info->src_addr);
  info->addr_format = src->sa_family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
  return true;
}

}  // namespace

std::optional<uint32_t> job_id_of_auth_key(const uint8_t* key, size_t size, std::string& why) {
  uint32_t job = 0;
  if (key == nullptr || size != sizeof(job)) {
    why = "spray takes a 4-byte key (a uint32_t JobID), not " + std::to_string(size) + " bytes";
    return std::nullopt;
  }
  std::memcpy(&job, key, sizeof(job));
  if (job > wire::kMaxJobId) {
    why = "JobID " + std::to_string(job) + " is wider than UET's 24 bits";
    return std::nullopt;
  }
  return job;
}

uint64_t mr_mode_bits(int mr_mode) {
  if (mr_mode == FI_MR_BASIC) return kMrBasicBits;
  if (mr_mode == FI_MR_SCALABLE) return 0;
  return static_cast<uint64_t>(mr_mode);
}

namespace {

// An application of an API before 1.5 reads mr_mode as FI_MR_BASIC or FI_MR_SCALABLE.
// (MPICH asks first with version 0: its settings, which hold the version, are read only
// once it has picked a provider from that first list.) `info` holds bits (narrow).
void present_mr_mode_to(uint32_t version, fi_info* info) {
  if (!FI_VERSION_LT(version, FI_VERSION(1, 5))) return;
  const auto bits = static_cast<uint64_t>(info->domain_attr->mr_mode);
  info->domain_attr->mr_mode = (bits & kMrBasicBits) == kMrBasicBits ? FI_MR_BASIC : FI_MR_SCALABLE;
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** out) {
  *out = nullptr;
  const std::string& dp = params().datapath;
  if (dp != "udp" && dp != "auto" && dp != "dpdk" && dp != "shm" && dp != "verbs" &&
      dp != "fabric") {
    SPRAY_WARN(FI_LOG_CORE,
               "FI_SPRAY_DATAPATH=%s: the provider drives 'auto', 'udp', 'shm', 'dpdk', "
               "'verbs' and 'fabric'\n",
               params().datapath.c_str());
    return -FI_ENODATA;
  }
  if (dp == "fabric" && params().fabric.empty()) {
    SPRAY_WARN(FI_LOG_CORE,
               "FI_SPRAY_DATAPATH=fabric needs FI_SPRAY_FABRIC, the spray-fabric daemon's "
               "ADDRESS:PORT\n");
    return -FI_ENODATA;
  }
  if (dp == "verbs") {
    // No endpoint without an active RDMA port: say why once, offer nothing.
    std::string error;
    if (dp::VerbsDatapath::port_mtu(verbs_config(), error) == 0) {
      SPRAY_WARN(FI_LOG_CORE, "%s (FI_SPRAY_DATAPATH=verbs offers no endpoints)\n", error.c_str());
      return -FI_ENODATA;
    }
  }
  std::string error;
  const std::string address = default_address(error);
  if (address.empty()) {
    SPRAY_WARN(FI_LOG_CORE, "FI_SPRAY_IFACE=%s: %s (the provider offers no endpoints)\n",
               params().iface.c_str(), error.c_str());
    return -FI_ENODATA;
  }
  fi_info* head = nullptr;
  fi_info** tail = &head;
  for (fi_ep_type type : {FI_EP_RDM, FI_EP_DGRAM}) {
    fi_info* info = make_template(type, address);
    if (!info) {
      fi_freeinfo(head);
      return -FI_ENOMEM;
    }
    if ((hints && !narrow(info, hints)) || !addresses(info, node, service, flags, hints, address)) {
      fi_freeinfo(info);
      continue;
    }
    present_mr_mode_to(version, info);
    *tail = info;
    tail = &info->next;
  }
  if (!head) return -FI_ENODATA;
  *out = head;
  return FI_SUCCESS;
}

}  // namespace spray::fi
