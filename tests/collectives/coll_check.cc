// Checks every collective of spray::coll in a real multi-process run (start it with
// spray-run -n N): every operation x type x reduction x size, each result compared
// element by element with a reference this program computes on its own from the inputs
// every rank is known to contribute. Rank 0 prints "PASS <checks>"; any mismatch prints
// what differs and exits 1.
//
//   spray-run -n 4 --provider tcp coll_check [--large-bytes N] [--die-rank R]
//
// --die-rank R: rank R exits abruptly inside an all-reduce; the others must fail with
// a CollectiveError (printed, exit 2) instead of hanging.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "collectives/communicator.h"
#include "collectives/reduce_kernels.h"

namespace {

using namespace spray::coll;

// Input element i of `rank` for reduction `op`: small integers, so every sum, product,
// min and max is exact in every type (products only reach 2^ranks).
double input(int rank, size_t i, ReduceOp op, DataType t) {
  switch (op) {
    case ReduceOp::kProd:
      return ((rank + i) % 3 == 0) ? 2.0 : 1.0;
    case ReduceOp::kMin:
    case ReduceOp::kMax: {
      const double v = static_cast<double>((static_cast<size_t>(rank) * 31 + i * 17) % 200);
      return (t == DataType::kU8 || t == DataType::kU32 || t == DataType::kU64) ? v : v - 100;
    }
    default:
      return static_cast<double>((static_cast<size_t>(rank) + i) % 7 + 1);
  }
}

// The reduction over `ranks` of input(r, i), as type t holds it: integers wrap (stored
// and read back through the type), floating averages are compared with a tolerance.
double reference(int ranks, size_t i, ReduceOp op, DataType t) {
  double acc = input(0, i, op, t);
  for (int r = 1; r < ranks; ++r) acc = combine_scalar(op, acc, input(r, i, op, t));
  if (op == ReduceOp::kAvg) acc /= ranks;
  uint64_t cell = 0;  // through the type: wraps integers exactly as the wire does
  store_element(&cell, 0, t, acc);
  return op == ReduceOp::kAvg ? acc : load_element(&cell, 0, t);
}

double tolerance(DataType t) {
  switch (t) {
    case DataType::kF16:
      return 1.0 / 1024;
    case DataType::kBF16:
      return 1.0 / 128;
    case DataType::kF32:
      return 1e-6;
    case DataType::kF64:
      return 1e-12;
    default:
      return 0;
  }
}

struct Checker {
  Communicator& comm;
  size_t checks = 0;
  int failures = 0;

  void expect(double got, double want, DataType t, const std::string& what, size_t i) {
    ++checks;
    const double tol = tolerance(t) * std::max(1.0, std::fabs(want));
    if (std::fabs(got - want) <= tol) return;
    if (++failures <= 10) {
      fmt::print(stderr, "rank {}: {} element {}: got {} want {}\n", comm.rank(), what, i, got,
                 want);
    }
  }

  std::vector<uint8_t> buffer(size_t count, DataType t) {
    return std::vector<uint8_t>(std::max<size_t>(1, count * size_of(t)), 0xcd);
  }

  // Each algorithm in turn (every rank forces the same one), then automatic choice.
  void all_reduce(DataType t, ReduceOp op, size_t count, bool in_place) {
    constexpr std::pair<AllReduceAlgorithm, const char*> kAlgorithms[] = {
        {AllReduceAlgorithm::kRing, "ring"},
        {AllReduceAlgorithm::kRecursiveDoubling, "recursive_doubling"},
        {AllReduceAlgorithm::kAuto, "auto"}};
    for (const auto& [algorithm, algorithm_name] : kAlgorithms) {
      auto send = buffer(count, t), recv = buffer(count, t);
      for (size_t i = 0; i < count; ++i) {
        store_element(send.data(), i, t, input(comm.rank(), i, op, t));
      }
      void* out = in_place ? send.data() : recv.data();
      comm.set_all_reduce_algorithm(algorithm);
      comm.all_reduce(send.data(), out, count, t, op);
      const auto what = fmt::format("all_reduce/{} {} {} n={}{}", algorithm_name, name(t), name(op),
                                    count, in_place ? " in place" : "");
      for (size_t i = 0; i < count; ++i) {
        expect(load_element(out, i, t), reference(comm.size(), i, op, t), t, what, i);
      }
    }
    comm.set_all_reduce_algorithm(AllReduceAlgorithm::kAuto);
  }

  void reduce_scatter(DataType t, ReduceOp op, size_t count) {
    const auto p = static_cast<size_t>(comm.size());
    auto send = buffer(count * p, t), recv = buffer(count, t);
    for (size_t i = 0; i < count * p; ++i)
      store_element(send.data(), i, t, input(comm.rank(), i, op, t));
    comm.reduce_scatter(send.data(), recv.data(), count, t, op);
    const auto what = fmt::format("reduce_scatter {} {} n={}", name(t), name(op), count);
    const size_t base = static_cast<size_t>(comm.rank()) * count;
    for (size_t i = 0; i < count; ++i) {
      expect(load_element(recv.data(), i, t), reference(comm.size(), base + i, op, t), t, what, i);
    }
  }

  void reduce(DataType t, ReduceOp op, size_t count, int root) {
    auto send = buffer(count, t), recv = buffer(count, t);
    for (size_t i = 0; i < count; ++i)
      store_element(send.data(), i, t, input(comm.rank(), i, op, t));
    comm.reduce(send.data(), recv.data(), count, t, op, root);
    if (comm.rank() != root) return;
    const auto what = fmt::format("reduce {} {} n={} root={}", name(t), name(op), count, root);
    for (size_t i = 0; i < count; ++i) {
      expect(load_element(recv.data(), i, t), reference(comm.size(), i, op, t), t, what, i);
    }
  }

  // Values that identify (source rank, element) exactly in every type.
  static double mark(int rank, size_t i) {
    return static_cast<double>((rank * 13 + static_cast<int>(i % 9)) % 120);
  }

  void all_gather(DataType t, size_t count) {
    const auto p = static_cast<size_t>(comm.size());
    auto send = buffer(count, t), recv = buffer(count * p, t);
    for (size_t i = 0; i < count; ++i) store_element(send.data(), i, t, mark(comm.rank(), i));
    comm.all_gather(send.data(), recv.data(), count, t);
    const auto what = fmt::format("all_gather {} n={}", name(t), count);
    for (size_t r = 0; r < p; ++r) {
      for (size_t i = 0; i < count; ++i) {
        expect(load_element(recv.data(), r * count + i, t), mark(static_cast<int>(r), i), t, what,
               r * count + i);
      }
    }
  }

  void broadcast(DataType t, size_t count, int root) {
    auto buf = buffer(count, t);
    if (comm.rank() == root) {
      for (size_t i = 0; i < count; ++i) store_element(buf.data(), i, t, mark(root, i));
    }
    comm.broadcast(buf.data(), count, t, root);
    const auto what = fmt::format("broadcast {} n={} root={}", name(t), count, root);
    for (size_t i = 0; i < count; ++i)
      expect(load_element(buf.data(), i, t), mark(root, i), t, what, i);
  }

  void all_to_all(DataType t, size_t count) {
    const auto p = static_cast<size_t>(comm.size());
    auto send = buffer(count * p, t), recv = buffer(count * p, t);
    // Block j (for rank j) holds mark(rank * p + j, i).
    for (size_t j = 0; j < p; ++j) {
      for (size_t i = 0; i < count; ++i) {
        store_element(send.data(), j * count + i, t,
                      mark(comm.rank() * comm.size() + static_cast<int>(j), i));
      }
    }
    comm.all_to_all(send.data(), recv.data(), count, t);
    const auto what = fmt::format("all_to_all {} n={}", name(t), count);
    for (size_t s = 0; s < p; ++s) {
      for (size_t i = 0; i < count; ++i) {
        expect(load_element(recv.data(), s * count + i, t),
               mark(static_cast<int>(s) * comm.size() + comm.rank(), i), t, what, s * count + i);
      }
    }
  }

  // Uneven blocks: rank s sends (s * 3 + d) % 4 * unit (+1 to itself) elements to d.
  void all_to_all_v(DataType t, size_t unit) {
    const auto p = static_cast<size_t>(comm.size());
    const auto me = static_cast<size_t>(comm.rank());
    auto amount = [&](size_t s, size_t d) { return (s * 3 + d) % 4 * unit + (s == d ? 1 : 0); };
    std::vector<size_t> sc(p), sd(p), rc(p), rd(p);
    size_t st = 0, rt = 0;
    for (size_t j = 0; j < p; ++j) {
      sc[j] = amount(me, j);
      sd[j] = st;
      st += sc[j];
      rc[j] = amount(j, me);
      rd[j] = rt;
      rt += rc[j];
    }
    auto send = buffer(st, t), recv = buffer(rt, t);
    for (size_t j = 0; j < p; ++j) {
      for (size_t i = 0; i < sc[j]; ++i)
        store_element(send.data(), sd[j] + i, t, mark(static_cast<int>(me * p + j), i));
    }
    comm.all_to_all_v(send.data(), sc, sd, recv.data(), rc, rd, t);
    const auto what = fmt::format("all_to_all_v {} unit={}", name(t), unit);
    for (size_t s = 0; s < p; ++s) {
      for (size_t i = 0; i < rc[s]; ++i) {
        expect(load_element(recv.data(), rd[s] + i, t), mark(static_cast<int>(s * p + me), i), t,
               what, rd[s] + i);
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Check spray::coll collectives across ranks (run under spray-run)"};
  size_t large_bytes = 3 << 20;
  int die_rank = -1;
  app.add_option("--large-bytes", large_bytes, "Bytes of the large cases");
  app.add_option("--die-rank", die_rank, "This rank exits inside an all-reduce (failure test)");
  CLI11_PARSE(app, argc, argv);

  try {
    auto comm = Communicator::from_environment();
    if (die_rank >= 0) {
      std::vector<float> v(1 << 16, 1.0f);
      comm->all_reduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum);  // all alive
      if (comm->rank() == die_rank) _exit(3);  // dies; the others must not hang
      comm->all_reduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
      fmt::print("rank {}: all_reduce completed without rank {}\n", comm->rank(), die_rank);
      return 1;
    }
    Checker c{*comm};
    const int p = comm->size();
    const size_t small[] = {0, 1, 7, 1000, 4099};
    for (DataType t : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (!is_valid(t, op)) continue;
        for (size_t n : small) {
          c.all_reduce(t, op, n, false);
          c.reduce_scatter(t, op, n);
          c.reduce(t, op, n, p - 1);
        }
        c.all_reduce(t, op, 333, true);
      }
      for (size_t n : small) {
        c.all_gather(t, n);
        c.broadcast(t, n, 0);
        c.broadcast(t, n, p / 2);
        c.all_to_all(t, n);
      }
      c.all_to_all_v(t, 5);
    }
    // Several MiB, so pieces and pipelining are exercised.
    for (DataType t : {DataType::kF32, DataType::kBF16, DataType::kI64}) {
      const size_t n = large_bytes / size_of(t) + 3;  // odd on purpose
      c.all_reduce(t, t == DataType::kI64 ? ReduceOp::kMax : ReduceOp::kSum, n, false);
      c.reduce_scatter(t, ReduceOp::kSum, n / static_cast<size_t>(p));
      c.all_gather(t, n / static_cast<size_t>(p));
      c.broadcast(t, n, p - 1);
      c.reduce(t, ReduceOp::kMin, n, 0);
      c.all_to_all(t, n / static_cast<size_t>(p) / 4);
    }
    for (int i = 0; i < 5; ++i) comm->barrier();
    if (c.failures > 0) {
      fmt::print(stderr, "rank {}: {} of {} checks failed\n", comm->rank(), c.failures, c.checks);
      return 1;
    }
    comm->barrier();
    if (comm->rank() == 0) {
      fmt::print("PASS {} ranks over {}: {} checks on rank 0 (kernels: {})\n", p, comm->provider(),
                 c.checks, kernel_isa());
    }
    return 0;
  } catch (const CollectiveError& e) {
    fmt::print(stderr, "CollectiveError: {}\n", e.what());
    return 2;
  }
}
