// VerbsDatapath setup: device discovery, protection domain, registered pool, CQs, the
// UD queue pair and its state transitions, and teardown.
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/datapath/verbs/verbs_datapath.h"

namespace spray::dp {
namespace {

uint32_t mtu_bytes(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 256;
}

// Opens the device named `name` (empty: the first one); nullptr and the reason if none.
ibv_context* open_device(const std::string& name, std::string& error) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list) ibv_free_device_list(list);
    error =
        "verbs: no RDMA device found (ibv_get_device_list returned none); the verbs "
        "datapath needs an RDMA NIC or a software device such as rxe";
    return nullptr;
  }
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    const std::string found = ibv_get_device_name(list[i]);
    names += (i ? ", " : "") + found;
    if (name.empty() || name == found) {
      dev = list[i];
      break;
    }
  }
  if (dev == nullptr) {
    ibv_free_device_list(list);
    error = fmt::format("verbs: RDMA device '{}' not found; present: {}", name, names);
    return nullptr;
  }
  ibv_context* ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (ctx == nullptr) error = fmt::format("verbs: ibv_open_device: {}", std::strerror(errno));
  return ctx;
}

}  // namespace

std::vector<std::string> VerbsDatapath::devices() {
  std::vector<std::string> names;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return names;
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

uint32_t VerbsDatapath::port_mtu(const VerbsConfig& config, std::string& error) {
  ibv_context* ctx = open_device(config.device, error);
  if (ctx == nullptr) return 0;
  ibv_port_attr port{};
  uint32_t mtu = 0;
  if (ibv_query_port(ctx, config.port, &port) != 0 || port.state != IBV_PORT_ACTIVE) {
    error = fmt::format("verbs: port {} is not active", config.port);
  } else {
    mtu = mtu_bytes(port.active_mtu);
  }
  ibv_close_device(ctx);
  return mtu;
}

std::unique_ptr<VerbsDatapath> VerbsDatapath::open(const VerbsConfig& c, std::string& error) {
  if (c.entropy_classes == 0 || c.buffers < c.recv_depth + c.send_depth) {
    error = "verbs: entropy_classes must be >= 1 and buffers >= recv_depth + send_depth";
    return nullptr;
  }
  auto d = std::unique_ptr<VerbsDatapath>(new VerbsDatapath(c, c.mtu_bytes));
  if (!d->setup(error)) return nullptr;
  return d;
}

VerbsDatapath::VerbsDatapath(const VerbsConfig& config, uint32_t mtu)
    : cfg_(config),
      mtu_(mtu),
      pool_(config.buffers, mtu, kGrhBytes),
      stash_(std::make_unique<ibv_wc[]>(kStashMax)) {}

bool VerbsDatapath::setup(std::string& error) {
  ctx_ = open_device(cfg_.device, error);
  if (ctx_ == nullptr) return false;
  ibv_port_attr port{};
  if (ibv_query_port(ctx_, cfg_.port, &port) != 0 || port.state != IBV_PORT_ACTIVE) {
    error = fmt::format("verbs: port {} is not active", cfg_.port);
    return false;
  }
  mtu_ = std::min(mtu_, mtu_bytes(port.active_mtu));
  ibv_gid gid{};
  if (ibv_query_gid(ctx_, cfg_.port, cfg_.gid_index, &gid) != 0) {
    error = fmt::format("verbs: no GID at index {} on port {}", cfg_.gid_index, cfg_.port);
    return false;
  }
  pd_ = ibv_alloc_pd(ctx_);
  channel_ = ibv_create_comp_channel(ctx_);
  // prepare_wait() drains the channel's events without blocking.
  if (channel_ && fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK) != 0) {
    error = fmt::format("verbs: cannot make the completion channel non-blocking: {}",
                        std::strerror(errno));
    return false;
  }
  send_cq_ = ibv_create_cq(ctx_, static_cast<int>(cfg_.send_depth), nullptr, nullptr, 0);
  recv_cq_ = ibv_create_cq(ctx_, static_cast<int>(cfg_.recv_depth), nullptr, channel_, 0);
  if (!pd_ || !channel_ || !send_cq_ || !recv_cq_) {
    error = fmt::format("verbs: cannot create PD/CQs: {}", std::strerror(errno));
    return false;
  }
  // An int, not the enum: the ibv_reg_mr macro ands it with an enum of another type.
  mr_ = ibv_reg_mr(pd_, pool_.arena(), pool_.arena_bytes(), int{IBV_ACCESS_LOCAL_WRITE});
  if (mr_ == nullptr) {
    error = fmt::format("verbs: cannot register {} bytes: {}", pool_.arena_bytes(),
                        std::strerror(errno));
    return false;
  }
  ibv_qp_init_attr init{};
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = cfg_.send_depth;
  init.cap.max_recv_wr = cfg_.recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &init);
  if (qp_ == nullptr) {
    error = fmt::format("verbs: cannot create a UD QP: {}", std::strerror(errno));
    return false;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = cfg_.port;
  a.qkey = cfg_.qkey;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) != 0) {
    error = "verbs: QP to INIT failed";
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE) != 0) {
    error = "verbs: QP to RTR failed";
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) != 0) {
    error = "verbs: QP to RTS failed";
    return false;
  }
  local_.family = NetAddr::Family::kVerbs;
  std::memcpy(local_.ip.data(), gid.raw, 16);
  local_.qpn = qp_->qp_num;
  static constexpr uint8_t kIpv4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  ipv4_roce_ = std::memcmp(gid.raw, kIpv4Mapped, sizeof(kIpv4Mapped)) == 0;
  post_receives();
  return true;
}

VerbsDatapath::~VerbsDatapath() {
  for (auto& [key, ah] : ahs_) ibv_destroy_ah(ah);
  if (qp_) ibv_destroy_qp(qp_);
  if (mr_) ibv_dereg_mr(mr_);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

}  // namespace spray::dp
