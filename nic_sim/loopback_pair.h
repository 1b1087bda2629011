// LoopbackPair: two datapath ports wired back to back in memory. What one transmits
// the other receives on its next rx_burst: no queues, delays, faults or checksums.
// Used by benchmarks to measure the transport alone.
#pragma once

#include <cstdint>
#include <vector>

#include "nic_sim/packet_ring.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/packet_pool.h"

namespace spray::sim {

class LoopbackPort {
 public:
  LoopbackPort(dp::PacketPool& pool, uint32_t id, uint32_t mtu, uint32_t ring)
      : pool_(pool), id_(id), mtu_(mtu), ring_(ring) {}
  void connect(LoopbackPort* other) { other_ = other; }

  size_t alloc(dp::PacketBuf** bufs, size_t n) {
    size_t i = 0;
    for (; i < n && (bufs[i] = pool_.alloc()) != nullptr; ++i) bufs[i]->capacity = mtu_;
    return i;
  }
  size_t tx_burst(dp::PacketBuf** bufs, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      bufs[i]->peer = dp::NetAddr::sim_host(id_);
      if (!other_->push(bufs[i])) pool_.release(bufs[i]);
    }
    return n;
  }
  size_t rx_burst(dp::PacketBuf** bufs, size_t n) { return ring_.pop(bufs, n); }
  void free(dp::PacketBuf** bufs, size_t n) {
    for (size_t i = 0; i < n; ++i) pool_.release(bufs[i]);
  }
  uint32_t mtu() const { return mtu_; }
  dp::NetAddr local_address() const { return dp::NetAddr::sim_host(id_); }

 private:
  bool push(dp::PacketBuf* b) { return ring_.push(b); }

  dp::PacketPool& pool_;
  uint32_t id_;
  uint32_t mtu_;
  LoopbackPort* other_ = nullptr;
  PacketRing ring_;
};

class LoopbackPair {
 public:
  explicit LoopbackPair(uint32_t mtu = 4096, uint32_t buffers = 16384)
      : pool_(buffers, mtu), a_(pool_, 0, mtu, buffers), b_(pool_, 1, mtu, buffers) {
    a_.connect(&b_);
    b_.connect(&a_);
  }
  LoopbackPort& a() { return a_; }
  LoopbackPort& b() { return b_; }

 private:
  dp::PacketPool pool_;
  LoopbackPort a_, b_;
};

static_assert(dp::Datapath<LoopbackPort>);

}  // namespace spray::sim
