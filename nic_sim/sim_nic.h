// SimNic: a simulated NIC on the Fabric; satisfies the Datapath concept, so the very
// engine that runs over UDP or DPDK runs here in virtual time.
//
// It computes an FCS (CRC-32) for each transmitted frame and checks it on receipt,
// dropping corrupted frames exactly as an Ethernet NIC would.
#pragma once

#include <cstdint>
#include <vector>

#include "nic_sim/fabric.h"
#include "nic_sim/packet_ring.h"
#include "transport/datapath/datapath.h"

namespace spray::sim {

class SimNic {
 public:
  SimNic(Fabric& fabric, uint32_t host, uint32_t rx_ring)
      : fabric_(fabric), host_(host), ring_(rx_ring) {}

  size_t alloc(dp::PacketBuf** bufs, size_t n) {
    size_t i = 0;
    for (; i < n; ++i) {
      bufs[i] = fabric_.pool_.alloc();
      if (bufs[i] == nullptr) break;
      bufs[i]->capacity = fabric_.cfg_.mtu_bytes;
    }
    return i;
  }
  size_t tx_burst(dp::PacketBuf** bufs, size_t n) {
    fabric_.inject(host_, bufs, n);
    return n;
  }
  size_t rx_burst(dp::PacketBuf** bufs, size_t n) { return ring_.pop(bufs, n); }
  void free(dp::PacketBuf** bufs, size_t n) {
    for (size_t i = 0; i < n; ++i) fabric_.pool_.release(bufs[i]);
  }
  uint32_t mtu() const { return fabric_.cfg_.mtu_bytes; }
  dp::NetAddr local_address() const { return dp::NetAddr::sim_host(host_); }
  uint32_t host() const { return host_; }
  size_t rx_pending() const { return ring_.size(); }

  // Fabric side: a frame arrives. False if the ring is full (the frame is dropped).
  bool deliver(dp::PacketBuf* buf) { return ring_.push(buf); }

 private:
  Fabric& fabric_;
  uint32_t host_;
  PacketRing ring_;
};

static_assert(dp::Datapath<SimNic>);

}  // namespace spray::sim
