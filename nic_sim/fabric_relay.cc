#include "nic_sim/fabric_relay.h"

#include <algorithm>
#include <cstring>

namespace spray::sim {

void apply_outages(Fabric& fabric, const std::vector<PathOutage>& outages, Duration since_start) {
  for (const PathOutage& o : outages) fabric.set_path_up(o.path, true);
  for (const PathOutage& o : outages) {
    if (since_start >= o.from && since_start < o.until) fabric.set_path_up(o.path, false);
  }
}

FabricRelay::FabricRelay(const FabricConfig& config, Duration host_idle)
    : fabric_(config), host_idle_(host_idle) {
  addresses_.reserve(config.hosts);
  last_active_.reserve(config.hosts);
  hosts_.reserve(config.hosts);
}

bool FabricRelay::reclaimable(uint32_t host, Time now) const {
  const Time last = last_active_[host];
  if (now - last < host_idle_) return false;
  const Duration transit = fabric_.longest_transit();
  return transit.ps < INT64_MAX - last.ps && last + transit <= drained_until_;
}

bool FabricRelay::host_of(const dp::NetAddr& a, Time now, uint32_t& host) {
  if (const auto it = hosts_.find(a); it != hosts_.end()) {
    host = it->second;
    last_active_[host] = std::max(last_active_[host], now);
    return true;
  }
  if (addresses_.size() < fabric_.hosts()) {
    host = static_cast<uint32_t>(addresses_.size());
    addresses_.push_back(a);
    last_active_.push_back(now);
    hosts_.emplace(a, host);
    return true;
  }
  // Every host is taken: the one idle longest, if it may go. A scan, but only for an
  // address seen for the first time on a full fabric.
  const auto oldest = std::min_element(last_active_.begin(), last_active_.end());
  host = static_cast<uint32_t>(oldest - last_active_.begin());
  if (!reclaimable(host, now)) return false;
  hosts_.erase(addresses_[host]);
  addresses_[host] = a;
  last_active_[host] = now;
  hosts_.emplace(a, host);
  ++stats_.hosts_reclaimed;
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
  // The packet enters at `now`, or later if the fabric has been moved past it already
  // (the daemon collects a little ahead of its clock).
  const Time entry = std::max(now, fabric_.now());
  if (!host_of(from, entry, src) || !host_of(h.other, entry, dst)) {
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
  // Every ring is empty and everything due by `now` is in one: drained up to `now`.
  if (filled < out.size()) drained_until_ = std::max(drained_until_, now);
  return filled;
}

void FabricRelay::release(std::span<Outgoing> sent) {
  for (Outgoing& o : sent) fabric_.nic(0).free(&o.packet, 1);  // one pool for all NICs
}

}  // namespace spray::sim
