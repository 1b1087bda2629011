// ForwardingPort: a datapath of a test's own over one end of a sim::LoopbackPair, which
// hands every call to that end. A test derives from it and replaces what it watches or
// changes (tx_burst to record bursts, or members of the Datapath concept a LoopbackPort
// lacks); the rest is inherited.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nic_sim/loopback_pair.h"
#include "transport/datapath/datapath.h"

namespace spray::test {

class ForwardingPort {
 public:
  explicit ForwardingPort(sim::LoopbackPort& port) : port_(port) {}
  size_t alloc(dp::PacketBuf** b, size_t n) { return port_.alloc(b, n); }
  size_t tx_burst(dp::PacketBuf** b, size_t n) { return port_.tx_burst(b, n); }
  size_t rx_burst(dp::PacketBuf** b, size_t n) { return port_.rx_burst(b, n); }
  void free(dp::PacketBuf** b, size_t n) { port_.free(b, n); }
  uint32_t mtu() const { return port_.mtu(); }
  dp::NetAddr local_address() const { return port_.local_address(); }

 private:
  sim::LoopbackPort& port_;  // not owned: the pair outlives the port
};

}  // namespace spray::test
