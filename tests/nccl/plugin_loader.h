// Loads the NCCL net plugin the way NCCL does: dlopen("libnccl-net-spray.so" from the
// build tree), dlsym("ncclNetPlugin_v8"), init(logger). The logger keeps the plugin's
// WARN lines so tests can assert that a failure was explained.
#pragma once

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "provider/nccl/nccl_net_v8.h"

namespace spray_nccl_test {

inline std::mutex warnings_mutex;
inline std::vector<std::string> warnings;

inline void record_log(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt,
                       ...) {
  char line[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  if (level == NCCL_LOG_WARN) {
    std::lock_guard lock(warnings_mutex);
    warnings.emplace_back(line);
  }
  if (level <= NCCL_LOG_WARN) std::fprintf(stderr, "[plugin] %s\n", line);
}

// The last WARN line the plugin logged ("" if none), and forget it.
inline std::string take_last_warning() {
  std::lock_guard lock(warnings_mutex);
  std::string last = warnings.empty() ? "" : warnings.back();
  warnings.clear();
  return last;
}

// The plugin's ncclNetPlugin_v8, initialised; null and `error` if it cannot be loaded.
inline const ncclNet_v8_t* load_plugin(std::string& error) {
  void* lib = dlopen(SPRAY_NCCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    error = dlerror();
    return nullptr;
  }
  auto* net = static_cast<const ncclNet_v8_t*>(dlsym(lib, "ncclNetPlugin_v8"));
  if (!net) {
    error = "no ncclNetPlugin_v8 symbol";
    return nullptr;
  }
  if (net->init(record_log) != ncclSuccess) {
    error = "init failed: " + take_last_warning();
    return nullptr;
  }
  return net;
}

}  // namespace spray_nccl_test
