// Transport benchmarks (Google Benchmark). Targets, from the foundation issue:
//   - PDS+SES packet rate for 64 B messages through an in-memory datapath: >= 5 M/s/core
//   - 1 MiB message throughput through the full engine vs memcpy, same run: >= 0.5
//   - memory: an engine knowing 8192 idle peers < 64 MiB; bytes per idle PDC
// The Secured* variants run the same with UET TSS on both engines (every packet sealed
// and opened with AES-256-GCM), for the cost of security as a ratio in one run.
// Both engines run on one thread, so "per core" counts all the work of both ends.
// For figures, run with --benchmark_min_time=1 (a second a case; the default half second
// is noisier here). The code sets no minimum so that ctest's smoke run stays short.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "nic_sim/loopback_pair.h"
#include "transport/engine/engine.h"

namespace {

using namespace spray;
using Engine = engine::Engine<sim::LoopbackPort>;

engine::EngineConfig bench_config(bool secured = false, uint32_t source_id = 0) {
  engine::EngineConfig e;
  if (secured) {
    tss::TssConfig t;
    t.domain_key.fill(0x5e);
    t.source_id = source_id;
    e.security = t;
  }
  e.pds.cc_name = "fixed";  // no congestion on a loopback; measure the transport
  e.pds.cc.fixed_window_bytes = 4 << 20;
  e.pds.window_packets = 1024;
  e.max_peers = 16;
  return e;
}

struct Pair {
  explicit Pair(bool secured = false)
      : a(wire.a(), bench_config(secured, 1)), b(wire.b(), bench_config(secured, 2)) {}
  sim::LoopbackPair wire;
  Engine a;
  Engine b;
  pds::PeerIndex a_to_b = a.add_peer(wire.b().local_address());
  pds::PeerIndex b_to_a = b.add_peer(wire.a().local_address());
  Time now{};

  void progress() {
    now += Duration::nanoseconds(100);
    a.progress(now);
    b.progress(now);
  }
};

// Small messages: keep `depth` sends and receives outstanding, count delivered packets.
template <bool kSecured>
void BM_SmallMessagePacketRate(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  constexpr int kDepth = 256;
  Pair p(kSecured);
  std::vector<uint8_t> src(size, 1), dst(size * kDepth);
  for (int i = 0; i < kDepth; ++i) {
    p.b.post_recv({dst.data() + i * size, size, static_cast<uint64_t>(i)});
    p.a.send(p.a_to_b, src.data(), size, static_cast<uint64_t>(i));
  }
  uint64_t delivered = 0;
  ses::Completion c;
  for (auto _ : state) {
    p.progress();
    while (p.b.poll_completion(c)) {
      ++delivered;
      p.b.post_recv({dst.data() + c.context * size, size, c.context});
    }
    while (p.a.poll_completion(c)) p.a.send(p.a_to_b, src.data(), size, c.context);
  }
  const uint64_t data_packets = p.a.pds().stats().tx_packets;
  state.counters["messages"] = static_cast<double>(delivered);
  state.counters["messages/s"] =
      benchmark::Counter(static_cast<double>(delivered), benchmark::Counter::kIsRate);
  state.counters["data_packets/s"] =
      benchmark::Counter(static_cast<double>(data_packets), benchmark::Counter::kIsRate);
  // Every data packet is handled twice (sent by one engine, received by the other) and
  // ACKs once each way; both engines share this core.
  const uint64_t events =
      2 * data_packets + p.a.pds().stats().acks_received + p.b.pds().stats().acks_sent;
  state.counters["packet_events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["acks_per_data_packet"] = static_cast<double>(p.b.pds().stats().acks_sent) /
                                           static_cast<double>(data_packets ? data_packets : 1);
}
BENCHMARK(BM_SmallMessagePacketRate<false>)
    ->Name("BM_SmallMessagePacketRate")
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SmallMessagePacketRate<true>)
    ->Name("BM_SecuredSmallMessagePacketRate")
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond);
// The same with a fixed amount of work, for instruction counting under callgrind
// (scripts/instructions-per-message.sh): one run, so totals divide cleanly.
BENCHMARK(BM_SmallMessagePacketRate<false>)->Name("FixedWork64")->Arg(64)->Iterations(4000);

// Unexpected messages: every send arrives before its receive is posted, so its bytes
// wait in an unexpected buffer and are copied on when the receive comes (as when an MPI
// rank sends before its peer posts, or a message overtakes an earlier one). The
// receiver posts one receive for each message that has arrived, after each progress.
void BM_UnexpectedMessageRate(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  constexpr int kDepth = 64;
  Pair p;
  std::vector<uint8_t> src(size, 1), dst(size);
  for (int i = 0; i < kDepth; ++i) p.a.send(p.a_to_b, src.data(), size, static_cast<uint64_t>(i));
  uint64_t delivered = 0, posted = 0;
  ses::Completion c;
  for (auto _ : state) {
    p.progress();
    for (const uint64_t arrived = p.b.ses().stats().unexpected_messages; posted < arrived;
         ++posted) {
      p.b.post_recv({dst.data(), size, posted});
    }
    while (p.b.poll_completion(c)) ++delivered;
    while (p.a.poll_completion(c)) p.a.send(p.a_to_b, src.data(), size, c.context);
  }
  state.counters["messages/s"] =
      benchmark::Counter(static_cast<double>(delivered), benchmark::Counter::kIsRate);
  // 1: every message delivered went through the unexpected path.
  state.counters["unexpected_share"] =
      static_cast<double>(posted) / static_cast<double>(std::max<uint64_t>(delivered, 1));
  state.SetBytesProcessed(static_cast<int64_t>(delivered * size));
}
BENCHMARK(BM_UnexpectedMessageRate)
    ->Arg(1024)
    ->Arg(16384)
    ->Arg(65536)
    ->Unit(benchmark::kMicrosecond);

// Large messages through the whole engine (rendezvous: the receiver reads the data),
// reported with memcpy bandwidth measured in the same run for the ratio.
template <bool kSecured>
void BM_LargeMessageVsMemcpy(benchmark::State& state) {
  const auto size = static_cast<uint64_t>(state.range(0));
  Pair p(kSecured);
  std::vector<uint8_t> src(size, 7), dst(size);
  uint64_t moved = 0;
  ses::Completion c;
  for (auto _ : state) {
    p.b.post_recv({dst.data(), size, 1});
    p.a.send(p.a_to_b, src.data(), size, 1);
    bool tx = false, rx = false;
    while (!tx || !rx) {
      p.progress();
      while (p.a.poll_completion(c)) tx = true;
      while (p.b.poll_completion(c)) rx = true;
    }
    moved += size;
  }
  state.SetBytesProcessed(static_cast<int64_t>(moved));
  // memcpy of the same bytes, same buffers, right after: the denominator of the ratio.
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t done = 0; done < moved; done += size) {
    std::memcpy(dst.data(), src.data(), size);
    benchmark::ClobberMemory();
  }
  const double memcpy_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  state.counters["memcpy_bytes_per_second"] = static_cast<double>(moved) / memcpy_s;
  state.counters["memcpy_seconds"] = memcpy_s;
}
BENCHMARK(BM_LargeMessageVsMemcpy<false>)
    ->Name("BM_LargeMessageVsMemcpy")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LargeMessageVsMemcpy<true>)
    ->Name("BM_SecuredLargeMessageVsMemcpy")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond);

size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Memory of an engine that knows 8192 peers and talks to none: the default tables.
void BM_IdleEngineMemory(benchmark::State& state) {
  for (auto _ : state) {
    const size_t before = heap_in_use();
    sim::LoopbackPair wire;
    const size_t wire_bytes = heap_in_use() - before;
    engine::EngineConfig cfg;
    cfg.max_peers = 8192;
    auto e = std::make_unique<Engine>(wire.a(), cfg);
    for (uint32_t i = 0; i < 8192; ++i) e->add_peer(dp::NetAddr::sim_host(1000 + i));
    const size_t engine_bytes = heap_in_use() - before - wire_bytes;
    state.counters["engine_MiB"] = static_cast<double>(engine_bytes) / (1 << 20);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_IdleEngineMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

// Memory per idle PDC: open `n` PDCs (one small message to each of n peers), let the
// traffic finish, and divide the heap growth by n.
void BM_IdlePdcMemory(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    sim::LoopbackPair wire(4096, 65536);
    engine::EngineConfig cfg;
    cfg.max_peers = n + 1;
    cfg.pds.max_pdcs = n + 1;
    Engine e(wire.a(), cfg);
    for (uint32_t i = 0; i < n; ++i) e.add_peer(dp::NetAddr::sim_host(1000 + i));
    uint8_t byte = 0;
    const size_t before = heap_in_use();
    for (uint32_t i = 0; i < n; ++i) e.send(i, &byte, 1, i);
    for (int k = 0; k < 64; ++k) e.progress(Time{k});  // SYNs go out; nobody answers
    const size_t after = heap_in_use();
    state.counters["bytes_per_pdc"] = static_cast<double>(after - before) / n;
    state.counters["open_pdcs"] = e.pds().open_pdcs();
  }
}
BENCHMARK(BM_IdlePdcMemory)->Arg(1024)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
