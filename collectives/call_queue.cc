#include "collectives/call_queue.h"

#include "collectives/fabric_link.h"

namespace spray::coll {

struct CollectiveRequest::State {
  std::mutex mutex;
  std::condition_variable done_signal;
  bool done = false;
  std::exception_ptr error;

  void finish(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(e);
    }
    done_signal.notify_all();
  }
};

bool CollectiveRequest::test() {
  if (!state_) return true;
  std::unique_lock lock(state_->mutex);
  if (!state_->done) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

void CollectiveRequest::wait() {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->done_signal.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

CallQueue::~CallQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::exception_ptr CallQueue::execute(const std::function<void()>& call) {
  std::exception_ptr earlier;
  {
    std::lock_guard lock(mutex_);
    earlier = first_error_;
  }
  if (earlier) {
    try {
      std::rethrow_exception(earlier);
    } catch (const std::exception& e) {
      return std::make_exception_ptr(
          CollectiveError(std::string("the communicator failed earlier: ") + e.what()));
    }
  }
  try {
    call();
    return nullptr;
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!first_error_) first_error_ = std::current_exception();
    return std::current_exception();
  }
}

CollectiveRequest CallQueue::start(std::function<void()> call) {
  auto state = std::make_shared<CollectiveRequest::State>();
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(Job{std::move(call), state});
    if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  }
  wake_.notify_all();
  return CollectiveRequest(std::move(state));
}

void CallQueue::run(const std::function<void()>& call) {
  {
    std::unique_lock lock(mutex_);
    if (!busy_ && jobs_.empty()) {
      busy_ = true;  // nothing ahead of us: run here, without a hand-off
      lock.unlock();
      const std::exception_ptr error = execute(call);
      lock.lock();
      busy_ = false;
      lock.unlock();
      wake_.notify_all();  // a call queued meanwhile may run now
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  start(call).wait();
}

void CallQueue::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return (!busy_ && !jobs_.empty()) || (stopping_ && jobs_.empty()); });
    if (jobs_.empty()) return;  // stopping, nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    job.state->finish(execute(job.call));
    lock.lock();
    busy_ = false;
  }
}

}  // namespace spray::coll
