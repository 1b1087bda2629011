// REPS: recycled entropy packet spraying (UET's default multipath scheme).
//
// EVs whose ACKs came back unmarked are known-good; they go into a small ring and are
// reused for the next packets. When the ring is empty the sender explores a fresh
// random EV. ECN-marked, NACKed and timed-out EVs are simply not recycled, so the flow
// drifts away from congested or broken paths without ever naming a path.
//
// Freeze: a timeout suggests a failure rather than congestion. The timed-out EV is
// evicted, and with it every EV whose last good report is older than its own (the
// timed-out EV was good once, so they are no fresher evidence than it). Then for the
// next kFreezePackets transmissions the selector stops exploring
// and cycles through the kFreshEvs EVs that most recently came back good (a second
// ring that is not consumed), so it does not wander onto the failed path while the
// failure lasts. Only with no good EV known at all does it explore during a freeze.
//
// Exploration steers clear of the EVs most recently reported bad (marked, NACKed, lost
// or timed out; forgotten once good again or pushed out by newer ones): a random draw
// that lands on one draws again, a few times at most. Without this a flow keeps finding
// a degraded path anew, and the packet it strands there can decide its completion time.
//
// Retransmissions take the kFreshEvs most recently good EVs (they are what is late or
// lost, so they go where delivery was just seen), and an EV reported ECN-marked or
// NACKed leaves that list at once.
//
// Why only the freshest few of the 32 remembered: when paths die, the older entries are
// evidence from before the failure and half of them may name dead paths. Cycling over
// all 32 sent a retransmission to a dead path about as often as a random draw: with two
// of four paths down, one PSN's twelve tries went eleven times to dead paths and failed
// its PDC (chaos seed 145). The newest entries are ACKs that arrived after the failure,
// so they name live paths.
//
// Why a timeout also drops the older good EVs: when no ACK came since the failure (a
// quiet flow, or a new PDC started from the EVs a closed one found good), even the
// newest entries are from before it. Evicting only the timed-out EV stepped each retry
// down to the next older one, from before the failure too: in an all-to-all over two
// paths, one dying, PSNs failed their PDC with eleven of twelve tries on the dead path.
// Dropping the older ones makes the next try explore instead.
#pragma once

#include <array>

#include "congestion/paths/path_selector.h"
#include "transport/base/rng.h"

namespace spray::paths {

class RepsSelector final : public PathSelector {
 public:
  // The ring's capacity; PathConfig::reps_cache may use less of it. 32 is the default,
  // not the 8 entries UET's REPS names: with 64 EVs and ~60 packets in flight per
  // flow at 400 Gbit/s an 8-entry ring runs dry and the flow explores (sprays) more.
  // Measured with spray-sim on a k=16 fat-tree permutation (2 MB flows): mean FCT/ideal
  // 1.28 and 26,700 resends with 8 entries against 1.15 and 43 with 32; with 8 core
  // links at 10 %, p99 2.87 against 1.28.
  static constexpr size_t kCacheSize = 32;
  static constexpr uint32_t kFreezePackets = 256;
  // The most recently good EVs that a freeze and retransmissions cycle over. Measured in
  // the chaos matrix's path-down cases (seeds 1-60, at 2 retries instead of 12): 5
  // seeds failed a PDC cycling over all of them, 1 with the newest 8 or 16, none with 4.
  // spray-sim's fat-tree with 8 degraded core links: p99 FCT/ideal 1.31 -> 1.24.
  static constexpr size_t kFreshEvs = 4;

  explicit RepsSelector(const PathConfig& c);

  uint16_t next_entropy() override;
  // The kFreshEvs most recently good EVs, newest first, in turn: fresh evidence that the
  // path delivers now, where the recycling ring may hold EVs that were good a while ago.
  uint16_t retransmit_entropy() override;
  void on_feedback(uint16_t entropy, Feedback f) override;
  size_t good_entropies(std::span<uint16_t> out) const override;
  std::string_view name() const override { return "reps"; }

  size_t cached() const { return count_; }
  bool frozen() const { return freeze_left_ > 0; }

 private:
  uint16_t fresh_entropy(size_t& cursor);
  // Removes a timed-out EV from the ring and, from the fresh EVs, it and every EV that
  // last came back good before it did (see the class comment).
  void evict(uint16_t entropy);
  // Removes `entropy` from the fresh EVs; `and_older`: also the EVs older than it there.
  void evict_recent(uint16_t entropy, bool and_older);
  uint16_t explore();
  bool recently_bad(uint16_t entropy) const;
  void forget_bad(uint16_t entropy);
  void note_bad(uint16_t entropy);
  static constexpr int kExploreDraws = 4;

  uint16_t entropy_count_;
  size_t ring_limit_;  // good EVs the ring holds: PathConfig::reps_cache within 1..kCacheSize
  Rng rng_;
  std::array<uint16_t, kCacheSize> ring_{};  // FIFO of known-good EVs, consumed by use
  size_t head_ = 0;                          // oldest entry
  size_t count_ = 0;
  std::array<uint16_t, kCacheSize> recent_{};  // last good EVs, reused during a freeze
  size_t recent_count_ = 0;
  size_t recent_next_ = 0;                  // where the next good EV is written
  size_t freeze_cursor_ = 0;                // turns among the fresh EVs: frozen sends
  size_t retransmit_cursor_ = 0;            // turns among the fresh EVs: retransmissions
  std::array<uint16_t, kCacheSize> bad_{};  // EVs recently reported bad, a ring
  size_t bad_count_ = 0;
  size_t bad_next_ = 0;
  uint32_t freeze_left_ = 0;  // transmissions left in the freeze
};

}  // namespace spray::paths
