// The real-time clock for owners of engines that run over real datapaths. The
// transport core never reads it (DESIGN.md decision 1); the tool, test or provider that
// drives Engine::progress() reads it and passes the time in.
#pragma once

#include <chrono>

#include "transport/base/time.h"

namespace spray::dp {

inline Time monotonic_now() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  return Time{static_cast<int64_t>(ns) * 1000};
}

}  // namespace spray::dp
