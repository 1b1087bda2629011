#include "transport/datapath/dpdk/dpdk_eal.h"

#include <fmt/format.h>
#include <rte_alarm.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace spray::dp {
namespace {

struct EalState {
  std::mutex mutex;
  bool up = false;
  bool failed = false;  // the EAL cannot be initialised twice, even after a failure
  std::string args;
  std::string failure;
  // rte_eal_init may keep pointers into argv, so the strings live as long as the process.
  std::vector<std::string> words;
  std::vector<char*> argv;
};

// At exit: close every port (engines only stop them, so that a later engine can reopen a
// port by name), so PMD resources (AF_XDP sockets, memif sockets and regions) are
// returned rather than abandoned. rte_eal_cleanup is deliberately not called: in DPDK
// 22.11 it frees interrupt sources and unmaps memory while the interrupt thread is still
// polling them, which crashed at exit under CPU oversubscription; the kernel reclaims
// the EAL's memory at exit anyway.
void close_ports() {
  for (uint16_t id = 0; id < RTE_MAX_ETHPORTS; ++id) {
    if (!rte_eth_dev_is_valid_port(id)) continue;
    rte_eth_dev_stop(id);
    rte_eth_dev_close(id);
  }
  await_dpdk_interrupt_thread();
}

EalState& state() {
  static EalState* s = new EalState;  // never destroyed: the EAL outlives static dtors
  return *s;
}

}  // namespace

bool ensure_dpdk_eal(const std::string& args, std::string& error) {
  EalState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.up) {
    if (!args.empty() && args != s.args) {
      error = fmt::format(
          "the DPDK EAL is already initialised in this process with '{}'; it cannot be "
          "re-initialised with '{}'",
          s.args, args);
      return false;
    }
    return true;
  }
  if (s.failed) {
    error = s.failure;
    return false;
  }
  s.words = {"spray"};
  std::istringstream in(args);
  for (std::string w; in >> w;) s.words.push_back(w);
  for (auto& w : s.words) s.argv.push_back(w.data());
  s.argv.push_back(nullptr);
  const int rc = rte_eal_init(static_cast<int>(s.words.size()), s.argv.data());
  if (rc < 0) {
    s.failed = true;
    s.failure =
        fmt::format("DPDK EAL initialisation with '{}' failed: {}", args, rte_strerror(rte_errno));
    error = s.failure;
    return false;
  }
  s.up = true;
  s.args = args;
  std::atexit(close_ports);
  return true;
}

void await_dpdk_interrupt_thread() {
  // Alarms run on the interrupt thread after the event-loop work queued ahead of them;
  // two rounds let work that the first round's iteration queued drain too.
  constexpr auto kTimeout = std::chrono::milliseconds(500);
  const auto fire = [](void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); };
  for (int round = 0; round < 2; ++round) {
    std::atomic<bool> ran{false};
    if (rte_eal_alarm_set(1, fire, &ran) != 0) return;
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (!ran.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!ran.load()) {
      rte_eal_alarm_cancel(fire, &ran);  // never leave it pointing at this frame
      return;
    }
  }
}

}  // namespace spray::dp
