#include "provider/nccl/log.h"

#include <atomic>
#include <cstdio>

namespace spray::nccl {
namespace {
std::atomic<ncclDebugLogger_t> logger{nullptr};
}  // namespace

void set_logger(ncclDebugLogger_t l) {
  logger.store(l);
}

void log_line(ncclDebugLogLevel level, const std::string& line) {
  if (ncclDebugLogger_t l = logger.load()) {
    l(level, NCCL_NET, "spray", 0, "%s", line.c_str());
  } else if (level <= NCCL_LOG_WARN) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace spray::nccl
