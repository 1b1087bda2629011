// REPS: recycled entropy packet spraying (UET's default multipath scheme).
//
// EVs whose packets were acknowledged unmarked are known-good; they go into a small ring
// and are reused for the next packets. When the ring is empty the sender explores a fresh
// random EV. ECN-marked, NACKed and timed-out EVs are simply not recycled, so the flow
// drifts away from congested or broken paths without ever naming a path.
//
// Freeze: a timeout suggests a failure rather than congestion. The timed-out EV is
// evicted, and with it every EV whose last good report is older than its own (the
// timed-out EV was good once, so they are no fresher evidence than it). Then for the
// next kFreezePackets transmissions the selector stops exploring and cycles through the
// kFreshEvs EVs that most recently came back good both ways (below; a list that is not
// consumed), so it does not wander onto the failed path while the failure lasts. With
// none known it cycles over the newest delivered ones, and only with none of those
// either does it explore during a freeze.
//
// Exploration steers clear of the EVs most recently reported bad (marked, NACKed, lost
// or timed out; forgotten once good again or pushed out by newer ones): a random draw
// that lands on one draws again, a few times at most. Without this a flow keeps finding
// a degraded path anew, and the packet it strands there can decide its completion time.
//
// Retransmissions take the kFreshEvs most recently delivered EVs (they are what is late
// or lost, so they go where delivery was just seen), and an EV reported ECN-marked or
// NACKed leaves that list at once.
//
// Good both ways or delivered: the target returns each ACK on the EV of the packet that
// triggered it, so an ACK that arrives on that EV shows the EV's paths work both ways
// (kGood); the other packets it covers are known only to have got there (kDelivered).
// Both are recycled and both are resends' choice; a freeze keeps to EVs good both ways
// while it knows any.
// Why the freeze: with a link down between a host and one of two ECMP routers, every EV
// still reaches the far host, but about half of the far host's answers hash onto the
// router that cannot reach it. A freeze over the newest delivered EVs cycled over four
// of which about half lost every ACK, and the receiver, acknowledging every 16th packet,
// answered on the same one of the four each time. Each timeout began another such
// freeze, blaming the EV of the oldest packet, which had got there. 32 MiB over a
// simulated fabric took 63.5 ms and 249 timeouts against 2.7 ms and none with nothing
// dead (tests/transport/engine/one_way_path_loss_test.cc, seed 2), and the kernel-UDP
// link-down test (tests/integration/netns_multipath.sh) with its CPUs contended took
// 11-51 s and 3000-4500 timeouts against 2-3 s.
// Why not resends: taking them from EVs good both ways made spray-sim's fat-tree with 8
// core links at 10 % worse (seeds 1-6: mean FCT/ideal 1.238 -> 1.279, p99 2.41 -> 2.59).
// Probably because an ACK's trigger is the packet of its batch that arrived last, which
// favours slow paths. A resend is answered by several ACK copies on different EVs
// anyway (Pds::emit_ack), so its way back matters less.
// Why a freeze falls back to delivered EVs rather than explore: a timeout also drops
// the EVs good both ways that are older than the one it blames, often all of them (a
// few ACKs' worth), and exploring sent half the frozen packets to the dead path where a
// path had died both ways. README's REPS all-to-all with one of two paths dying failed
// operations in 2 of seeds 1-2000 so (53 and 834), none with the fallback.
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
  // The kFreshEvs most recently delivered EVs, newest first, in turn: fresh evidence that the
  // path delivers now, where the recycling ring may hold EVs that were good a while ago.
  uint16_t retransmit_entropy() override;
  void on_feedback(uint16_t entropy, Feedback f) override;
  size_t good_entropies(std::span<uint16_t> out) const override;
  std::string_view name() const override { return "reps"; }

  size_t cached() const { return count_; }
  bool frozen() const { return freeze_left_ > 0; }

 private:
  // The EVs last reported good of one kind, newest last; at most kCacheSize.
  class RecentEvs {
   public:
    void push(uint16_t entropy);
    size_t size() const { return count_; }
    uint16_t newest(size_t i) const {  // i < size(); 0 is the newest
      return evs_[(next_ + kCacheSize - 1 - i) % kCacheSize];
    }
    // Removes `entropy`; `and_older`: also every EV that came before it.
    void evict(uint16_t entropy, bool and_older);

   private:
    std::array<uint16_t, kCacheSize> evs_{};
    size_t count_ = 0;
    size_t next_ = 0;  // where the next EV is written
  };

  // Takes the next turn among the kFreshEvs newest of `evs`, newest first. Requires
  // evs.size() > 0.
  static uint16_t fresh_entropy(const RecentEvs& evs, size_t& cursor);
  // Removes a timed-out EV from the ring and, from both lists of recent EVs, it and every
  // EV that last came back good before it did (see the class comment).
  void evict(uint16_t entropy);
  // Removes `entropy` from both lists of recent EVs; `and_older`: also the EVs older than
  // it there.
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
  RecentEvs delivered_;           // EVs last reported kGood or kDelivered: resends' choice
  RecentEvs both_ways_;           // EVs last reported kGood: a freeze's choice
  size_t freeze_cursor_ = 0;      // turns among the fresh EVs: frozen sends
  size_t retransmit_cursor_ = 0;  // turns among the fresh EVs: retransmissions
  std::array<uint16_t, kCacheSize> bad_{};  // EVs recently reported bad, a ring
  size_t bad_count_ = 0;
  size_t bad_next_ = 0;
  uint32_t freeze_left_ = 0;  // transmissions left in the freeze
};

}  // namespace spray::paths
