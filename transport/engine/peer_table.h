// PeerTable: the engine's dense numbering of the network addresses it talks to.
//
// PDS and SES index per-peer state by PeerIndex; the datapath speaks NetAddr. Lookup
// by address happens once per received packet, so it is a fixed-capacity hash map
// (verified against the stored address, so a hash collision cannot alias two peers).
#pragma once

#include <optional>
#include <vector>

#include "transport/base/flat_map.h"
#include "transport/datapath/net_addr.h"
#include "transport/pds/pdc.h"

namespace spray::engine {

using pds::PeerIndex;

class PeerTable {
 public:
  explicit PeerTable(uint32_t capacity) : capacity_(capacity), by_addr_(capacity) {
    addrs_.reserve(capacity);
  }

  // The index of `addr`, adding it if new. kNoPeer when the table is full or the
  // address collides with a different one already present.
  PeerIndex insert(const dp::NetAddr& addr) {
    if (auto found = find(addr)) return *found;
    if (addrs_.size() >= capacity_ || by_addr_.find(addr.hash())) return pds::kNoPeer;
    const auto index = static_cast<PeerIndex>(addrs_.size());
    addrs_.push_back(addr);
    by_addr_.insert(addr.hash(), index);
    return index;
  }

  std::optional<PeerIndex> find(const dp::NetAddr& addr) const {
    const auto found = by_addr_.find(addr.hash());
    if (found && addrs_[*found] == addr) return *found;
    return std::nullopt;
  }

  const dp::NetAddr& address(PeerIndex p) const { return addrs_[p]; }
  uint32_t size() const { return static_cast<uint32_t>(addrs_.size()); }
  size_t memory_bytes() const {
    return addrs_.capacity() * sizeof(dp::NetAddr) + by_addr_.memory_bytes();
  }

 private:
  uint32_t capacity_;
  std::vector<dp::NetAddr> addrs_;
  FlatMap by_addr_;
};

}  // namespace spray::engine
