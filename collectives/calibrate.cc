// calibrate(): measures the tuner's alpha, beta and gamma on the running fabric.
//
// alpha and beta come from ping-pongs between rank pairs (0-1, 2-3, ...), all pairs at
// once, so the figures include what ranks sharing cores and links do to each other,
// as in a real collective: alpha = half a round trip of 8 bytes; beta from the extra
// time of 1 MiB. gamma times the f32 sum kernel over 4 MiB. Each is the median of
// several rounds, and every rank takes the largest over ranks so that all agree.
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
  m.source = fmt::format("spray-coll-perf --calibrate: {} ranks over '{}'", c.size(), c.provider());
  return m;
}

}  // namespace spray::coll
