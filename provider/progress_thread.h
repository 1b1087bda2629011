// ProgressThread: FI_PROGRESS_AUTO. One thread per domain (opened with data_progress
// FI_PROGRESS_AUTO) drives every endpoint of the domain as fi_cq_read would, so
// transfers move and complete while the application computes or sleeps without calling
// into the provider.
//
// When a pass delivered completions it wakes what the application may be blocked on:
// fi_cq_sread / fi_cntr_wait wait on Domain::completions_delivered under auto progress,
// and the wait fds of FI_WAIT_FD CQs and counters are signalled (the thread, not the
// application, drained the sockets those fds watch). When nothing moved it sleeps on
// every endpoint's wait descriptor for at most 1 ms (retransmission timers need passes;
// 100 us sleeps for endpoints without a descriptor, DPDK).
//
// Ownership: the domain owns the thread; destroying it (domain close) stops and joins
// it. It takes the domain mutex for each pass, like any entry point, but sleeps in
// poll() without it, on descriptors gathered under it: a poll holds its sockets open, so
// closing an endpoint waits out the poll in flight (finish_poll) before the endpoint's
// sockets are closed, or their ports would stay bound for up to a sleep after fi_close.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace spray::fi {

struct Domain;

class ProgressThread {
 public:
  explicit ProgressThread(Domain& domain);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

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

 private:
  void run();
  void start_pass();

  Domain& domain_;
  std::atomic<bool> stop_{false};
  int wake_fd_ = -1;  // eventfd in every poll: finish_poll and the destructor write it
  std::mutex passes_mutex_;
  std::condition_variable pass_started_;
  uint64_t passes_ = 0;  // passes started (guarded by passes_mutex_)
  std::thread thread_;   // last: started once the members above exist
};

}  // namespace spray::fi
