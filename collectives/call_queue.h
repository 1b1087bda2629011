// CallQueue: runs a communicator's collective calls one at a time, in the order they
// were started, so non-blocking calls (a CollectiveRequest to test or wait) and blocking
// ones can be mixed the way MPI allows.
//
// A blocking call when nothing is queued runs at once on the caller's thread (no
// hand-off, so small calls keep their latency). Otherwise calls go to a worker thread,
// started on first use, which runs them in order; a blocking call queued behind others
// waits for its own turn. Only one call touches the fabric at a time, which is what the
// endpoint (FI_THREAD_DOMAIN) requires. Waiting threads sleep on a condition variable:
// the worker itself waits in the fabric, so nothing here burns a core.
//
// Errors: a call that throws completes its request with that error; every later call
// fails at once with the first error (after one failure the peers' state is unknown,
// so the communicator must be rebuilt). The queue is driven by one user thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace spray::coll {

class CallQueue;

// The handle of a started collective call. Buffers passed to the call must stay valid
// and untouched until test() returns true or wait() returns.
class CollectiveRequest {
 public:
  CollectiveRequest() = default;  // an empty request is complete
  // True once the call is complete; rethrows its CollectiveError if it failed.
  bool test();
  // Blocks until the call is complete; rethrows its error.
  void wait();

 private:
  friend class CallQueue;
  struct State;
  explicit CollectiveRequest(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class CallQueue {
 public:
  CallQueue() = default;
  // Runs what is still queued (peers expect those calls), then stops the worker.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues `call` to run after everything started before it.
  CollectiveRequest start(std::function<void()> call);
  // Runs `call` after everything started before it and returns when it is done;
  // rethrows its error.
  void run(const std::function<void()>& call);

 private:
  struct Job {
    std::function<void()> call;
    std::shared_ptr<CollectiveRequest::State> state;
  };
  void worker_loop();
  // Runs one call, recording the first failure. Called without the lock held.
  std::exception_ptr execute(const std::function<void()>& call);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool busy_ = false;  // a call is running (on the worker or inline)
  bool stopping_ = false;
  std::exception_ptr first_error_;
  std::thread worker_;
};

}  // namespace spray::coll
