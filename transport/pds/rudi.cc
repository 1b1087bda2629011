#include "transport/pds/rudi.h"

#include <algorithm>

namespace spray::pds {

RudiTracker::RudiTracker(const RudiConfig& config)
    : cfg_(config),
      entries_(std::min<uint32_t>(config.max_outstanding, 65536)),
      generations_(entries_.capacity(), 0) {}

bool RudiTracker::track(PeerIndex peer, PacketRef ref, Time now, uint32_t& packet_id) {
  const auto slot = entries_.acquire();
  if (!slot) return false;
  const uint16_t gen = ++generations_[*slot];
  entries_[*slot] = Entry{peer, ref, now, gen, 0};
  packet_id = (uint32_t{gen} << 16) | *slot;
  return true;
}

bool RudiTracker::on_response(PeerIndex peer, uint32_t packet_id, PacketRef& ref) {
  const uint32_t slot = packet_id & 0xffff;
  if (!entries_.in_use(slot)) return false;
  const Entry& e = entries_[slot];
  if (e.generation != (packet_id >> 16) || e.peer != peer) return false;
  ref = e.ref;
  entries_.release(slot);
  return true;
}

void RudiTracker::on_nack(PeerIndex peer, uint32_t packet_id, Time now,
                          std::vector<RudiRetransmit>& retransmit) {
  const uint32_t slot = packet_id & 0xffff;
  if (!entries_.in_use(slot)) return;
  Entry& e = entries_[slot];
  if (e.generation != (packet_id >> 16) || e.peer != peer || e.retries >= cfg_.max_retries) return;
  ++e.retries;
  e.sent = now;
  retransmit.push_back({e.peer, e.ref, packet_id, e.retries});
}

void RudiTracker::forget_message(uint32_t message) {
  for (uint32_t i = 0; i < entries_.capacity(); ++i) {
    if (entries_.in_use(i) && entries_[i].ref.message == message) entries_.release(i);
  }
}

void RudiTracker::on_timers(Time now, std::vector<RudiRetransmit>& retransmit,
                            std::vector<FailedMessage>& failed) {
  // A scan costs O(max_outstanding), so it runs at most four times per timeout.
  if (entries_.used() == 0 || now < next_scan_) return;
  next_scan_ = now + cfg_.timeout / 4;
  for (uint32_t i = 0; i < entries_.capacity(); ++i) {
    if (!entries_.in_use(i)) continue;
    Entry& e = entries_[i];
    if (now - e.sent < cfg_.timeout * (int64_t{1} << std::min<uint8_t>(e.retries, 6))) continue;
    if (++e.retries > cfg_.max_retries) {
      const uint32_t message = e.ref.message;
      failed.push_back({message, Status::kPeerUnreachable});
      forget_message(message);
      continue;
    }
    e.sent = now;
    retransmit.push_back({e.peer, e.ref, (uint32_t{e.generation} << 16) | i, e.retries});
  }
}

}  // namespace spray::pds
