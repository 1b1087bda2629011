// The DPDK Environment Abstraction Layer is process-wide and can be initialised only
// once per process, so every DpdkDatapath goes through this one gate.
#pragma once

#include <string>

namespace spray::dp {

// Initialises the EAL from a whitespace-separated parameter string (no quoting), unless
// it is already up. Returns false with a message when initialisation fails, or when it
// was already initialised with different non-empty parameters.
bool ensure_dpdk_eal(const std::string& args, std::string& error);

// Returns once DPDK's interrupt thread has run everything queued before the call, or
// after half a second. Virtual PMDs (memif) finish a stopped port's disconnect on that
// thread, asynchronously; freeing memory meanwhile (a mempool, the EAL at exit) crashed
// inside DPDK when the CPU was oversubscribed. Call after stopping a port.
void await_dpdk_interrupt_thread();

}  // namespace spray::dp
