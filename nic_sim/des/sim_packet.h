// SimPacket: a header-only packet of the simulator (DESIGN.md decision 2): the PDS
// header the real transport produced, a stand-in for the SES header (which flow and
// how many payload bytes), and the size it has on the wire. No payload bytes exist.
//
// Packets live in a PacketStore and are named by index; queues link them through
// `next`, so moving a packet between queues never allocates.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "transport/wire/pds_header.h"

namespace spray::des {

inline constexpr uint32_t kNoPacket = 0xffffffff;
// Headers on the wire of every packet: Ethernet, IP, UDP, PDS and SES. A trimmed packet
// keeps exactly these; control packets are this long.
inline constexpr uint32_t kHeaderBytes = 64;

struct SimPacket {
  uint32_t next = kNoPacket;  // queue link
  uint32_t src = 0;           // hosts
  uint32_t dst = 0;
  uint32_t wire_bytes = 0;
  uint32_t flow = 0;           // requests: the flow (SES message) it belongs to
  uint32_t payload_bytes = 0;  // requests: payload it carries (kept when trimmed)
  uint16_t entropy = 0;
  bool ecn = false;
  bool trimmed = false;
  std::variant<wire::PdsRequest, wire::PdsAck, wire::PdsNack, wire::PdsCtrl> header;

  bool is_request() const { return std::holds_alternative<wire::PdsRequest>(header); }
};

class PacketStore {
 public:
  uint32_t alloc() {
    if (free_.empty()) {
      packets_.emplace_back();
      ++live_;
      return static_cast<uint32_t>(packets_.size() - 1);
    }
    const uint32_t i = free_.back();
    free_.pop_back();
    packets_[i] = SimPacket{};
    ++live_;
    return i;
  }
  void release(uint32_t i) {
    free_.push_back(i);
    --live_;
  }
  SimPacket& operator[](uint32_t i) { return packets_[i]; }
  size_t live() const { return live_; }
  size_t memory_bytes() const {
    return packets_.capacity() * sizeof(SimPacket) + free_.capacity() * sizeof(uint32_t);
  }

 private:
  std::vector<SimPacket> packets_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace spray::des
