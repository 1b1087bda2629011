// IdleYield: when an application that polls a CQ in a loop should give its CPU away.
//
// Under manual progress the engine runs only inside the application's calls. An
// application that spins on fi_cq_read therefore keeps its core for a whole scheduler
// time slice (milliseconds) even when it only waits for a peer, and a peer on the same
// core (more processes or threads than cores, the normal case in CI) cannot run to answer
// it meanwhile: a window-limited stream then moves one congestion window per pair of time
// slices. Kernel TCP does not suffer this, since the receiving kernel acknowledges in
// softirq whoever is scheduled. Between two threads on one core (spray-fi-rate
// --shared-core, 1 MiB messages, 2026-11-26) spray over UDP streamed 172 MB/s against
// libfabric's tcp's 524 before fi_cq_read yielded, and 2452 after (3338 with a yield every
// 16 idle reads); over shared memory 2095 before and 9697 after.
//
// So after `after` consecutive polls that found no completion and moved no packet, the
// poller calls sched_yield(): the peer runs at once instead of at the end of the slice.
// When nothing else wants the CPU, sched_yield returns at once; its cost is one system
// call per `after` idle polls, each of which is already a system call (the datapath's
// receive). A ping-pong's waiting side polls about ten times per round trip here (8 B
// over udp: 12.5 us a round trip, a poll a system call of ~1.2 us), fewer than the
// default 64, so latency is untouched (12.5-12.6 us with it, 12.3-12.6 without). PSM3
// (libfabric's psm3 provider) does the same with PSM3_YIELD_SPIN_COUNT, its "spin poll
// iterations before yield".
#pragma once

#include <cstdint>

namespace spray::fi {

class IdleYield {
 public:
  // after: idle polls in a row before a yield; 0 never yields.
  explicit IdleYield(uint32_t after) : after_(after) {}

  // One poll: `busy` when it found a completion or moved a packet. True when the caller
  // should yield now (after releasing its locks); the count then starts again.
  bool should_yield(bool busy) {
    if (busy || after_ == 0) {
      idle_polls_ = 0;
      return false;
    }
    if (++idle_polls_ < after_) return false;
    idle_polls_ = 0;
    return true;
  }

 private:
  uint32_t after_;
  uint32_t idle_polls_ = 0;  // consecutive idle polls since the last yield or busy poll
};

}  // namespace spray::fi
