// Reduction kernel benchmarks (Google Benchmark): dst = dst OP src over one block, beside
// memcpy of the same block in the same run. A kernel is memory-bound when vectorised, so
// the ratio bytes_per_second(reduce) / bytes_per_second(memcpy) should be near 1 for
// blocks that fit in cache (256 KiB); it was 0.25-0.35 while the kernels were built
// scalar (GCC 12 at -O2).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "collectives/reduce_kernels.h"

namespace {

using spray::coll::DataType;
using spray::coll::ReduceOp;

// `one`: the element value both operands hold (a normal number: subnormals would measure
// the CPU's slow path, not the kernel).
template <class T>
void BM_Reduce(benchmark::State& state, DataType type, ReduceOp op, T one) {
  const auto n = static_cast<size_t>(state.range(0)) / sizeof(T);
  std::vector<T> dst(n, one), src(n, one);
  for (auto _ : state) {
    spray::coll::reduce(dst.data(), src.data(), n, type, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(std::string(spray::coll::kernel_isa()));
}

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<char> dst(n, 1), src(n, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_ReduceF32Sum(benchmark::State& s) {
  BM_Reduce<float>(s, DataType::kF32, ReduceOp::kSum, 1.0f);
}
void BM_ReduceF32Max(benchmark::State& s) {
  BM_Reduce<float>(s, DataType::kF32, ReduceOp::kMax, 1.0f);
}
void BM_ReduceI32Sum(benchmark::State& s) {
  BM_Reduce<int32_t>(s, DataType::kI32, ReduceOp::kSum, 1);
}
void BM_ReduceBf16Sum(benchmark::State& s) {
  BM_Reduce<uint16_t>(s, DataType::kBF16, ReduceOp::kSum, 0x3f80);  // 1.0 in bf16
}
BENCHMARK(BM_ReduceF32Sum)->Arg(64 << 10)->Arg(256 << 10)->Arg(4 << 20);
BENCHMARK(BM_ReduceF32Max)->Arg(256 << 10);
BENCHMARK(BM_ReduceI32Sum)->Arg(256 << 10);
BENCHMARK(BM_ReduceBf16Sum)->Arg(256 << 10);
BENCHMARK(BM_Memcpy)->Arg(64 << 10)->Arg(256 << 10)->Arg(4 << 20);

}  // namespace

BENCHMARK_MAIN();
