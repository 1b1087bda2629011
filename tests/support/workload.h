// A randomized, self-checking workload for engines on a simulated cluster.
//
// Generates a mix of untagged sends (directed receives, matched in send order), tagged
// sends (exact tags, some any-source receives), ROD sends, RMA writes and RMA reads
// between random pairs of hosts, with sizes from 0 B up to `max_bytes`. Every payload
// byte is a function of (operation, offset), so verification compares every byte.
// Records each completion and checks: exactly once, the expected status, the expected
// length, intact data, and for ROD the receive order.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <ostream>
#include <string>
#include <vector>

#include "nic_sim/cluster.h"
#include "transport/base/rng.h"

namespace spray {
// Lets gtest print a Status by name.
inline void PrintTo(Status s, std::ostream* os) {
  *os << to_string(s);
}
}  // namespace spray

namespace spray::test_support {

struct WorkloadConfig {
  uint32_t operations = 1000;
  uint64_t max_bytes = 4 << 20;
  double large_fraction = 0.02;  // share of operations drawn from (64 KiB, max_bytes]
  uint64_t seed = 1;
  bool rma = true;
  bool rod = true;
};

class Workload {
 public:
  enum class Kind : uint8_t { kSend, kTaggedSend, kRodSend, kWrite, kRead, kRudiWrite };

  struct Op {
    Kind kind{};
    uint32_t src = 0;
    uint32_t dst = 0;
    uint64_t bytes = 0;
    uint64_t tag = 0;
    uint64_t remote_offset = 0;  // RMA: offset in the target's region
    bool any_source = false;
    bool posted_early = false;  // receive posted before the send starts
    bool issued = false;
    bool recv_asked = false;  // its receive was asked for (post_receive)
    bool recv_posted = false;
    int tx_completions = 0;
    int rx_completions = 0;
    Status tx_status = Status::kOk;
    Status rx_status = Status::kOk;
    uint64_t rx_length = 0;
    std::vector<uint8_t> buffer;  // send source, receive/read destination
    std::vector<uint8_t> recv_buffer;
  };

  static constexpr uint64_t kRegionBytes = 16 << 20;
  static constexpr uint64_t kRegionKey = 0x5eed;
  static constexpr uint64_t kEagerLimit = 64 * 1024;  // the default rendezvous threshold

  Workload(sim::Cluster& cluster, const WorkloadConfig& cfg);

  // Issues what it can, posts late receives, polls completions. Returns true when every
  // operation has completed on both sides.
  bool pump();
  // Checks every outcome; records gtest failures with `label` (which names the seed).
  void verify(const std::string& label) const;

  // Lists operations still incomplete (kind, hosts, size, completions seen), for
  // failure messages.
  std::string describe_pending(size_t max_lines = 10) const;

  uint64_t bytes_moved() const { return bytes_moved_; }
  const std::vector<Op>& ops() const { return ops_; }
  // post_recv calls that said kAgain (the posted-receive table was full).
  uint64_t receives_refused() const { return receives_refused_; }

  static uint8_t pattern(uint64_t op, uint64_t offset) {
    return static_cast<uint8_t>((op * 131) ^ (offset * 7) ^ (offset >> 9));
  }

 private:
  void issue(uint32_t index);
  // Asks for op `index`'s receive; it is posted at once, or after the receives asked for
  // before it on that host once the posted-receive table has room (post_recv kAgain).
  void post_receive(uint32_t index);
  void post_waiting_receives(uint32_t host);
  void poll(uint32_t host);
  static bool complete(const Op& op) {
    const bool needs_rx =
        op.kind != Kind::kWrite && op.kind != Kind::kRead && op.kind != Kind::kRudiWrite;
    return op.tx_completions >= 1 && (!needs_rx || op.rx_completions >= 1);
  }

  sim::Cluster& cluster_;
  WorkloadConfig cfg_;
  std::vector<Op> ops_;
  std::vector<std::vector<uint8_t>> regions_;     // per host, registered for RMA
  std::vector<std::vector<uint32_t>> rod_order_;  // per (dst): ROD ops in send order
  std::vector<std::vector<uint32_t>> rod_seen_;   // per (dst): ROD receives as completed
  // Per host: receives asked for but not yet posted (its table was full), in order.
  std::vector<std::deque<uint32_t>> unposted_;
  uint32_t next_issue_ = 0;
  uint32_t next_late_post_ = 0;
  uint64_t bytes_moved_ = 0;
  uint64_t receives_refused_ = 0;
  uint32_t done_ = 0;
};

}  // namespace spray::test_support
