// FabricDatapath: Spray through spray-fabric, the software switch fabric daemon
// (tools/spray_fabric), so that real processes (provider endpoints, MPI ranks,
// collectives) meet loss, duplication, corruption, reordering, trimming, ECN and paths
// going down on one machine, with the faults seeded. The kernel's own network cannot do
// this here (no netem).
//
// Each endpoint binds one UDP socket; its address is the endpoint's name, as over the
// UDP datapath. Every packet goes to the daemon with a relay header (relay_header.h)
// naming its destination and EV; every packet comes from the daemon with one naming its
// source, the EV and what the fabric did to it. Datagrams from any other address are
// dropped and counted: only the daemon speaks for the fabric.
//
// Batching: tx_burst is one sendmmsg per 64 packets, rx_burst one recvmmsg. Buffers come
// from one preallocated pool whose headroom holds the relay header, so a packet is sent
// and received in place, header and all.
#pragma once

#include <memory>
#include <string>

#include "transport/base/time.h"
#include "transport/datapath/datapath.h"
#include "transport/datapath/packet_pool.h"

namespace spray::dp {

struct FabricDatapathConfig {
  std::string fabric;                 // the daemon's "ADDRESS:PORT" ("127.0.0.1:4790")
  std::string address = "127.0.0.1";  // local address to bind
  uint16_t port = 0;                  // 0 picks one
  uint32_t mtu_bytes = 4096;          // UET bytes per packet; the daemon must carry it
  uint32_t buffers = 4096;            // packet buffers in the pool
  uint32_t socket_buffer_bytes = 4 << 20;
};

struct FabricDatapathStats {
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;  // the kernel refused them (buffer full)
  uint64_t rx_packets = 0;
  uint64_t rx_not_from_fabric = 0;  // datagrams from an address other than the daemon's
  uint64_t rx_malformed = 0;        // no valid relay header, or larger than a buffer
  uint64_t rx_no_buffer = 0;        // rx_burst calls that found the pool empty (datagrams wait)
};

class FabricDatapath {
 public:
  // Binds the socket. On failure returns nullptr and a message naming the cause (a
  // daemon address that does not parse, an address that is not local, a port in use).
  static std::unique_ptr<FabricDatapath> open(const FabricDatapathConfig& config,
                                              std::string& error);
  ~FabricDatapath();
  FabricDatapath(const FabricDatapath&) = delete;
  FabricDatapath& operator=(const FabricDatapath&) = delete;

  // The Datapath concept.
  size_t alloc(PacketBuf** bufs, size_t n);
  size_t tx_burst(PacketBuf** bufs, size_t n);
  size_t rx_burst(PacketBuf** bufs, size_t n);
  void free(PacketBuf** bufs, size_t n);
  uint32_t mtu() const { return cfg_.mtu_bytes; }
  NetAddr local_address() const { return local_; }

  // Blocks until a datagram is waiting or `timeout` passes. True if one is waiting.
  bool wait(Duration timeout);
  // Readable when a datagram arrives, for callers that wait on many sources (epoll).
  int wait_fd() const { return socket_; }
  const FabricDatapathStats& stats() const { return stats_; }
  NetAddr fabric_address() const { return fabric_; }

 private:
  FabricDatapath(const FabricDatapathConfig& config, int socket, NetAddr local, NetAddr fabric);

  FabricDatapathConfig cfg_;
  int socket_;
  NetAddr local_;
  NetAddr fabric_;  // the daemon
  PacketPool pool_;
  FabricDatapathStats stats_;
};

static_assert(Datapath<FabricDatapath>);

}  // namespace spray::dp
