// Cluster: N engines on one Fabric, all knowing each other, driven in virtual time.
// The harness the chaos tests, the benchmarks and spray-transfer share.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
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
      : fabric_(fabric), engine_config_(std::move(engine)), per_host_(per_host) {
    for (uint32_t h = 0; h < fabric.hosts; ++h) {
      engines_.push_back(make_engine(h, fabric.seed * 1000003 + h));
    }
    // Every engine learns every host in the same order, so peer index == host id.
    for (auto& e : engines_) learn_every_host(*e);
  }

  // Host `host`'s process restarts at the same address: its engine goes with everything
  // it held, and a new one (its own start PSNs, from `seed`, and a new incarnation)
  // takes the same NIC, where packets meant for the old one are still arriving.
  void restart(uint32_t host, uint64_t seed) {
    engines_[host].reset();
    engines_[host] = make_engine(host, seed);
    learn_every_host(*engines_[host]);
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
  // Distinct start PSNs and paths per host from `seed`, and incarnations in the order
  // engines are made (1, 2, ...; a simulation stays reproducible), unless set.
  std::unique_ptr<SimEngine> make_engine(uint32_t host, uint64_t seed) {
    engine::EngineConfig c = engine_config_;
    c.pds.seed = seed;
    if (c.ses.incarnation == 0) c.ses.incarnation = static_cast<uint16_t>(made_++ % 0xfffe + 1);
    if (per_host_) per_host_(host, c);
    return std::make_unique<SimEngine>(fabric_.nic(host), c);
  }
  void learn_every_host(SimEngine& e) {
    for (uint32_t h = 0; h < fabric_.hosts(); ++h) e.add_peer(dp::NetAddr::sim_host(h));
  }

  Fabric fabric_;
  engine::EngineConfig engine_config_;
  std::function<void(uint32_t host, engine::EngineConfig&)> per_host_;
  uint32_t made_ = 0;  // engines made so far
  std::vector<std::unique_ptr<SimEngine>> engines_;
  Time now_{};
};

}  // namespace spray::sim
