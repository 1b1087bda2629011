// A domain's background progress thread (see progress_thread.h).
#include "provider/progress_thread.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#include "provider/endpoint.h"
#include "transport/datapath/clock.h"

namespace spray::fi {
namespace {

// A CQ or counter that just received completions: whoever blocks on it re-reads.
template <class T>
void wake(T* object) {
  if (object && object->wait_fd) object->wait_fd->signal();
}

// Every running thread, for stop_all and fork. Never destroyed: at exit the threads may
// outlive the library's static objects, and this is what stops them.
struct Registry {
  std::timed_mutex mutex;  // timed: see stop_all
  std::vector<ProgressThread*> threads;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

ProgressThread::ProgressThread(Domain& domain, Mode mode, std::chrono::milliseconds away)
    : domain_(domain),
      mode_(mode),
      away_(away),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  static std::once_flag hooks;
  std::call_once(hooks, [] {
    // Registered after every static object the threads use was built, so exit() runs it
    // before their destructors; fi_fini's cleanup comes too late for that.
    std::atexit(stop_all);
    // fork() copies no thread, but it copies locks as they are: a domain mutex held by a
    // pass at that moment would stay locked in the child for good (its first fi_close
    // hung so). So the fork waits for the passes under way, and takes the registry with
    // them; in the child, each of the parent's threads is only a record.
    const auto lock_all = [] {
      registry().mutex.lock();
      for (ProgressThread* t : registry().threads) t->domain_.mutex.lock();
    };
    const auto unlock_all = [] {
      for (ProgressThread* t : registry().threads) t->domain_.mutex.unlock();
      registry().mutex.unlock();
    };
    const auto in_child = [] {
      for (ProgressThread* t : registry().threads) {
        t->forked_away_ = true;
        t->domain_.mutex.unlock();
      }
      registry().mutex.unlock();
    };
    ::pthread_atfork(lock_all, unlock_all, in_child);
  });
  std::lock_guard lock(registry().mutex);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {  // no thread to be had: nothing registered, nothing left open
    if (wake_fd_ >= 0) ::close(wake_fd_);
    throw;
  }
  registry().threads.push_back(this);
}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(registry().mutex);
    std::erase(registry().threads, this);
    halt();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool ProgressThread::halt(std::optional<std::chrono::milliseconds> bound) {
  if (!thread_.joinable()) return true;
  stop_.store(true, std::memory_order_relaxed);
  if (forked_away_) {
    // The parent's thread is not here, and neither join nor detach can name it (both fail
    // with ESRCH): the handle is forgotten, so that destroying it does not terminate us.
    new (&thread_) std::thread();
    return true;
  }
  wake_up();
  if (bound) {
    std::unique_lock lock(passes_mutex_);
    if (!pass_started_.wait_for(lock, *bound, [&] { return ended_; })) {
      thread_.detach();
      return false;
    }
  }
  thread_.join();  // at most one pass away
  return true;
}

// At exit() the threads must stop before the objects they use are destroyed, but exit()
// may come from a signal handler that interrupted a thread inside the provider, holding
// a domain mutex that will never be released; a progress thread waiting for that mutex
// never ends, and joining it hung the process for good (libfabric's psm provider loads
// libinfinipath, whose SIGTERM handler calls exit(): Open MPI's mpirun and `timeout`
// stop processes with SIGTERM; reproduced by SIGTERM to provider_test in a post loop).
// Such a thread is left behind, blocked, and dies with the process. For the same reason
// the registry's mutex is waited for only so long.
void ProgressThread::stop_all() {
  std::unique_lock lock(registry().mutex, std::defer_lock);
  if (!lock.try_lock_for(kExitBound)) return;
  for (ProgressThread* t : registry().threads) {
    if (!t->halt(kExitBound)) {
      SPRAY_WARN(FI_LOG_DOMAIN,
                 "a domain's progress thread did not stop within %lld ms (exit() while a "
                 "thread held the domain's lock?): left behind\n",
                 static_cast<long long>(kExitBound.count()));
    }
  }
  registry().threads.clear();
}

void ProgressThread::start_pass() {
  {
    std::lock_guard lock(passes_mutex_);
    ++passes_;
  }
  pass_started_.notify_all();
}

bool ProgressThread::finish_poll() {
  if (forked_away_) return true;  // no thread here polls anything
  std::unique_lock lock(passes_mutex_);
  const uint64_t now = passes_;
  wake_up();
  // Without the eventfd the poll still ends within its timeout.
  return pass_started_.wait_for(lock, kFinishPollBound, [&] { return passes_ != now; });
}

bool ProgressThread::application_passed(uint64_t& seen) const {
  const uint64_t passes = domain_.application_passes.load(std::memory_order_relaxed);
  const bool passed = passes != seen;
  seen = passes;
  return passed;
}

void ProgressThread::sleep_until_woken(std::chrono::milliseconds timeout) {
  if (wake_fd_ < 0) {
    std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(1)));
    return;
  }
  pollfd p{wake_fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) > 0) clear_wake_up();
}

void ProgressThread::wake_up() {
  if (wake_fd_ < 0) return;  // its sleeps end within their timeout all the same
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void ProgressThread::clear_wake_up() {
  uint64_t count;
  [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
}

void ProgressThread::run() {
  uint64_t seen = domain_.application_passes.load(std::memory_order_relaxed);
  if (mode_ == Mode::kWhenAway) sleep_until_woken(away_);  // a period for the first call
  while (!stop_.load(std::memory_order_relaxed)) {
    start_pass();
    if (mode_ == Mode::kWhenAway && application_passed(seen)) {
      sleep_until_woken(away_);  // the application is here: look again in a period
      continue;
    }
    bool can_sleep = true, without_fd = false, in_flight = false;
    fds_.clear();
    if (wake_fd_ >= 0) fds_.push_back({wake_fd_, POLLIN, 0});
    {
      std::lock_guard lock(domain_.mutex);
      size_t delivered = 0;
      for (Endpoint* ep : domain_.endpoints) {
        const size_t n = endpoint_progress(*ep).completions;
        if (n == 0) continue;
        delivered += n;
        wake(ep->tx_cq);
        wake(ep->rx_cq);
        for (Counter* c : ep->counters()) wake(c);
      }
      if (domain_.endpoints.size() > 1) domain_.all_progressed_at = dp::monotonic_now();
      if (delivered > 0) {
        // More may follow at once: pass again without announcing a sleep to the peers.
        domain_.completions_delivered.notify_all();
        continue;
      }
      for (Endpoint* ep : domain_.endpoints) {
        if (!ep->engine) continue;
        if (!ep->engine->prepare_wait()) can_sleep = false;
        in_flight = in_flight || ep->engine->tx_in_use() > 0;
        const int fd = ep->engine->wait_fd();
        if (fd < 0) {
          without_fd = true;
        } else {
          fds_.push_back({fd, POLLIN, 0});
        }
      }
    }
    if (!can_sleep) continue;
    // Away, with nothing of ours in flight, only a peer's packet needs a pass at once.
    const int sleep_ms =
        mode_ == Mode::kWhenAway && !in_flight ? static_cast<int>(away_.count()) : 1;
    if (without_fd) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else if (::poll(fds_.data(), fds_.size(), sleep_ms) > 0 && wake_fd_ >= 0 && fds_[0].revents) {
      clear_wake_up();
    }
  }
  {
    std::lock_guard lock(passes_mutex_);
    ended_ = true;
  }
  pass_started_.notify_all();
}

}  // namespace spray::fi
