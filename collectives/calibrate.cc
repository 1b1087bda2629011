// calibrate(): measures the tuner's alpha, beta and gamma on the running fabric, and the
// time of every all-reduce and all-to-all algorithm at a few sizes (tuner.h).
//
// alpha and beta come from ping-pongs between rank pairs (0-1, 2-3, ...), all pairs at
// once, so the figures include what ranks sharing cores and links do to each other,
// as in a real collective: alpha = half a round trip of 8 bytes; beta from the extra
// time of 1 MiB. gamma times the f32 sum kernel over 4 MiB. Each is the median of
// several rounds, and every rank takes the largest over ranks so that all agree.
//
// Algorithm times: f32 sum (all-reduce) and f32 blocks (all-to-all) at kTimedSizes, each
// algorithm's calls run back to back after a barrier and timed on every rank; a round
// times every algorithm at every size, rounds are interleaved so that drift on a shared
// machine hits all alike, and each time is the median over rounds of the slowest rank's.
// The first call of each algorithm and size is not timed (first contact, scratch growth).
#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "collectives/communicator.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Where algorithms are timed (all-reduce: the buffer; all-to-all: all a rank sends): from
// latency-bound to bandwidth-bound, at most 16 MiB so that calibrating a slow provider
// still takes seconds, not minutes (4 ranks over spray here: about 3 s in all).
constexpr size_t kTimedSizes[] = {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20,
                                  size_t{16} << 20};
constexpr int kTimedRounds = 5;
// Calls per timing: about 8 MiB of buffer, between 2 and 24 calls.
int timed_calls(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t{8} << 20) / bytes, 2, 24));
}

// The time of every tuner candidate at kTimedSizes on this communicator (see the top).
// Leaves the last candidates forced: the caller restores what was forced before.
MeasuredTimes time_algorithms(Communicator& c) {
  MeasuredTimes out;
  if (c.size() < 2) return out;
  const auto p = static_cast<size_t>(c.size());
  // All-to-all blocks of at least one element, whatever the rank count.
  auto block_count = [&](size_t bytes) { return std::max<size_t>(1, bytes / p / sizeof(float)); };
  std::vector<float> send(std::max(kTimedSizes[std::size(kTimedSizes) - 1] / sizeof(float), p),
                          1.0f);
  std::vector<float> recv(send.size());
  // One timing: `calls` calls of one algorithm at one size; microseconds per call.
  auto time_calls = [&](bool all_to_all, size_t bytes, int calls) {
    c.barrier();
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) {
      if (all_to_all) {
        c.all_to_all(send.data(), recv.data(), block_count(bytes), DataType::kF32);
      } else {
        c.all_reduce(send.data(), recv.data(), bytes / sizeof(float), DataType::kF32,
                     ReduceOp::kSum);
      }
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
  };
  // times[((round * 2 + collective) * kinds + algorithm) * sizes + size], where kinds is
  // the larger of the two candidate lists; all-reduced to the slowest rank's at the end.
  constexpr size_t kKinds =
      std::max(std::size(kAllReduceAlgorithms), std::size(kAllToAllAlgorithms));
  constexpr size_t kSizes = std::size(kTimedSizes);
  std::vector<double> times(kTimedRounds * 2 * kKinds * kSizes, 0.0);
  auto at = [&](int round, bool all_to_all, size_t kind, size_t size) -> double& {
    return times[((static_cast<size_t>(round) * 2 + all_to_all) * kKinds + kind) * kSizes + size];
  };
  for (int round = -1; round < kTimedRounds; ++round) {  // round -1: untimed first calls
    for (size_t size = 0; size < kSizes; ++size) {
      const size_t bytes = kTimedSizes[size];
      for (size_t kind = 0; kind < std::size(kAllReduceAlgorithms); ++kind) {
        c.set_all_reduce_algorithm(kAllReduceAlgorithms[kind]);
        const double us = time_calls(false, bytes, round < 0 ? 1 : timed_calls(bytes));
        if (round >= 0) at(round, false, kind, size) = us;
      }
      for (size_t kind = 0; kind < std::size(kAllToAllAlgorithms); ++kind) {
        c.set_all_to_all_algorithm(kAllToAllAlgorithms[kind]);
        const double us = time_calls(true, bytes, round < 0 ? 1 : timed_calls(bytes));
        if (round >= 0) at(round, true, kind, size) = us;
      }
    }
  }
  c.all_reduce(times.data(), times.data(), times.size(), DataType::kF64, ReduceOp::kMax);

  out.ranks = c.size();
  auto median_over_rounds = [&](bool all_to_all, size_t kind, size_t size) {
    std::vector<double> rounds;
    for (int round = 0; round < kTimedRounds; ++round)
      rounds.push_back(at(round, all_to_all, kind, size));
    return median(std::move(rounds));
  };
  for (size_t size = 0; size < kSizes; ++size) {
    for (size_t kind = 0; kind < std::size(kAllReduceAlgorithms); ++kind) {
      out.all_reduce[kAllReduceAlgorithms[kind]].push_back(
          {kTimedSizes[size], median_over_rounds(false, kind, size)});
    }
    for (size_t kind = 0; kind < std::size(kAllToAllAlgorithms); ++kind) {
      auto& rows = out.all_to_all[kAllToAllAlgorithms[kind]];
      const size_t block_bytes = block_count(kTimedSizes[size]) * sizeof(float);
      // Past 8192 ranks the two smaller sizes both time blocks of one element, the same call:
      // one row for it (the model refuses a size with two).
      if (!rows.empty() && rows.back().bytes == block_bytes) continue;
      rows.push_back({block_bytes, median_over_rounds(true, kind, size)});
    }
  }
  return out;
}

}  // namespace

CostModel calibrate(Communicator& c) {
  CostModel m;
  const int partner = c.rank() ^ 1;
  const bool paired = partner < c.size();
  constexpr size_t kLarge = 1 << 20;
  std::vector<uint8_t> out(kLarge, 1), in(kLarge);

  // One round: `rounds` ping-pongs of `bytes`; microseconds per round trip.
  auto ping_pong = [&](size_t bytes, int rounds) {
    c.barrier();
    ++c.sequence_;  // a tag space of its own
    const auto start = Clock::now();
    for (int i = 0; i < rounds && paired; ++i) {
      const auto step = static_cast<uint32_t>(i);
      if (c.rank() % 2 == 0) {
        c.link().wait(c.link().isend(partner, out.data(), bytes, c.tag(c.rank(), step)),
                      c.deadline());
        c.link().wait(c.link().irecv(partner, in.data(), bytes, c.tag(partner, step)),
                      c.deadline());
      } else {
        c.link().wait(c.link().irecv(partner, in.data(), bytes, c.tag(partner, step)),
                      c.deadline());
        c.link().wait(c.link().isend(partner, out.data(), bytes, c.tag(c.rank(), step)),
                      c.deadline());
      }
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / rounds;
  };

  std::vector<double> small, large;
  ping_pong(8, 20);  // warm-up: connections, registrations
  ping_pong(kLarge, 2);
  for (int i = 0; i < 5; ++i) {
    small.push_back(ping_pong(8, 100));
    large.push_back(ping_pong(kLarge, 10));
  }
  double figures[3] = {};
  if (paired) {
    figures[0] = median(small) / 2;
    figures[1] = std::max(1e-6, (median(large) / 2 - figures[0]) / static_cast<double>(kLarge));
  }
  std::vector<float> a(kLarge), b(kLarge, 1.0f);
  std::vector<double> reduce_us;
  for (int i = 0; i < 7; ++i) {
    const auto start = Clock::now();
    reduce(a.data(), b.data(), a.size(), DataType::kF32, ReduceOp::kSum);
    reduce_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  figures[2] = median(reduce_us) / static_cast<double>(a.size() * sizeof(float));
  c.all_reduce(figures, figures, 3, DataType::kF64, ReduceOp::kMax);
  if (c.size() > 1) {
    m.alpha_us = figures[0];
    m.beta_us_per_byte = figures[1];
  }
  m.gamma_us_per_byte = std::max(1e-7, figures[2]);
  const AllReduceAlgorithm all_reduce_forced = c.all_reduce_algorithm_;
  const AllToAllAlgorithm all_to_all_forced = c.all_to_all_algorithm_;
  m.measured = time_algorithms(c);
  c.set_all_reduce_algorithm(all_reduce_forced);
  c.set_all_to_all_algorithm(all_to_all_forced);
  m.fabric = c.link().fabric_name();
  m.source = fmt::format("spray-coll-perf --calibrate: {} ranks over '{}'", c.size(), m.fabric);
  return m;
}

}  // namespace spray::coll
