// The FI_PROGRESS_AUTO thread (see progress_thread.h).
#include "provider/progress_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "provider/endpoint.h"

namespace spray::fi {
namespace {

// A CQ or counter that just received completions: whoever blocks on it re-reads.
template <class T>
void wake(T* object) {
  if (object && object->wait_fd) object->wait_fd->signal();
}

}  // namespace

ProgressThread::ProgressThread(Domain& domain)
    : domain_(domain),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      thread_([this] { run(); }) {}

ProgressThread::~ProgressThread() {
  stop_.store(true, std::memory_order_relaxed);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  thread_.join();  // at most one sleep (1 ms) away
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ProgressThread::start_pass() {
  {
    std::lock_guard lock(passes_mutex_);
    ++passes_;
  }
  pass_started_.notify_all();
}

bool ProgressThread::finish_poll() {
  std::unique_lock lock(passes_mutex_);
  const uint64_t now = passes_;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  // Without the eventfd the poll still ends within its 1 ms.
  return pass_started_.wait_for(lock, kFinishPollBound, [&] { return passes_ != now; });
}

void ProgressThread::run() {
  std::vector<pollfd> fds;
  while (!stop_.load(std::memory_order_relaxed)) {
    start_pass();
    bool can_sleep = true, without_fd = false;
    fds.clear();
    if (wake_fd_ >= 0) fds.push_back({wake_fd_, POLLIN, 0});
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
      if (delivered > 0) {
        // More may follow at once: pass again without announcing a sleep to the peers.
        domain_.completions_delivered.notify_all();
        continue;
      }
      for (Endpoint* ep : domain_.endpoints) {
        if (!ep->engine) continue;
        if (!ep->engine->prepare_wait()) can_sleep = false;
        const int fd = ep->engine->wait_fd();
        if (fd < 0) {
          without_fd = true;
        } else {
          fds.push_back({fd, POLLIN, 0});
        }
      }
    }
    if (!can_sleep) continue;
    if (without_fd) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else if (::poll(fds.data(), fds.size(), 1) > 0 && wake_fd_ >= 0 && fds[0].revents) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
  }
}

}  // namespace spray::fi
