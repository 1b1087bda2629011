// Runs a test step in a forked child whose address space is capped (RLIMIT_AS) a given
// number of bytes above what it already uses, so that large allocations fail there and
// nowhere else: how tests check that running out of memory is an error, not a crash.
// The step returns the child's exit code (0: as expected); an exception escaping it
// exits with kEscapedException. Sanitizer builds cannot run such steps (ASan reserves
// terabytes of address space and aborts on a failed allocation): kCappedChildWorks says
// whether this build can.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/sanitizers.h"

namespace spray::test {

#if defined(SPRAY_UNDER_ASAN) || defined(SPRAY_UNDER_TSAN)
inline constexpr bool kCappedChildWorks = false;
#else
inline constexpr bool kCappedChildWorks = true;
#endif

inline constexpr int kCapFailed = 120;         // setrlimit refused the cap
inline constexpr int kEscapedException = 121;  // the step threw
inline constexpr int kNoChild = -1;            // fork or waitpid failed

// What became of the child: its exit code, or a description of how it ended otherwise.
struct ChildEnd {
  bool exited = false;
  int code = kNoChild;  // the exit code, or the signal that ended it
  bool hung = false;    // still running at kCappedChildLimit, then killed
  std::string describe() const {
    if (hung) return "did not end within the limit; killed";
    if (code == kNoChild && !exited) return "fork or waitpid failed";
    return exited ? "exit code " + std::to_string(code)
                  : "killed by signal " + std::to_string(code);
  }
};

// How long a capped child may run before it counts as hung and is killed, so that a step
// that never ends fails its test with a reason instead of holding it to ctest's timeout
// (a clang AddressSanitizer build's child once did, before such builds skipped these steps).
inline constexpr std::chrono::seconds kCappedChildLimit{60};

template <class Step>
ChildEnd run_in_capped_child(rlim_t headroom_bytes, Step step) {
  const pid_t child = ::fork();
  if (child < 0) return {};
  if (child == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t cap =
        static_cast<rlim_t>(pages) * static_cast<rlim_t>(::getpagesize()) + headroom_bytes;
    const rlimit limit{cap, cap};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(kCapFailed);
    try {
      ::_exit(step());
    } catch (...) {
      ::_exit(kEscapedException);
    }
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + kCappedChildLimit;
  pid_t ended = 0;
  while ((ended = ::waitpid(child, &status, WNOHANG)) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      ChildEnd end;
      end.hung = true;
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (ended != child) return {};
  if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
  return {false, WIFSIGNALED(status) ? WTERMSIG(status) : 0};
}

}  // namespace spray::test
