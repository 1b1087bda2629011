// The file descriptor behind a CQ opened with FI_WAIT_FD (fi_control FI_GETWAIT hands it
// out): an epoll set that becomes readable when any endpoint bound to the CQ has packets
// to receive, when fi_cq_signal was called, or when a timer fires that fi_trywait armed
// because operations are in flight (retransmission timers run only when someone
// progresses, and a sleeping application must wake for them).
//
// Protocol (fi_trywait(3)): the application calls fi_trywait; on FI_SUCCESS it may block
// in poll/epoll on the fd, then reads the CQ, which progresses the endpoints.
#pragma once

#include <memory>
#include <string>

#include "transport/base/time.h"

namespace spray::fi {

class WaitFd {
 public:
  static std::unique_ptr<WaitFd> open(std::string& error);
  ~WaitFd();
  WaitFd(const WaitFd&) = delete;
  WaitFd& operator=(const WaitFd&) = delete;

  int fd() const { return epoll_; }
  bool add(int socket_fd);  // an endpoint's receive socket
  void remove(int socket_fd);
  void signal();
  // Consumes timer expirations and signals. True if a signal was pending.
  bool clear();
  // One-shot wake-up after `after`; a zero duration disarms.
  void arm(Duration after);
  // Blocks until the fd is readable or `timeout_ms` passes.
  void wait(int timeout_ms) const;

 private:
  WaitFd() = default;
  int epoll_ = -1;
  int timer_ = -1;
  int event_ = -1;
};

// fi_control on a CQ or counter whose wait fd is `w` (null when it has none): FI_GETWAIT
// hands out the fd; -FI_ENODATA without one (FI_WAIT_UNSPEC blocks in sread/wait).
int wait_fd_control(const WaitFd* w, int command, void* arg);

}  // namespace spray::fi
