// SimPacket: a header-only packet of the simulator (DESIGN.md decision 2): the PDS
// header and the SES header bytes the sender's real PDS and SES wrote, how many payload
// bytes it stands for, and its size on the wire. No payload bytes exist.
//
// Packets live in a PacketStore and are named by index; queues link them through
// `next`, so moving a packet between queues never allocates.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "transport/ses/ses.h"
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
  uint32_t payload_bytes = 0;  // requests: payload it stands for (kept when trimmed)
  uint16_t entropy = 0;
  bool ecn = false;
  bool trimmed = false;
  // Requests: the SES header, as encoded by the sender's SES (no payload follows it).
  uint8_t ses_bytes = 0;
  wire::NextHeader ses_next{};
  std::array<uint8_t, ses::kMaxSesHeaderBytes> ses{};
  std::variant<wire::PdsRequest, wire::PdsAck, wire::PdsNack, wire::PdsCtrl> header;

  bool is_request() const { return std::holds_alternative<wire::PdsRequest>(header); }
};

// Packets in chunks of kChunk: growing never moves (or transiently doubles) the ones
// already stored, which at hundreds of thousands of live packets would set the peak
// memory of a run.
class PacketStore {
 public:
  uint32_t alloc() {
    uint32_t i = 0;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = size_++;
      if (i / kChunk == chunks_.size()) chunks_.push_back(std::make_unique<SimPacket[]>(kChunk));
    }
    (*this)[i] = SimPacket{};
    ++live_;
    return i;
  }
  void release(uint32_t i) {
    free_.push_back(i);
    --live_;
  }
  SimPacket& operator[](uint32_t i) { return chunks_[i / kChunk][i % kChunk]; }
  size_t live() const { return live_; }
  size_t memory_bytes() const {
    return chunks_.size() * kChunk * sizeof(SimPacket) + free_.capacity() * sizeof(uint32_t);
  }

 private:
  static constexpr uint32_t kChunk = 4096;
  std::vector<std::unique_ptr<SimPacket[]>> chunks_;
  std::vector<uint32_t> free_;
  uint32_t size_ = 0;  // packets ever allocated (free or live)
  size_t live_ = 0;
};

}  // namespace spray::des
