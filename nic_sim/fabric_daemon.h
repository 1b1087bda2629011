// FabricDaemon: the FabricRelay in real time on a UDP socket: the body of spray-fabric
// (tools/spray_fabric), also run on a thread by tests.
//
// One loop: receive a batch of datagrams (recvmmsg) and put their packets into the
// fabric at the current time; move the fabric to now and send what it delivered
// (sendmmsg); sleep until the next datagram or the fabric's next event, whichever comes
// first. The fabric's clock is real time since run() began, so its queues, propagation
// and reordering delays are real delays, except that a packet due within 50 us goes out
// at once (a sleep costs more than that). Faults are drawn from the seeded generator;
// which packet meets which fault still depends on the processes' timing.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "nic_sim/fabric_relay.h"
#include "transport/base/time.h"

namespace spray::sim {

struct FabricDaemonConfig {
  std::string address = "127.0.0.1";  // local address to bind
  uint16_t port = 0;                  // 0 picks one (see FabricDaemon::address())
  uint32_t socket_buffer_bytes = 16 << 20;
  FabricConfig fabric;  // hosts: the most endpoints at once; mtu_bytes: the largest packet
  // A host idle this long may go to a new endpoint once all are taken (FabricRelay).
  Duration host_idle = FabricRelay::kDefaultHostIdle;
  std::vector<PathOutage> outages;
};

struct FabricDaemonStats {
  uint64_t datagrams_in = 0;
  uint64_t datagrams_out = 0;
  uint64_t send_failures = 0;  // the kernel refused a datagram to a process (buffer full)
};

class FabricDaemon {
 public:
  // Binds the socket; nullptr and the cause on failure (bad address, port in use, ...).
  static std::unique_ptr<FabricDaemon> open(const FabricDaemonConfig& config, std::string& error);
  ~FabricDaemon();
  FabricDaemon(const FabricDaemon&) = delete;
  FabricDaemon& operator=(const FabricDaemon&) = delete;

  // Where processes send (FI_SPRAY_FABRIC).
  dp::NetAddr address() const { return address_; }
  // Relays until `stop` is set or `duration` has passed since the call.
  void run(const std::atomic<bool>& stop, Duration duration);

  const FabricRelay& relay() const { return relay_; }
  const FabricStats& fabric_stats() const { return relay_.fabric().stats(); }
  const FabricDaemonStats& stats() const { return stats_; }

 private:
  FabricDaemon(const FabricDaemonConfig& config, int socket, dp::NetAddr address);
  // Receives one batch into the fabric; returns how many datagrams came.
  size_t receive(Time now);
  // Sends everything the fabric has delivered by `now`.
  void send_delivered(Time now);

  FabricDaemonConfig cfg_;
  int socket_;
  dp::NetAddr address_;
  FabricRelay relay_;
  std::vector<uint8_t> receive_area_;  // a batch of datagrams, one slot each
  FabricDaemonStats stats_;
};

}  // namespace spray::sim
