#include "provider/wait_fd.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

namespace spray::fi {
namespace {

bool watch(int epoll, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST;
}

}  // namespace

std::unique_ptr<WaitFd> WaitFd::open(std::string& error) {
  std::unique_ptr<WaitFd> w(new WaitFd);
  w->epoll_ = epoll_create1(EPOLL_CLOEXEC);
  w->timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  w->event_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->epoll_ < 0 || w->timer_ < 0 || w->event_ < 0 || !watch(w->epoll_, w->timer_) ||
      !watch(w->epoll_, w->event_)) {
    error = std::strerror(errno);
    return nullptr;
  }
  return w;
}

WaitFd::~WaitFd() {
  for (int fd : {epoll_, timer_, event_}) {
    if (fd >= 0) close(fd);
  }
}

int wait_fd_control(const WaitFd* w, int command, void* arg) {
  if (command != FI_GETWAIT) return -FI_ENOSYS;
  if (!w) return -FI_ENODATA;
  if (!arg) return -FI_EINVAL;
  *static_cast<int*>(arg) = w->fd();
  return FI_SUCCESS;
}

bool WaitFd::add(int socket_fd) {
  return watch(epoll_, socket_fd);
}

void WaitFd::remove(int socket_fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, socket_fd, nullptr);
}

void WaitFd::signal() {
  const uint64_t one = 1;
  (void)!write(event_, &one, sizeof(one));
}

bool WaitFd::clear() {
  uint64_t n = 0;
  (void)!read(timer_, &n, sizeof(n));
  n = 0;
  (void)!read(event_, &n, sizeof(n));
  return n > 0;
}

void WaitFd::arm(Duration after) {
  itimerspec spec{};
  const int64_t ns = after.ps / 1000;
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  timerfd_settime(timer_, 0, &spec, nullptr);
}

void WaitFd::wait(int timeout_ms) const {
  pollfd p{epoll_, POLLIN, 0};
  (void)poll(&p, 1, timeout_ms);
}

}  // namespace spray::fi
