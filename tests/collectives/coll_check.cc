// Checks every collective of spray::coll in a real multi-process run (start it with
// spray-run -n N): every operation x type x reduction x size, each result compared
// element by element with a reference this program computes on its own from the inputs
// every rank is known to contribute. Rank 0 prints "PASS <checks>"; any mismatch prints
// what differs and exits 1.
//
//   spray-run -n 4 --provider tcp coll_check [--large-bytes N] [--die-rank R]
//
// --die-rank R: rank R exits abruptly inside an all-reduce; the others must fail with
// a CollectiveError (printed, exit 2) instead of hanging. --mismatch count|type: rank 1
// passes another count or type than the others; every rank must fail with exit 2.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "collectives/algorithms/algorithms.h"
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

  // Each algorithm in turn (every rank forces the same one), then the tuner's choice;
  // `queued`: through iall_reduce, several in flight at once.
  void all_reduce(DataType t, ReduceOp op, size_t count, bool in_place, bool queued = false) {
    constexpr AllReduceAlgorithm kAlgorithms[] = {
        AllReduceAlgorithm::kRing,         AllReduceAlgorithm::kRecursiveDoubling,
        AllReduceAlgorithm::kRabenseifner, AllReduceAlgorithm::kDoubleBinaryTree,
        AllReduceAlgorithm::kTwoShot,      AllReduceAlgorithm::kAuto};
    std::vector<std::vector<uint8_t>> sends, recvs;
    std::vector<CollectiveRequest> requests;
    for (const AllReduceAlgorithm algorithm : kAlgorithms) {
      auto send = buffer(count, t), recv = buffer(count, t);
      for (size_t i = 0; i < count; ++i) {
        store_element(send.data(), i, t, input(comm.rank(), i, op, t));
      }
      void* out = in_place ? send.data() : recv.data();
      comm.set_all_reduce_algorithm(algorithm);
      if (queued) {
        requests.push_back(comm.iall_reduce(send.data(), out, count, t, op));
        sends.push_back(std::move(send));  // the buffers stay put: vector moves keep them
        recvs.push_back(std::move(recv));
        continue;
      }
      comm.all_reduce(send.data(), out, count, t, op);
      check_all_reduce(out, t, op, count, algorithm, in_place ? " in place" : "");
      if (!in_place) {  // the send buffer is only read
        const auto what = fmt::format("all_reduce/{} {} {} n={}: send buffer", name(algorithm),
                                      name(t), name(op), count);
        for (size_t i = 0; i < count; ++i) {
          expect(load_element(send.data(), i, t), input(comm.rank(), i, op, t), t, what, i);
        }
      }
    }
    for (size_t k = 0; k < requests.size(); ++k) {
      requests[k].wait();
      check_all_reduce(in_place ? sends[k].data() : recvs[k].data(), t, op, count, kAlgorithms[k],
                       " queued");
    }
    comm.set_all_reduce_algorithm(AllReduceAlgorithm::kAuto);
  }

  void check_all_reduce(const void* out, DataType t, ReduceOp op, size_t count,
                        AllReduceAlgorithm algorithm, const char* how) {
    const auto what =
        fmt::format("all_reduce/{} {} {} n={}{}", name(algorithm), name(t), name(op), count, how);
    for (size_t i = 0; i < count; ++i) {
      expect(load_element(out, i, t), reference(comm.size(), i, op, t), t, what, i);
    }
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

  // Every all-to-all algorithm, then the tuner's choice.
  void all_to_all(DataType t, size_t count) {
    for (AllToAllAlgorithm a : kAllToAllAlgorithms) all_to_all(t, count, a);
    all_to_all(t, count, AllToAllAlgorithm::kAuto);
  }

  void all_to_all(DataType t, size_t count, AllToAllAlgorithm algorithm) {
    const auto p = static_cast<size_t>(comm.size());
    comm.set_all_to_all_algorithm(algorithm);
    auto send = buffer(count * p, t), recv = buffer(count * p, t);
    // Block j (for rank j) holds mark(rank * p + j, i).
    for (size_t j = 0; j < p; ++j) {
      for (size_t i = 0; i < count; ++i) {
        store_element(send.data(), j * count + i, t,
                      mark(comm.rank() * comm.size() + static_cast<int>(j), i));
      }
    }
    comm.all_to_all(send.data(), recv.data(), count, t);
    comm.set_all_to_all_algorithm(AllToAllAlgorithm::kAuto);
    const auto what = fmt::format("all_to_all/{} {} n={}", name(algorithm), name(t), count);
    for (size_t s = 0; s < p; ++s) {
      for (size_t i = 0; i < count; ++i) {
        expect(load_element(recv.data(), s * count + i, t),
               mark(static_cast<int>(s) * comm.size() + comm.rank(), i), t, what, s * count + i);
      }
    }
  }

  // Uneven blocks: rank s sends (s * 3 + d) % 4 * unit (+1 to itself) elements to d.
  void all_to_all_v(DataType t, size_t unit) {
    for (AllToAllAlgorithm a : {AllToAllAlgorithm::kPairwise, AllToAllAlgorithm::kSpreadOut}) {
      comm.set_all_to_all_algorithm(a);
      all_to_all_v_once(t, unit);
    }
    comm.set_all_to_all_algorithm(AllToAllAlgorithm::kAuto);
  }
  void all_to_all_v_once(DataType t, size_t unit) {
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

  // Non-blocking calls of every kind in flight together, then a blocking call that must
  // queue behind them; test() polled until the first completes.
  void queued_mix(size_t count) {
    const auto p = static_cast<size_t>(comm.size());
    const int me = comm.rank();
    const DataType t = DataType::kI32;
    auto bcast = buffer(count, t), gathered = buffer(count * p, t), mine = buffer(count, t);
    auto scatter_in = buffer(count * p, t), scattered = buffer(count, t);
    auto a2a_in = buffer(count * p, t), a2a_out = buffer(count * p, t);
    auto reduce_in = buffer(count, t), reduced = buffer(count, t);
    for (size_t i = 0; i < count; ++i) {
      if (me == 0) store_element(bcast.data(), i, t, mark(0, i));
      store_element(mine.data(), i, t, mark(me, i));
      store_element(reduce_in.data(), i, t, input(me, i, ReduceOp::kSum, t));
    }
    for (size_t i = 0; i < count * p; ++i) {
      store_element(scatter_in.data(), i, t, input(me, i, ReduceOp::kSum, t));
      store_element(a2a_in.data(), i, t,
                    mark(me * comm.size() + static_cast<int>(i / count), i % count));
    }
    std::vector<CollectiveRequest> r;
    r.push_back(comm.ibroadcast(bcast.data(), count, t, 0));
    r.push_back(comm.iall_gather(mine.data(), gathered.data(), count, t));
    r.push_back(
        comm.ireduce_scatter(scatter_in.data(), scattered.data(), count, t, ReduceOp::kSum));
    r.push_back(comm.iall_to_all(a2a_in.data(), a2a_out.data(), count, t));
    r.push_back(comm.ireduce(reduce_in.data(), reduced.data(), count, t, ReduceOp::kSum, 0));
    r.push_back(comm.ibarrier());
    int32_t one = 1, total = 0;  // blocking, queued behind all of the above
    comm.all_reduce(&one, &total, 1, t, ReduceOp::kSum);
    expect(total, comm.size(), t, "all_reduce after queued calls", 0);
    while (!r[0].test()) std::this_thread::yield();
    for (auto& q : r) q.wait();
    const auto what = fmt::format("queued mix n={}", count);
    for (size_t i = 0; i < count; ++i) {
      expect(load_element(bcast.data(), i, t), mark(0, i), t, what + " broadcast", i);
      expect(load_element(scattered.data(), i, t),
             reference(comm.size(), static_cast<size_t>(me) * count + i, ReduceOp::kSum, t), t,
             what + " reduce_scatter", i);
      if (me == 0) {
        expect(load_element(reduced.data(), i, t), reference(comm.size(), i, ReduceOp::kSum, t), t,
               what + " reduce", i);
      }
      for (size_t s = 0; s < p; ++s) {
        expect(load_element(gathered.data(), s * count + i, t), mark(static_cast<int>(s), i), t,
               what + " all_gather", i);
        expect(load_element(a2a_out.data(), s * count + i, t),
               mark(static_cast<int>(s) * comm.size() + me, i), t, what + " all_to_all", i);
      }
    }
  }

  // Quantised all-reduce: every element within the documented bound of the exact sum
  // of what the ranks passed, and the same bits on every rank.
  void compressed(DataType t, ReduceOp op, int bits, size_t group, size_t count) {
    const Compression z{bits, group};
    const int p = comm.size();
    // Rank r's value i: smooth with noise, different per rank, in [-3, 3].
    auto value = [&](int r, size_t i) {
      double v = 2.0 * std::sin(0.001 * static_cast<double>(i) + r) +
                 std::cos(0.37 * static_cast<double>(i * (r + 1)));
      uint64_t cell = 0;
      store_element(&cell, 0, t, v);  // as the type holds it
      return load_element(&cell, 0, t);
    };
    auto send = buffer(count, t), recv = buffer(count, t);
    for (size_t i = 0; i < count; ++i) store_element(send.data(), i, t, value(comm.rank(), i));
    comm.all_reduce_compressed(send.data(), recv.data(), count, t, op, z);

    const std::vector<size_t> blocks = algo::equal_blocks(count, p);
    const double steps = (1 << bits) - 1;
    const auto what = fmt::format("all_reduce_compressed INT{} g={} {} {} n={}", bits, group,
                                  name(t), name(op), count);
    for (size_t b = 0; b + 1 < blocks.size(); ++b) {  // block b is reduced by rank b
      for (size_t g = blocks[b]; g < blocks[b + 1]; g += group) {
        const size_t end = std::min(blocks[b + 1], g + group);
        // Stage 1: each other rank's group quantised (error <= range / 2 steps).
        double stage1 = 0, lo = 1e300, hi = -1e300, magnitude = 0;
        for (int r = 0; r < p; ++r) {
          double rlo = 1e300, rhi = -1e300;
          for (size_t i = g; i < end; ++i) {
            rlo = std::min(rlo, value(r, i));
            rhi = std::max(rhi, value(r, i));
          }
          if (r != static_cast<int>(b)) stage1 += (rhi - rlo) / (2 * steps);
        }
        for (size_t i = g; i < end; ++i) {
          double sum = 0;
          for (int r = 0; r < p; ++r) {
            sum += value(r, i);
            magnitude += std::fabs(value(r, i));
          }
          lo = std::min(lo, sum);
          hi = std::max(hi, sum);
        }
        // Stage 2: the partial sums span at most the exact range plus twice stage 1.
        double bound = stage1 + (hi - lo + 2 * stage1) / (2 * steps) + 1e-5 * magnitude;
        for (size_t i = g; i < end; ++i) {
          double want = 0;
          for (int r = 0; r < p; ++r) want += value(r, i);
          double slack = bound + std::fabs(want) * (t == DataType::kF16    ? 1.0 / 1024
                                                    : t == DataType::kBF16 ? 1.0 / 128
                                                                           : 1e-6);
          if (op == ReduceOp::kAvg) {
            want /= p;
            slack /= p;
          }
          ++checks;
          const double got = load_element(recv.data(), i, t);
          if (std::fabs(got - want) > slack && ++failures <= 10) {
            fmt::print(stderr, "rank {}: {} element {}: got {} want {} (bound {})\n", comm.rank(),
                       what, i, got, want, slack);
          }
        }
      }
    }
    // The same bits everywhere: the bytes' sum and xor agree across ranks.
    uint64_t digest[2] = {0, 0};
    for (size_t i = 0; i < count * size_of(t); ++i) {
      digest[0] += recv[i] * (i + 1);
      digest[1] ^= uint64_t{recv[i]} << (8 * (i % 8));
    }
    uint64_t low[2], high[2];
    comm.all_reduce(digest, low, 2, DataType::kU64, ReduceOp::kMin);
    comm.all_reduce(digest, high, 2, DataType::kU64, ReduceOp::kMax);
    ++checks;
    if (low[0] != high[0] || low[1] != high[1]) {
      ++failures;
      fmt::print(stderr, "rank {}: {}: ranks hold different results\n", comm.rank(), what);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Check spray::coll collectives across ranks (run under spray-run)"};
  size_t large_bytes = 3 << 20;
  int die_rank = -1;
  std::string mismatch;
  app.add_option("--large-bytes", large_bytes, "Bytes of the large cases");
  app.add_option("--die-rank", die_rank, "This rank exits inside an all-reduce (failure test)");
  app.add_option("--mismatch", mismatch,
                 "count: rank 1 passes one more element; type: rank 1 passes i32 for f32 "
                 "(run with SPRAY_COLL_VERIFY=1). Every rank must fail (exit 2)")
      ->check(CLI::IsMember({"count", "type"}));
  CLI11_PARSE(app, argc, argv);

  try {
    auto comm = Communicator::from_environment();
    if (!mismatch.empty()) {
      std::vector<float> v(1001, 1.0f);
      const bool odd_one = comm->rank() == 1;
      const size_t count = mismatch == "count" && odd_one ? 1001 : 1000;
      const DataType type = mismatch == "type" && odd_one ? DataType::kI32 : DataType::kF32;
      comm->all_reduce(v.data(), v.data(), count, type, ReduceOp::kSum);
      fmt::print("rank {}: a mismatched all_reduce completed\n", comm->rank());
      return 1;
    }
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
      if (t == DataType::kF32 || t == DataType::kI64)
        c.all_reduce(t, ReduceOp::kSum, 1000, false, true);
      for (size_t n : small) {
        c.all_gather(t, n);
        c.broadcast(t, n, 0);
        c.broadcast(t, n, p / 2);
        c.all_to_all(t, n);
      }
      c.all_to_all_v(t, 5);
    }
    for (size_t n : {size_t{0}, size_t{1000}, large_bytes / 64}) c.queued_mix(n);
    for (DataType t : {DataType::kF32, DataType::kF16, DataType::kBF16}) {
      for (int bits : {8, 4}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{4099}}) {
          c.compressed(t, ReduceOp::kSum, bits, 64, n);
        }
        c.compressed(t, ReduceOp::kAvg, bits, 100, 777);
      }
    }
    c.compressed(DataType::kF32, ReduceOp::kSum, 4, 32, large_bytes / 4 + 3);
    // Several MiB, so pieces and pipelining are exercised.
    for (DataType t : {DataType::kF32, DataType::kBF16, DataType::kI64}) {
      const size_t n = large_bytes / size_of(t) + 3;  // odd on purpose
      c.all_reduce(t, t == DataType::kI64 ? ReduceOp::kMax : ReduceOp::kSum, n, false);
      if (t == DataType::kF32) c.all_reduce(t, ReduceOp::kSum, n, true);  // in place
      c.reduce_scatter(t, ReduceOp::kSum, n / static_cast<size_t>(p));
      c.all_gather(t, n / static_cast<size_t>(p));
      c.broadcast(t, n, p - 1);
      c.reduce(t, ReduceOp::kMin, n, 0);
      c.all_to_all(t, n / static_cast<size_t>(p) / 4);
    }
    // All-to-all blocks of more than one piece (all-to-all cuts larger pieces than the
    // others; odd on purpose). Up to 4 ranks: 32 MiB of buffers a rank.
    if (p <= 4) c.all_to_all(DataType::kI32, algo::kAllToAllPieceBytes / 4 + 3);
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
