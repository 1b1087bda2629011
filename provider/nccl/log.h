// Logging through the function NCCL passes to init(), so the plugin's lines appear in
// NCCL's log (NCCL_DEBUG=WARN / INFO); to stderr before init or if NCCL passed none.
#pragma once

#include <fmt/format.h>

#include <string>

#include "provider/nccl/nccl_net_v8.h"

namespace spray::nccl {

void set_logger(ncclDebugLogger_t logger);
void log_line(ncclDebugLogLevel level, const std::string& line);

template <class... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  log_line(NCCL_LOG_WARN, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  log_line(NCCL_LOG_INFO, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace spray::nccl
