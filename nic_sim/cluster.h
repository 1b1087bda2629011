// Cluster: N engines on one Fabric, all knowing each other, driven in virtual time.
// The harness the chaos tests, the benchmarks and spray-transfer share.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "nic_sim/fabric.h"
#include "nic_sim/sim_nic.h"
#include "transport/engine/engine.h"

namespace spray::sim {

using SimEngine = engine::Engine<SimNic>;

class Cluster {
 public:
  // `per_host`, when given, adjusts each host's copy of `engine` (e.g. hosts of
  // different jobs) before its engine is made.
  Cluster(const FabricConfig& fabric, engine::EngineConfig engine,
          const std::function<void(uint32_t host, engine::EngineConfig&)>& per_host = {})
      : fabric_(fabric) {
    for (uint32_t h = 0; h < fabric.hosts; ++h) {
      engine::EngineConfig c = engine;
      c.pds.seed = fabric.seed * 1000003 + h;  // distinct start PSNs and paths per host
      if (per_host) per_host(h, c);
      engines_.push_back(std::make_unique<SimEngine>(fabric_.nic(h), c));
    }
    // Every engine learns every host in the same order, so peer index == host id.
    for (auto& e : engines_) {
      for (uint32_t h = 0; h < fabric.hosts; ++h) e->add_peer(dp::NetAddr::sim_host(h));
    }
  }

  SimEngine& engine(uint32_t host) { return *engines_[host]; }
  Fabric& fabric() { return fabric_; }
  Time now() const { return now_; }
  uint32_t hosts() const { return static_cast<uint32_t>(engines_.size()); }

  // One step at the current time: deliver due packets, let every engine progress.
  size_t step() {
    fabric_.advance_to(now_);
    size_t work = 0;
    for (auto& e : engines_) work += e->progress(now_);
    return work;
  }

  // Runs until done() holds or `limit` of virtual time has passed. While engines are
  // busy time advances by `tick`; when idle it jumps to the next fabric event (at most
  // `idle_jump` ahead, so retransmission timers still fire close to their deadline).
  template <class Done>
  bool run_until(Done&& done, Duration limit, Duration tick = Duration::microseconds(1),
                 Duration idle_jump = Duration::microseconds(50)) {
    const Time end = now_ + limit;
    while (now_ < end) {
      const size_t work = step();
      if (done()) return true;
      if (work > 0) {
        now_ += tick;
      } else {
        const Time next = fabric_.next_event();
        now_ = std::clamp(next, now_ + tick, now_ + idle_jump);
      }
    }
    return done();
  }

 private:
  Fabric fabric_;
  std::vector<std::unique_ptr<SimEngine>> engines_;
  Time now_{};
};

}  // namespace spray::sim
