#include "nic_sim/fabric_relay.h"

#include <cstring>

namespace spray::sim {

void apply_outages(Fabric& fabric, const std::vector<PathOutage>& outages, Duration since_start) {
  for (const PathOutage& o : outages) fabric.set_path_up(o.path, true);
  for (const PathOutage& o : outages) {
    if (since_start >= o.from && since_start < o.until) fabric.set_path_up(o.path, false);
  }
}

FabricRelay::FabricRelay(const FabricConfig& config) : fabric_(config) {
  addresses_.reserve(config.hosts);
  hosts_.reserve(config.hosts);
}

bool FabricRelay::host_of(const dp::NetAddr& a, uint32_t& host) {
  if (const auto it = hosts_.find(a); it != hosts_.end()) {
    host = it->second;
    return true;
  }
  if (addresses_.size() >= fabric_.hosts()) return false;
  host = static_cast<uint32_t>(addresses_.size());
  addresses_.push_back(a);
  hosts_.emplace(a, host);
  return true;
}

bool FabricRelay::take(std::span<const uint8_t> datagram, const dp::NetAddr& from, Time now) {
  dp::RelayHeader h;
  if (!dp::decode_relay_header(datagram.data(), datagram.size(), h)) {
    ++stats_.malformed;
    return false;
  }
  const size_t len = datagram.size() - dp::kRelayHeaderBytes;
  if (len == 0) {
    ++stats_.malformed;
    return false;
  }
  if (len > fabric_.config().mtu_bytes) {
    ++stats_.too_large;
    return false;
  }
  if (check_ && !hosts_.contains(h.other) && !check_(h.other)) {
    ++stats_.not_allowed;
    return false;
  }
  uint32_t src = 0, dst = 0;
  if (!host_of(from, src) || !host_of(h.other, dst)) {
    ++stats_.no_host_left;
    return false;
  }
  fabric_.advance_to(now);  // the packet enters at `now`, after what was due before
  dp::PacketBuf* b = nullptr;
  if (fabric_.nic(src).alloc(&b, 1) != 1) {
    ++stats_.no_buffer;
    return false;
  }
  std::memcpy(b->data, datagram.data() + dp::kRelayHeaderBytes, len);
  b->len = static_cast<uint32_t>(len);
  b->peer = dp::NetAddr::sim_host(dst);
  b->entropy = h.entropy;
  fabric_.nic(src).tx_burst(&b, 1);
  ++stats_.taken;
  return true;
}

size_t FabricRelay::collect(Time now, std::span<Outgoing> out) {
  fabric_.advance_to(now);
  size_t filled = 0;
  const auto hosts = hosts_in_use();
  for (uint32_t visited = 0; visited < hosts && filled < out.size(); ++visited) {
    const uint32_t host = next_host_to_drain_;
    next_host_to_drain_ = (next_host_to_drain_ + 1) % hosts;
    SimNic& nic = fabric_.nic(host);
    while (filled < out.size()) {
      dp::PacketBuf* b = nullptr;
      if (nic.rx_burst(&b, 1) != 1) break;
      Outgoing& o = out[filled++];
      o.to = addresses_[host];
      o.packet = b;
      dp::encode_relay_header({addresses_[b->peer.sim_host_id()], b->entropy, b->flags},
                              o.header.data());
    }
  }
  stats_.delivered += filled;
  return filled;
}

void FabricRelay::release(std::span<Outgoing> sent) {
  for (Outgoing& o : sent) fabric_.nic(0).free(&o.packet, 1);  // one pool for all NICs
}

}  // namespace spray::sim
