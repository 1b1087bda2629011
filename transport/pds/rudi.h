// RudiTracker: the sender side of RUDI, UET's reliable-unordered delivery for
// idempotent operations. No PDC and no PSNs: every packet carries its own packet id,
// the target executes it and answers with a RUDI response echoing that id, and the
// sender retransmits any packet whose response has not come back within the timeout.
// Re-executing a packet is harmless by definition (e.g. writing the same bytes to the
// same place), so the target keeps no state and does no duplicate suppression.
//
// Packet ids are (generation << 16 | slot), so a late response for a slot that has
// since been reused is recognised and ignored.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/base/slot_pool.h"
#include "transport/base/status.h"
#include "transport/base/time.h"
#include "transport/pds/pdc.h"

namespace spray::pds {

struct RudiRetransmit {
  PeerIndex peer = kNoPeer;
  PacketRef ref;
  uint32_t packet_id = 0;
  uint8_t attempt = 0;  // 0 for the first transmission; varies the entropy value

  // Every transmission of a packet takes a different path: a retransmission must be
  // able to leave a path that has failed.
  uint16_t entropy() const {
    return static_cast<uint16_t>((packet_id + attempt * 40503u) * 2654435761u >> 16);
  }
};

struct RudiConfig {
  uint32_t max_outstanding = 1024;  // packets awaiting a response; at most 65536
  Duration timeout = Duration::microseconds(200);
  uint32_t max_retries = 12;
};

class RudiTracker {
 public:
  explicit RudiTracker(const RudiConfig& config);

  // Starts tracking one packet; false when max_outstanding packets are in flight.
  bool track(PeerIndex peer, PacketRef ref, Time now, uint32_t& packet_id);
  // A response arrived: true (and the packet) if it answers a packet still tracked.
  bool on_response(PeerIndex peer, uint32_t packet_id, PacketRef& ref);
  // A NACK (trimmed) for a tracked packet: retransmit it now, without waiting.
  void on_nack(PeerIndex peer, uint32_t packet_id, Time now,
               std::vector<RudiRetransmit>& retransmit);
  // Packets overdue at `now` (the timeout doubles with each retry) are rearmed and listed in
  // `retransmit`; a packet out of retries fails its message (reported once in `failed`), and the
  // message's other packets are forgotten with it.
  void on_timers(Time now, std::vector<RudiRetransmit>& retransmit,
                 std::vector<FailedMessage>& failed);
  uint32_t outstanding() const { return entries_.used(); }

 private:
  struct Entry {
    PeerIndex peer = kNoPeer;
    PacketRef ref;
    Time sent{};
    uint16_t generation = 0;
    uint8_t retries = 0;
  };
  void forget_message(uint32_t message);

  RudiConfig cfg_;
  SlotPool<Entry> entries_;
  std::vector<uint16_t> generations_;  // per slot, survives release
  Time next_scan_{};
};

}  // namespace spray::pds
