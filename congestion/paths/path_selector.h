// The path-selection interface that PDS consults (DESIGN.md decision 5).
//
// A path is named by its entropy value (EV): the number switches hash to pick among
// equal-cost next hops, carried in the UDP source port. One selector per PDC, owned by
// it. PDS asks next_entropy() once per transmitted packet (a retransmission asks again,
// so it can leave a bad path) and reports what happened to each EV it learns about.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

namespace spray::paths {

enum class Feedback : uint8_t {
  kGood,     // ACKed without an ECN mark
  kEcn,      // ACKed, but the packet was ECN marked
  kNack,     // trimmed or refused
  kTimeout,  // never acknowledged: the path may have failed
};

struct PathConfig {
  uint16_t entropy_count = 256;  // EVs used are [0, entropy_count)
  uint64_t seed = 1;             // per-flow seed: fixes the ECMP EV, seeds exploration
};

class PathSelector {
 public:
  virtual ~PathSelector() = default;
  virtual uint16_t next_entropy() = 0;
  virtual void on_feedback(uint16_t entropy, Feedback f) = 0;
  virtual std::string_view name() const = 0;
};

// Names: "ecmp" (one fixed EV per flow), "oblivious" (uniform spraying), "reps"
// (default), "bitmap" (round robin skipping penalised EVs). Returns nullptr for an
// unknown name.
std::unique_ptr<PathSelector> make_path_selector(std::string_view name, const PathConfig& config);

}  // namespace spray::paths
