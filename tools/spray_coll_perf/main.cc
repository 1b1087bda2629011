// spray-coll-perf: nccl-tests-style benchmark of spray::coll, one row per size.
//
//   spray-run -n 4 --provider spray spray-coll-perf --coll allreduce -b 8 -e 256M -f 2 --check
//
// Sizes follow nccl-tests: for all-reduce, broadcast and reduce the size is one rank's
// buffer; for all-gather the gathered output; for reduce-scatter the input; for
// all-to-all one rank's whole send buffer. Time is the mean per iteration, the slowest
// rank's. algbw = size / time; busbw = algbw x the nccl-tests factor (all-reduce
// 2(n-1)/n; reduce-scatter, all-gather and all-to-all (n-1)/n; broadcast and reduce 1),
// which makes busbw comparable with the link's bandwidth whatever the rank count. The
// last column names the algorithm that ran (the tuner's pick unless --algo forces one).
//
// --algo compressed_int8 | compressed_int4 runs the quantised all-reduce; its rows add
// the bytes on the wire saved against the f32 ring, and --check counts elements
// outside the error bound instead of inexact ones. --calibrate FILE measures the cost
// model of the tuner and writes it (use it with SPRAY_COLL_TUNING=FILE), and prints each
// algorithm's measured times with the tuner's pick per size.
// With --check, wrong elements make the exit status 3.
// --huge-pages puts the send and receive buffers on 2 MiB-aligned memory advised for
// transparent huge pages, as an application may allocate them; by default they are
// ordinary heap memory, as MPI benchmarks allocate theirs. --receive-offset N starts the
// receive buffer N bytes past where it was allocated, which moves it relative to the send
// buffer modulo 4 KiB: a copy from one to the other at a distance of 1-63 bytes is the
// slow case of `rep movsb` on some CPUs (transport/base/copy_bytes.h).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "collectives/algorithms/algorithms.h"
#include "collectives/communicator.h"

namespace {

using namespace spray::coll;

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll };

struct CollInfo {
  const char* name;
  Coll coll;
};
constexpr CollInfo kColls[] = {
    {"allreduce", Coll::kAllReduce}, {"reducescatter", Coll::kReduceScatter},
    {"allgather", Coll::kAllGather}, {"broadcast", Coll::kBroadcast},
    {"reduce", Coll::kReduce},       {"alltoall", Coll::kAllToAll},
};

double bus_factor(Coll c, int n) {
  const double r = n;
  switch (c) {
    case Coll::kAllReduce:
      return 2 * (r - 1) / r;
    case Coll::kReduceScatter:
    case Coll::kAllGather:
    case Coll::kAllToAll:
      return (r - 1) / r;
    default:
      return 1;
  }
}

// calibrate()'s algorithm times as one table per collective: a row per measured size,
// a column per algorithm (us per call, the slowest rank's), then the tuner's pick.
template <typename Algorithm>
void print_measured(const char* what, const char* size_label,
                    const std::map<Algorithm, std::vector<TimeSample>>& times,
                    Algorithm (CostModel::*pick)(size_t, int) const, const CostModel& model,
                    int ranks) {
  if (times.empty()) return;
  fmt::print("# {}, {} ranks: measured time per call (us)\n# {:>10}", what, ranks, size_label);
  for (const auto& column : times) fmt::print(" {:>18}", name(column.first));
  fmt::print("  {}\n", "tuner's pick");
  const std::vector<TimeSample>& sizes = times.begin()->second;
  for (size_t row = 0; row < sizes.size(); ++row) {
    fmt::print("  {:>10}", sizes[row].bytes);
    for (const auto& column : times) fmt::print(" {:>18.1f}", column.second.at(row).us);
    fmt::print("  {}\n", name((model.*pick)(sizes[row].bytes, ranks)));
  }
}

// "256M", "4K", "8" -> bytes.
size_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = std::stod(s, &used);
  const std::string unit = s.substr(used);
  if (unit == "K" || unit == "k") v *= 1024;
  if (unit == "M" || unit == "m") v *= 1024 * 1024;
  if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

// The benchmark's buffers: heap memory, or with --huge-pages memory advised for
// transparent huge pages (dp::map_for_huge_pages). Peers on one host read messages out of
// the sender's memory with process_vm_readv, which pins 4 KiB pages one by one, so
// huge-page buffers make large collectives there much faster.
struct BufferAllocator {
  using value_type = uint8_t;
  template <class U>
  struct rebind {  // only ever bytes
    static_assert(std::is_same_v<U, uint8_t>);
    using other = BufferAllocator;
  };
  bool huge_pages = false;
  uint8_t* allocate(size_t n) {
    if (!huge_pages) return std::allocator<uint8_t>{}.allocate(n);
    return spray::dp::map_for_huge_pages(n).data();
  }
  void deallocate(uint8_t* p, size_t n) {
    if (!huge_pages) return std::allocator<uint8_t>{}.deallocate(p, n);
    spray::dp::unmap_for_huge_pages(p, n);
  }
  bool operator==(const BufferAllocator&) const = default;
};
using Buffer = std::vector<uint8_t, BufferAllocator>;

// One benchmark point: buffers sized for `bytes` under nccl-tests' convention, filled
// with values whose results are exact, and the check of one result.
struct Point {
  Coll coll;
  DataType type;
  ReduceOp op;
  int n;
  int rank;
  std::optional<Compression> compression;  // all-reduce only
  size_t count;           // elements per rank-block, as the collective call takes it
  size_t receive_offset;  // bytes the receive buffer starts past recv.data()
  Buffer send, recv;

  Point(Coll c, DataType t, ReduceOp o, int ranks, int me, size_t bytes,
        std::optional<Compression> z, bool huge_pages, size_t receive_offset_bytes)
      : coll(c),
        type(t),
        op(o),
        n(ranks),
        rank(me),
        compression(z),
        receive_offset(receive_offset_bytes),
        send(BufferAllocator{huge_pages}),
        recv(BufferAllocator{huge_pages}) {
    const size_t es = size_of(t);
    const auto un = static_cast<size_t>(ranks);
    size_t send_elems = 0, recv_elems = 0;
    switch (c) {
      case Coll::kAllReduce:
      case Coll::kBroadcast:
      case Coll::kReduce:
        count = bytes / es;
        send_elems = recv_elems = count;
        break;
      case Coll::kAllGather:
        count = bytes / es / un;
        send_elems = count;
        recv_elems = count * un;
        break;
      case Coll::kReduceScatter:
        count = bytes / es / un;
        send_elems = count * un;
        recv_elems = count;
        break;
      case Coll::kAllToAll:
        count = bytes / es / un;
        send_elems = recv_elems = count * un;
        break;
    }
    send.assign(std::max<size_t>(1, send_elems * es), 0);
    recv.assign(receive_offset + std::max<size_t>(1, recv_elems * es), 0);
    for (size_t i = 0; i < send_elems; ++i) store_element(send.data(), i, t, value(rank, i));
  }
  // Where the collective writes its result.
  uint8_t* result() { return recv.data() + receive_offset; }
  const uint8_t* result() const { return recv.data() + receive_offset; }
  size_t bytes_reported() const {
    const size_t es = size_of(type), un = static_cast<size_t>(n);
    return coll == Coll::kAllReduce || coll == Coll::kBroadcast || coll == Coll::kReduce
               ? count * es
               : count * es * un;
  }
  // Small integers: every reduction of them is exact in every type.
  static double value(int r, size_t i) {
    return static_cast<double>(static_cast<size_t>(r + 1) + i % 3);
  }

  void run(Communicator& c) {
    switch (coll) {
      case Coll::kAllReduce:
        if (compression) {
          return c.all_reduce_compressed(send.data(), result(), count, type, op, *compression);
        }
        return c.all_reduce(send.data(), result(), count, type, op);
      case Coll::kReduceScatter:
        return c.reduce_scatter(send.data(), result(), count, type, op);
      case Coll::kAllGather:
        return c.all_gather(send.data(), result(), count, type);
      case Coll::kBroadcast:
        if (rank == 0) std::memcpy(result(), send.data(), count * size_of(type));
        return c.broadcast(result(), count, type, 0);
      case Coll::kReduce:
        return c.reduce(send.data(), result(), count, type, op, 0);
      case Coll::kAllToAll:
        return c.all_to_all(send.data(), result(), count, type);
    }
  }

  double reduced(size_t i) const {
    double acc = value(0, i);
    for (int r = 1; r < n; ++r) acc = combine_scalar(op, acc, value(r, i));
    return op == ReduceOp::kAvg ? acc / n : acc;
  }

  // Elements of this rank's result that differ from what the inputs imply.
  size_t wrong() const {
    size_t bad = 0;
    // Quantised: every rank's groups span 2 (inputs r + 1 + i % 3), the sum's 2n; the
    // bound of compressed_all_reduce.cc is then (2n + 2n) / 2 steps, plus slack for
    // f32 and the output type's rounding.
    const double tolerance = compression ? (4.0 * n + 1) / (2 * ((1 << compression->bits) - 1)) *
                                                   (op == ReduceOp::kAvg ? 1.0 / n : 1.0) +
                                               0.01 * (type == DataType::kF32 ? 0.0 : reduced(2))
                                         : 0;
    auto expect = [&](size_t i, double want) {
      uint64_t cell = 0;  // the expected value as the type holds it
      store_element(&cell, 0, type, want);
      if (std::fabs(load_element(result(), i, type) - load_element(&cell, 0, type)) > tolerance) {
        ++bad;
      }
    };
    const auto un = static_cast<size_t>(n);
    const auto me = static_cast<size_t>(rank);
    switch (coll) {
      case Coll::kAllReduce:
        for (size_t i = 0; i < count; ++i) expect(i, reduced(i));
        break;
      case Coll::kReduce:
        if (rank == 0) {
          for (size_t i = 0; i < count; ++i) expect(i, reduced(i));
        }
        break;
      case Coll::kReduceScatter:
        for (size_t i = 0; i < count; ++i) expect(i, reduced(me * count + i));
        break;
      case Coll::kBroadcast:
        for (size_t i = 0; i < count; ++i) expect(i, value(0, i));
        break;
      case Coll::kAllGather:
        for (size_t r = 0; r < un; ++r) {
          for (size_t i = 0; i < count; ++i) expect(r * count + i, value(static_cast<int>(r), i));
        }
        break;
      case Coll::kAllToAll:
        for (size_t r = 0; r < un; ++r) {
          for (size_t i = 0; i < count; ++i) {
            expect(r * count + i, value(static_cast<int>(r), me * count + i));
          }
        }
        break;
    }
    return bad;
  }
};

// The algorithm a row ran, for its last column.
std::string algorithm_of(const Communicator& c, const Point& p) {
  if (p.compression) return fmt::format("compressed_int{}", p.compression->bits);
  const size_t es = size_of(p.type);
  if (p.coll == Coll::kAllReduce)
    return std::string(name(c.all_reduce_algorithm_for(p.count * es)));
  if (p.coll == Coll::kAllToAll) return std::string(name(c.all_to_all_algorithm_for(p.count * es)));
  return "-";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nccl-tests-style benchmark of spray::coll (run under spray-run)"};
  std::string coll_name = "allreduce", type_name = "f32", op_name = "sum", algo = "auto";
  std::string min_text = "8", max_text = "64M", json_path, provider, calibrate_path;
  std::vector<std::string> size_list;
  double factor = 2;
  int iters = 0, warmup = 2;
  size_t group_size = 64;
  bool check = false, huge_pages = false, per_call = false;
  size_t receive_offset = 0;
  app.add_option("--coll", coll_name,
                 "allreduce|reducescatter|allgather|broadcast|reduce|alltoall");
  app.add_option("-b,--minbytes", min_text, "Smallest size (8, 4K, 1M, ...)");
  app.add_option("-e,--maxbytes", max_text, "Largest size");
  app.add_option("-f,--stepfactor", factor, "Size multiplier between rows")
      ->check(CLI::Range(1.01, 1024.0));
  app.add_option("--sizes", size_list, "Exact sizes instead of a sweep (4K,1M,64M)")
      ->delimiter(',');
  app.add_option("-d,--datatype", type_name, "f32|f64|f16|bf16|i8|u8|i32|u32|i64|u64");
  app.add_option("-o,--op", op_name, "sum|prod|min|max|avg");
  app.add_option("-n,--iters", iters, "Iterations per size (0: about 256 MiB moved, 2..50)");
  app.add_option("-w,--warmup", warmup, "Untimed iterations per size");
  app.add_option(
      "--algo", algo,
      "auto (the tuner picks); allreduce: ring, recursive_doubling, rabenseifner, two_shot, "
      "double_binary_tree, compressed_int8, compressed_int4; alltoall: pairwise, "
      "bruck, spread_out");
  app.add_option("--group-size", group_size, "Values per quantisation group (compressed_*)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--provider", provider, "libfabric provider (default: SPRAY_PROVIDER, else tcp)");
  app.add_flag("-c,--check", check, "Count wrong elements in every result");
  app.add_flag("--huge-pages", huge_pages,
               "Send and receive buffers on transparent huge pages (default: heap memory)");
  app.add_option("--receive-offset", receive_offset,
                 "Bytes the receive buffer starts past its allocation (0-4095): moves it "
                 "relative to the send buffer modulo 4 KiB")
      ->check(CLI::Range(size_t{0}, size_t{4095}));
  app.add_flag("--per-call", per_call,
               "After each row, every timed call's time (us, slowest rank's), in order: shows "
               "a warm-up that the mean hides");
  app.add_option("--json", json_path, "Also write the rows as JSON to this file");
  app.add_option("--calibrate", calibrate_path,
                 "Measure the tuner's cost model on this fabric, write it to this file, exit");
  CLI11_PARSE(app, argc, argv);

  const CollInfo* which = nullptr;
  for (const CollInfo& c : kColls) {
    if (coll_name == c.name) which = &c;
  }
  const auto type = parse_data_type(type_name);
  const auto op = parse_reduce_op(op_name);
  std::optional<Compression> compression;
  std::optional<AllReduceAlgorithm> all_reduce_algo;
  std::optional<AllToAllAlgorithm> all_to_all_algo;
  if (algo == "compressed_int8" || algo == "compressed_int4") {
    compression = Compression{algo.back() == '8' ? 8 : 4, group_size};
  } else if (which && which->coll == Coll::kAllReduce) {
    all_reduce_algo = parse_all_reduce_algorithm(algo);
  } else if (which && which->coll == Coll::kAllToAll) {
    all_to_all_algo = parse_all_to_all_algorithm(algo);
  }
  const bool algo_ok = algo == "auto" || all_reduce_algo || all_to_all_algo ||
                       (compression && which && which->coll == Coll::kAllReduce);
  if (!which || !type || !op || !algo_ok) {
    fmt::print(stderr, "spray-coll-perf: unknown {}\n",
               !which  ? "--coll"
               : !type ? "--datatype"
               : !op   ? "--op"
                       : "--algo for this collective");
    return 2;
  }
  try {
    if (!provider.empty()) setenv("SPRAY_PROVIDER", provider.c_str(), 1);  // the flag wins
    auto comm = Communicator::from_environment();
    const int n = comm->size();
    const bool root = comm->rank() == 0;
    if (!calibrate_path.empty()) {
      // Rank 0 opens the file first, so a path it cannot write fails every rank at once
      // rather than after the seconds of measuring.
      std::ofstream file;
      int unwritable = 0;
      if (root) {
        file.open(calibrate_path);
        unwritable = file ? 0 : 1;
      }
      comm->all_reduce(&unwritable, &unwritable, 1, DataType::kI32, ReduceOp::kMax);
      if (unwritable != 0) {
        if (root) fmt::print(stderr, "spray-coll-perf: cannot write '{}'\n", calibrate_path);
        return 1;
      }
      const CostModel model = calibrate(*comm);
      if (root) {
        file << model.to_json() << "\n";
        file.close();
        if (!file) {
          fmt::print(stderr, "spray-coll-perf: writing '{}' failed\n", calibrate_path);
          unwritable = 1;
        }
        fmt::print(
            "# cost model written to {} (use SPRAY_COLL_TUNING={}): alpha {:.2f} us, beta {:.3g} "
            "us/B ({:.2f} GB/s), gamma {:.3g} us/B ({:.2f} GB/s)\n",
            calibrate_path, calibrate_path, model.alpha_us, model.beta_us_per_byte,
            1e-3 / model.beta_us_per_byte, model.gamma_us_per_byte, 1e-3 / model.gamma_us_per_byte);
        print_measured("all-reduce", "size(B)", model.measured.all_reduce,
                       &CostModel::best_all_reduce, model, n);
        print_measured("all-to-all", "block(B)", model.measured.all_to_all,
                       &CostModel::best_all_to_all, model, n);
      }
      comm->barrier();
      return unwritable;
    }
    if (all_reduce_algo) comm->set_all_reduce_algorithm(*all_reduce_algo);
    if (all_to_all_algo) comm->set_all_to_all_algorithm(*all_to_all_algo);
    const size_t min_bytes = parse_size(min_text), max_bytes = parse_size(max_text);
    std::vector<size_t> sizes;
    for (double s = static_cast<double>(std::max<size_t>(min_bytes, 1));
         size_list.empty() && s <= static_cast<double>(max_bytes); s *= factor) {
      sizes.push_back(static_cast<size_t>(s));
    }
    for (const std::string& s : size_list) sizes.push_back(parse_size(s));
    nlohmann::json rows = nlohmann::json::array();
    double total_wrong = 0;  // every rank's, all sizes (--check)
    if (root) {
      fmt::print("# spray-coll-perf: {} {} {} over '{}' ({}), {} ranks; cost model: {}{}{}\n",
                 which->name, name(*type), name(*op), comm->provider(), comm->opened_path(), n,
                 comm->cost_model().source, huge_pages ? "; buffers on huge pages" : "",
                 receive_offset ? fmt::format("; receive buffer {} bytes on", receive_offset) : "");
      if (compression) {
        fmt::print(
            "# quantised to INT{} in groups of {}; 'wire' = bytes on the wire saved "
            "against the {} ring all-reduce\n",
            compression->bits, compression->group_size, name(*type));
      }
      fmt::print("# {:>12} {:>12} {:>6} {:>5} {:>11} {:>9} {:>9} {:>8}  {}\n", "size(B)", "count",
                 "type", "op", "time(us)", "algbw", "busbw", "#wrong",
                 compression ? "wire" : "algorithm");
    }
    const bool progress = root && isatty(STDERR_FILENO);
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (progress) fmt::print(stderr, "\r[{}/{}] {} B ", k + 1, sizes.size(), sizes[k]);
      Point p(which->coll, *type, *op, n, comm->rank(), sizes[k], compression, huge_pages,
              receive_offset);
      const size_t moved = std::max<size_t>(p.bytes_reported(), 1);
      const int reps =
          iters > 0 ? iters : static_cast<int>(std::clamp<size_t>((256u << 20) / moved, 2, 50));
      for (int i = 0; i < warmup; ++i) p.run(*comm);
      comm->barrier();
      // Per call (--per-call): each call's time on this rank (one clock read a call, the
      // calls back to back), then each call's slowest rank's, in one all-reduce after the
      // timed loop rather than one a call.
      std::vector<double> call_us(per_call ? static_cast<size_t>(reps) : 0);
      const auto start = std::chrono::steady_clock::now();
      auto call_start = start;
      for (int i = 0; i < reps; ++i) {
        p.run(*comm);
        if (per_call) {
          const auto now = std::chrono::steady_clock::now();
          call_us[static_cast<size_t>(i)] =
              std::chrono::duration<double, std::micro>(now - call_start).count();
          call_start = now;
        }
      }
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          reps;
      comm->all_reduce(&us, &us, 1, DataType::kF64, ReduceOp::kMax);  // the slowest rank
      if (per_call) {
        comm->all_reduce(call_us.data(), call_us.data(), call_us.size(), DataType::kF64,
                         ReduceOp::kMax);
      }
      double wrong = check ? static_cast<double>(p.wrong()) : 0;
      comm->all_reduce(&wrong, &wrong, 1, DataType::kF64, ReduceOp::kSum);
      total_wrong += wrong;
      const double algbw = static_cast<double>(p.bytes_reported()) / us / 1e3;  // GB/s
      const double busbw = algbw * bus_factor(which->coll, n);
      if (!root) continue;
      if (progress) fmt::print(stderr, "\r");
      // Compressed: all ranks' bytes on the wire against the ring's 2 (n - 1) buffers.
      const double wire_saved =
          compression && p.count > 0 && n > 1
              ? 1.0 - static_cast<double>(
                          algo::compressed_all_reduce_wire_bytes(p.count, n, *compression)) /
                          (2.0 * (n - 1) * static_cast<double>(p.bytes_reported()))
              : 0.0;
      const std::string last =
          compression ? fmt::format("{:.1f}%", 100 * wire_saved) : algorithm_of(*comm, p);
      fmt::print("  {:>12} {:>12} {:>6} {:>5} {:>11.1f} {:>9.3f} {:>9.3f} {:>8}  {}\n",
                 p.bytes_reported(), p.count, name(*type), name(*op), us, algbw, busbw,
                 check ? fmt::format("{}", static_cast<uint64_t>(wrong)) : std::string("-"), last);
      if (per_call) fmt::print("# per call (us, slowest rank): {:.1f}\n", fmt::join(call_us, " "));
      std::fflush(stdout);
      nlohmann::json row{
          {"size", p.bytes_reported()},
          {"count", p.count},
          {"time_us", us},
          {"algbw_gbps", algbw},
          {"busbw_gbps", busbw},
          {"algorithm", algorithm_of(*comm, p)},
          {"wrong", check ? nlohmann::json(static_cast<uint64_t>(wrong)) : nlohmann::json()}};
      if (compression) row["wire_bytes_saved_fraction"] = wire_saved;
      if (per_call) row["call_us"] = call_us;
      rows.push_back(row);
    }
    if (root && !json_path.empty()) {
      nlohmann::json out{{"collective", which->name},
                         {"type", name(*type)},
                         {"op", name(*op)},
                         {"provider", comm->provider()},
                         {"ranks", n},
                         {"rows", rows},
                         {"huge_pages", huge_pages},
                         {"receive_offset", receive_offset},
                         {"opened_path", comm->opened_path()}};
      std::ofstream(json_path) << out.dump(2) << "\n";
    }
    comm->barrier();
    if (total_wrong > 0) {
      if (root) fmt::print(stderr, "spray-coll-perf: {} wrong elements\n", total_wrong);
      return 3;
    }
    return 0;
  } catch (const CollectiveError& e) {
    fmt::print(stderr, "CollectiveError: {}\n", e.what());
    return 2;
  }
}
