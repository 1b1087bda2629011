// Engine settings for engines driven by a real clock over an operating-system datapath
// (kernel UDP, DPDK, verbs), shared by spray-endpoint and the libfabric provider.
//
// Why not the core defaults: those suit the simulator, where nothing but the fabric delays
// a packet. A real process is descheduled for about a millisecond now and then, so the
// timeout floor and the tolerated reordering are set to that scale.
#pragma once

#include <random>

#include "transport/engine/engine.h"

namespace spray::engine {

inline EngineConfig real_time_engine_config() {
  EngineConfig e;
  e.pds.initial_rto = Duration::milliseconds(2);
  e.pds.min_rto = Duration::milliseconds(1);
  e.pds.max_rto = Duration::milliseconds(100);
  e.pds.reorder_window = Duration::microseconds(500);
  // Waiting for a PDC in a full table takes scheduling rounds here, not microseconds:
  // four ranks on two cores with two PDCs each (FI_SPRAY_MAX_PDCS=2) waited over 1 s.
  e.pds.pdc_wait = Duration::seconds(10);
  // Start PSNs (and path exploration) drawn afresh by each process, as UET wants: with
  // the core's fixed seed every process, and a process restarted at the same address,
  // opened its PDCs with the same ids at the same start PSNs as its predecessor.
  std::random_device source;
  e.pds.seed = (uint64_t{source()} << 32) | source();
  return e;
}

}  // namespace spray::engine
