// VerbsDatapath: Spray over an RDMA NIC (RoCE or InfiniBand) with libibverbs.
//
// One unreliable-datagram (UD) queue pair per engine: reliability is Spray's, the NIC
// only moves datagrams. Buffers come from one pool registered once with the NIC; each
// receive buffer keeps 40 bytes of headroom for the GRH that UD receives carry.
// Sends are posted as one linked work-request list per burst and receives reposted in
// batches; completions are polled, never waited on per packet.
//
// Entropy: on RoCEv2 the NIC derives the UDP source port from the GRH flow label, so
// each packet's EV selects one of `entropy_classes` address handles per peer whose flow
// labels differ. Address: the port's GID plus the QP number (NetAddr family kVerbs).
//
// Waiting: prepare_wait() arms the receive CQ's completion channel (whose descriptor is
// wait_fd()) and polls the CQ once more, since completions that arrived before arming
// raise no event; what that poll finds is kept for the next rx_burst. wait() does both
// and blocks on the descriptor.
//
// Tested end to end only where an RDMA device exists; elsewhere open() fails with a
// clear reason and the tests report a skip.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/packet_pool.h"

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_qp;
struct ibv_ah;
struct ibv_comp_channel;
struct ibv_wc;

namespace spray::dp {

struct VerbsConfig {
  std::string device;  // empty: the first device found
  uint8_t port = 1;
  int gid_index = 0;
  uint32_t mtu_bytes = 4096;  // capped at the port's active MTU
  uint32_t buffers = 8192;
  uint32_t send_depth = 1024;
  uint32_t recv_depth = 1024;
  uint32_t qkey = 0x53505259;    // "SPRY"
  uint16_t entropy_classes = 8;  // address handles (flow labels) per peer
};

struct VerbsStats {
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;
  uint64_t tx_errors = 0;  // send completions with an error status
  uint64_t rx_packets = 0;
  uint64_t rx_errors = 0;
};

class VerbsDatapath {
 public:
  // Received packets carry no EV: RoCE's UDP source port is not visible through UD.
  static constexpr bool kHidesArrivalEntropy = true;
  // Opens the device, creates and activates the UD QP. On failure returns nullptr and
  // a message naming the cause (no device, unknown device, port down, ...).
  static std::unique_ptr<VerbsDatapath> open(const VerbsConfig& config, std::string& error);
  // Names of the RDMA devices present (empty when there are none).
  static std::vector<std::string> devices();
  // The active MTU of the configured device's port, bytes; 0 and a reason when the
  // device or port is missing or down.
  static uint32_t port_mtu(const VerbsConfig& config, std::string& error);
  ~VerbsDatapath();
  VerbsDatapath(const VerbsDatapath&) = delete;
  VerbsDatapath& operator=(const VerbsDatapath&) = delete;

  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  uint32_t mtu() const { return mtu_; }
  NetAddr local_address() const { return local_; }
  bool wait(Duration timeout);
  // Before blocking on wait_fd(): consumes the channel's events and arms it. False when
  // packets are already waiting (the caller polls instead of blocking).
  bool prepare_wait();
  // The completion channel's descriptor: readable once a packet arrives after prepare_wait.
  int wait_fd() const;
  const VerbsStats& stats() const { return stats_; }

 private:
  static constexpr uint32_t kGrhBytes = 40;
  VerbsDatapath(const VerbsConfig& config, uint32_t mtu);
  bool setup(std::string& error);
  void post_receives();
  void reap_sends();
  // Turns receive completions into packets in bufs (at most n); returns how many.
  size_t deliver(const ibv_wc* wc, size_t count, PacketBuf** bufs, size_t n);
  ibv_ah* address_handle(const NetAddr& peer, uint16_t entropy);

  VerbsConfig cfg_;
  uint32_t mtu_;
  PacketPool pool_;
  NetAddr local_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  // RoCEv2 over IPv4 (the port's GID is IPv4-mapped): a UD receive's 40-byte GRH area
  // then holds an IPv4 header in its last 20 bytes, not a GRH with the source GID.
  bool ipv4_roce_ = false;
  // Receive completions prepare_wait() polled, not yet handed out (kStashMax at most).
  static constexpr size_t kStashMax = 64;
  std::unique_ptr<ibv_wc[]> stash_;
  size_t stash_count_ = 0;
  uint32_t posted_receives_ = 0;
  uint32_t outstanding_sends_ = 0;
  // Address handles by (peer, entropy class); created on first use, kept for the QP's life.
  std::unordered_map<uint64_t, ibv_ah*> ahs_;
  VerbsStats stats_;
};

static_assert(Datapath<VerbsDatapath>);

}  // namespace spray::dp
