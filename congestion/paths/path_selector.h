// The path-selection interface that PDS consults (DESIGN.md decision 5).
//
// A path is named by its entropy value (EV): the number switches hash to pick among
// equal-cost next hops, carried in the UDP source port. One selector per PDC, owned by
// it. PDS asks next_entropy() once per transmitted packet and retransmit_entropy() for
// each retransmission (so it can leave a bad path) and reports what happened to each EV it learns
// about.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace spray::paths {

enum class Feedback : uint8_t {
  // ACKed without an ECN mark, by an ACK that came back on this same EV (the target
  // returns each ACK on the EV of the request that triggered it): the EV's paths work
  // both ways. Also what PDS reports for every acknowledged packet when the datapath
  // does not show the EV an ACK arrived on.
  kGood,
  // ACKed without an ECN mark, by an ACK that came back on another EV: the packet got
  // there, but nothing is known of the way back. An ECMP fabric hashes the two
  // directions apart, so one can be dead while the other works (a link down between a
  // host and one router: the host still reaches the other router, and the far host's
  // answers on that router's paths are lost).
  kDelivered,
  kEcn,      // ACKed, but the packet was ECN marked
  kNack,     // trimmed or refused
  kLost,     // declared lost (RACK): later packets came back first; slow or dropping
  kTimeout,  // never acknowledged: the path may have failed
};

struct PathConfig {
  uint16_t entropy_count = 256;  // EVs used are [0, entropy_count)
  uint64_t seed = 1;             // per-flow seed: fixes the ECMP EV, seeds exploration
  uint16_t reps_cache = 32;      // REPS: good EVs its recycling ring holds, 1..32
};

// Whether the packet got there unmarked (kGood or kDelivered).
constexpr bool delivered(Feedback f) {
  return f == Feedback::kGood || f == Feedback::kDelivered;
}

class PathSelector {
 public:
  virtual ~PathSelector() = default;
  virtual uint16_t next_entropy() = 0;
  // The EV for a retransmission. Its packet was lost or is stuck on the path it took,
  // so a selector that knows good paths should use one of those rather than explore.
  virtual uint16_t retransmit_entropy() { return next_entropy(); }
  virtual void on_feedback(uint16_t entropy, Feedback f) = 0;
  // The EVs that most recently came back good, newest first, at most out.size(); how
  // many were written. PDS keeps them when a PDC closes and reports them good to the
  // next PDC to that peer, which then starts on paths known to deliver instead of
  // exploring blind. A selector that learns nothing writes none.
  virtual size_t good_entropies(std::span<uint16_t> out) const {
    (void)out;
    return 0;
  }
  virtual std::string_view name() const = 0;
};

// Names: "ecmp" (one fixed EV per flow), "ecmp_repath" (one EV at a time, changed on
// ECN), "oblivious" (uniform spraying), "reps" (default), "bitmap" (round robin
// skipping penalised EVs). Returns nullptr for an
// unknown name.
std::unique_ptr<PathSelector> make_path_selector(std::string_view name, const PathConfig& config);

}  // namespace spray::paths
