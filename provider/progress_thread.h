// ProgressThread: a domain's background progress, in one of two modes.
//
// kAlways is FI_PROGRESS_AUTO: the thread drives every endpoint of the domain as
// fi_cq_read would, so transfers move and complete while the application computes or
// sleeps without calling into the provider.
//
// kWhenAway stands by under FI_PROGRESS_MANUAL. The application drives progress; the
// thread only looks, every `away` period, whether it did (Domain::application_passes
// moved) and, when a whole period went by without a pass, drives the endpoints itself
// until the application calls again. Why: a reliable transport acknowledges in software,
// so a process that stops calling (it computes, or blocks in a call of another library:
// fi_pingpong waits on its TCP control socket after its last receive) acknowledges
// nothing. A peer whose last packet's ACK was lost then resends it into silence and,
// after its retries (about 4 s by default), fails the send with "peer unreachable": one
// loaded CI run lost fi_pingpong's 64 KiB round so, the client blocked in read() while
// the server resent one packet 16 times. Kernel TCP has no such gap (the kernel
// acknowledges for a sleeping process), nor have NICs that acknowledge in hardware; PSM3
// keeps a receive thread for it. While the application calls, the thread wakes once a
// period and touches no lock; away, it costs a pass per packet or per millisecond.
//
// A pass that delivered completions wakes what the application may be blocked on:
// fi_cq_sread / fi_cntr_wait wait on Domain::completions_delivered under auto progress,
// and the wait fds of FI_WAIT_FD CQs and counters are signalled (the thread, not the
// application, drained the sockets those fds watch). When nothing moved, the thread
// sleeps on every endpoint's wait descriptor for at most 1 ms while anything is in
// flight (retransmission timers need passes), else (kWhenAway) for a period; 100 us
// sleeps for endpoints without a descriptor (DPDK).
//
// Ownership: the domain owns the thread; destroying it (domain close) stops and joins
// it. It takes the domain mutex for each pass, like any entry point, but sleeps in
// poll() without it, on descriptors gathered under it: a poll holds its sockets open, so
// closing an endpoint waits out the poll in flight (finish_poll) before the endpoint's
// sockets are closed, or their ports would stay bound for up to a sleep after fi_close.
// Threads of domains still open when the provider is unloaded (fi_fini at exit) are
// stopped first (stop_all): their code is about to be unmapped. fork() waits for the
// passes under way (their domain mutexes would stay locked in the child); a child has
// none of its parent's threads, and does not wait for them.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace spray::fi {

struct Domain;

class ProgressThread {
 public:
  enum class Mode { kAlways, kWhenAway };

  // `away`: kWhenAway's period (see above); unused by kAlways.
  ProgressThread(Domain& domain, Mode mode, std::chrono::milliseconds away);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // FI_PROGRESS_AUTO: the thread, not the application, drains the sockets, so blocking
  // reads wait for its word (Domain::completions_delivered) rather than on a socket.
  bool always() const { return mode_ == Mode::kAlways; }

  // Returns once the thread has started a pass after this call (so a poll it was in has
  // ended), waking it for that: true then; false if no pass started within
  // kFinishPollBound. Called without the domain mutex by a closer that has already taken
  // its endpoint out of the domain's list.
  bool finish_poll();

  // How long finish_poll waits for the woken thread, which needs only to be scheduled.
  // The bound only keeps a close from hanging should the thread ever stop starting
  // passes. It was 100 ms, the likeliest cause of 1 endpoint in 200 keeping its port in
  // one loaded CI run (2026-11-26, ASan); ep_close warns when the bound is hit.
  static constexpr std::chrono::milliseconds kFinishPollBound{2000};

  // Stops and joins every thread still running (the provider's cleanup, and its
  // unloading). Their domains are left without background progress. A thread that does
  // not end within kExitBound is left behind instead of joined: see stop_all.
  static void stop_all();
  static constexpr std::chrono::milliseconds kExitBound{500};

 private:
  void run();
  void start_pass();
  // kWhenAway: whether the application passed since the last look (`seen` updated).
  bool application_passed(uint64_t& seen) const;
  // Sleeps in poll() until `timeout` passes or finish_poll / stop wakes the thread.
  void sleep_until_woken(std::chrono::milliseconds timeout);
  void wake_up();        // ends the thread's sleep (eventfd written)
  void clear_wake_up();  // the eventfd read back, after a poll saw it readable
  // Sets stop_ and joins the thread (or forgets it, in a child of fork). With a `bound`,
  // a thread that has not ended within it is detached instead: false then.
  bool halt(std::optional<std::chrono::milliseconds> bound = std::nullopt);

  Domain& domain_;
  const Mode mode_;
  const std::chrono::milliseconds away_;
  std::atomic<bool> stop_{false};
  bool forked_away_ = false;  // in a child of fork(): the thread is the parent's
  int wake_fd_ = -1;          // eventfd in every poll: finish_poll and halt write it
  std::mutex passes_mutex_;
  std::condition_variable pass_started_;
  uint64_t passes_ = 0;  // passes started (guarded by passes_mutex_)
  bool ended_ = false;   // run() has returned (guarded by passes_mutex_)
  // The descriptors a sleep polls, the thread's own. A member rather than a local, so that
  // in a child of fork(), which has no copy of the thread, it is not a leak.
  std::vector<pollfd> fds_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace spray::fi
