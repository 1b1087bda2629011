// The DPDK Environment Abstraction Layer is process-wide and can be initialised only
// once per process, so every DpdkDatapath goes through this one gate.
#pragma once

#include <string>

namespace spray::dp {

// Initialises the EAL from a whitespace-separated parameter string (no quoting), unless
// it is already up. Returns false with a message when initialisation fails, or when it
// was already initialised with different non-empty parameters.
bool ensure_dpdk_eal(const std::string& args, std::string& error);

}  // namespace spray::dp
