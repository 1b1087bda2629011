// The simulator's event core under the "hold" model of priority-queue studies: N events
// pending, each step pops the earliest and pushes one a random distance after it, as a
// simulation does in steady state. N from what fits in cache to what a data-centre run
// keeps pending (the 8192-host benchmark holds about a million), so the per-step cost
// shows where cache misses take over. Units: steps (one pop + one push) per second.
#include <benchmark/benchmark.h>

#include "nic_sim/des/event_queue.h"
#include "transport/base/rng.h"

namespace spray::des {
namespace {

void BM_EventQueueHold(benchmark::State& state) {
  const auto pending = static_cast<uint32_t>(state.range(0));
  EventQueue q;
  Rng rng(7);
  // Picosecond times spread over ~10 us ahead, like packet arrivals and timers.
  auto later = [&](int64_t now) {
    return Time{now + 1 + static_cast<int64_t>(rng.below(10'000'000))};
  };
  for (uint32_t i = 0; i < pending; ++i) q.push(later(0), 1, i);
  for (auto _ : state) {
    const Event e = q.pop();
    q.push(later(e.at_ps), e.kind, e.a, e.b);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_event"] =
      static_cast<double>(q.memory_bytes()) / static_cast<double>(pending);
}
BENCHMARK(BM_EventQueueHold)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 22);

}  // namespace
}  // namespace spray::des

BENCHMARK_MAIN();
