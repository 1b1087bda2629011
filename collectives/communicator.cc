#include "collectives/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/bootstrap/store.h"
#include "collectives/reduce_kernels.h"
// The caller's data is copied with copy_bytes (move_bytes where buffers might overlap), a
// memory helper with no transport in it: on some CPUs glibc's memcpy ran 15-30x slower
// when the destination lay 1-63 bytes past the source modulo 4 KiB (copy_bytes.h).
#include "transport/base/copy_bytes.h"

namespace spray::coll {
namespace {

// Operation names, indexed by CallSignature::operation.
constexpr const char* kOperations[] = {
    "all_reduce", "all_reduce_compressed", "reduce_scatter", "all_gather", "broadcast", "reduce",
    "all_to_all", "all_to_all_v",          "barrier"};

uint8_t operation_code(const char* what) {
  for (uint8_t i = 0; i < std::size(kOperations); ++i) {
    if (std::strcmp(kOperations[i], what) == 0) return i;
  }
  return 0xff;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw CollectiveError(fmt::format("{} is not set (start ranks with spray-run)", name));
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 65535) {
    throw CollectiveError(fmt::format("{}='{}' is not a rank number", name, v));
  }
  return static_cast<int>(n);
}

// An algorithm named by an environment variable, or `fallback` when it is unset.
template <typename Algorithm, typename Parse>
Algorithm env_algorithm(const char* variable, Algorithm fallback, Parse parse,
                        std::span<const Algorithm> choices) {
  const char* a = std::getenv(variable);
  if (!a || !*a) return fallback;
  if (const auto algo = parse(a)) return *algo;
  std::string known = "auto";
  for (Algorithm c : choices) known += fmt::format(", {}", name(c));
  throw CollectiveError(fmt::format("{}='{}' is not one of: {}", variable, a, known));
}

void check_root(int root, int size, const char* op) {
  if (root < 0 || root >= size) {
    throw CollectiveError(
        fmt::format("{}: root {} is not a rank of a group of {}", op, root, size));
  }
}

// The most bytes a count may describe: no buffer is larger than half the address space.
// A garbage count (a negative int cast to size_t, an uninitialised variable) would
// otherwise wrap around when multiplied by the element size and give the call's copies
// and scratch a wrong, small size.
constexpr size_t kMaxBufferBytes = PTRDIFF_MAX;

// Elements of `type` that fit in kMaxBufferBytes.
size_t max_elements(DataType type) {
  return kMaxBufferBytes / size_of(type);
}

// Refuses null buffers for a non-empty call and counts no buffer can hold: `blocks`
// blocks of `count` elements (all-gather's output, reduce-scatter's input: one per rank).
void check_buffers(const void* send, const void* recv, size_t count, DataType type, size_t blocks,
                   const char* op) {
  if (count > max_elements(type) / blocks) {
    throw CollectiveError(
        fmt::format("{}: a count of {} {} elements{} is larger than any buffer", op, count,
                    name(type), blocks > 1 ? fmt::format(" ({} blocks of them)", blocks) : ""));
  }
  if (count > 0 && (!send || !recv)) throw CollectiveError(fmt::format("{}: null buffer", op));
}

void check_reduction(DataType type, ReduceOp op, const char* call) {
  if (!is_valid(type, op)) {
    throw CollectiveError(fmt::format("{}: {} is not defined for {}", call, name(op), name(type)));
  }
}

}  // namespace

std::unique_ptr<Communicator> Communicator::from_environment(CommunicatorOptions options) {
  const int rank = env_int("SPRAY_RANK");
  const int size = env_int("SPRAY_SIZE");
  const char* store = std::getenv("SPRAY_STORE");
  if (!store || !*store)
    throw CollectiveError("SPRAY_STORE is not set (start ranks with spray-run)");
  if (const char* p = std::getenv("SPRAY_PROVIDER"); p && *p) options.provider = p;
  if (const char* t = std::getenv("SPRAY_COLL_TIMEOUT_MS"); t && *t) {
    options.timeout = std::chrono::milliseconds(std::strtol(t, nullptr, 10));
  }
  options.all_reduce =
      env_algorithm("SPRAY_COLL_ALLREDUCE_ALGO", options.all_reduce, parse_all_reduce_algorithm,
                    std::span<const AllReduceAlgorithm>(kAllReduceAlgorithms));
  options.all_to_all =
      env_algorithm("SPRAY_COLL_ALLTOALL_ALGO", options.all_to_all, parse_all_to_all_algorithm,
                    std::span<const AllToAllAlgorithm>(kAllToAllAlgorithms));
  if (const char* f = std::getenv("SPRAY_COLL_TUNING"); f && *f) options.cost_model_path = f;
  if (const char* v = std::getenv("SPRAY_COLL_VERIFY"); v && *v) {
    options.verify_calls = std::strcmp(v, "0") != 0;
  }
  return create(rank, size, store, options);
}

std::unique_ptr<Communicator> Communicator::create(int rank, int size, const std::string& store,
                                                   const CommunicatorOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw CollectiveError(fmt::format("rank {} is not within a group of {}", rank, size));
  }
  std::string error;
  std::unique_ptr<StoreServer> server;
  if (rank == 0 && !(server = StoreServer::start(store, error))) {
    throw CollectiveError("rank 0 cannot host the rendezvous store: " + error);
  }
  auto client = StoreClient::connect(store, options.timeout, error);
  if (!client) throw CollectiveError(fmt::format("rank {}: {}", rank, error));
  auto link = FabricLink::open(options.provider, error);
  if (!link) throw CollectiveError(fmt::format("rank {}: {}", rank, error));
  auto publish = [&](const std::string& key, const std::vector<uint8_t>& value) {
    if (!client->set(key, value, error)) {
      throw CollectiveError(fmt::format("rank {}: {}", rank, error));
    }
  };

  // Rank 0 reads the cost model once and hands every rank the same one, so that all
  // make the same algorithm choices.
  if (rank == 0) {
    std::string text = CostModel{}.to_json();
    if (!options.cost_model_path.empty()) {
      const auto model = CostModel::load(options.cost_model_path, error);
      text = model ? model->to_json() : "error: " + error;
      // Used all the same (it was asked for), but said: times measured over shared
      // memory pick badly for kernel UDP, and the reverse.
      if (model && !model->fabric.empty() && model->fabric != link->fabric_name()) {
        fmt::print(stderr,
                   "spray::coll: warning: cost model {} was measured over '{}', this run is "
                   "over '{}': its algorithm choices may not suit it\n",
                   options.cost_model_path, model->fabric, link->fabric_name());
      }
    }
    publish("cost_model", std::vector<uint8_t>(text.begin(), text.end()));
  }
  std::vector<uint8_t> model_text;
  if (!client->get("cost_model", options.timeout, model_text, error)) {
    throw CollectiveError(fmt::format("rank {}: no cost model from rank 0 ({})", rank, error));
  }
  const auto cost_model = CostModel::from_json(
      std::string_view(reinterpret_cast<const char*>(model_text.data()), model_text.size()), error);
  if (!cost_model) {
    throw CollectiveError(fmt::format(
        "rank {}: unusable cost model: {}", rank,
        std::string_view(reinterpret_cast<const char*>(model_text.data()), model_text.size())));
  }

  // A key written twice with different values means two processes took this rank.
  if (!client->set(fmt::format("addr/{}", rank), link->address(), error)) {
    throw CollectiveError(fmt::format("rank {}: {}{}", rank, error,
                                      error.find("already holds") != std::string::npos
                                          ? " (is another process using this SPRAY_RANK?)"
                                          : ""));
  }
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    if (!client->get(fmt::format("addr/{}", r), options.timeout, addresses[static_cast<size_t>(r)],
                     error)) {
      throw CollectiveError(
          fmt::format("rank {}: rank {} never published its address ({})", rank, r, error));
    }
  }
  if (!link->set_peers(addresses, error))
    throw CollectiveError(fmt::format("rank {}: {}", rank, error));
  // Rank 0 keeps the store up until everyone has read every address.
  publish(fmt::format("ready/{}", rank), {});
  if (rank == 0) {
    std::vector<uint8_t> ignored;
    for (int r = 1; r < size; ++r) {
      if (!client->get(fmt::format("ready/{}", r), options.timeout, ignored, error)) {
        throw CollectiveError(fmt::format("rank {} never finished joining ({})", r, error));
      }
    }
  }
  return std::unique_ptr<Communicator>(
      new Communicator(rank, size, std::move(link), std::move(server), options, *cost_model));
}

Communicator::Communicator(int rank, int size, std::unique_ptr<FabricLink> link,
                           std::unique_ptr<StoreServer> server, const CommunicatorOptions& options,
                           const CostModel& cost_model)
    : rank_(rank),
      size_(size),
      link_(std::move(link)),
      server_(std::move(server)),
      timeout_(options.timeout),
      all_reduce_algorithm_(options.all_reduce),
      all_to_all_algorithm_(options.all_to_all),
      verify_calls_(options.verify_calls),
      cost_model_(cost_model) {
  link_->set_post_timeout(timeout_);
}

Communicator::~Communicator() = default;

uint8_t* Communicator::scratch(unsigned slot, size_t bytes) {
  return scratch_[slot].get(bytes);  // uninitialised: every user writes before reading
}

AllReduceAlgorithm Communicator::all_reduce_algorithm_for(size_t bytes) const {
  if (all_reduce_algorithm_ != AllReduceAlgorithm::kAuto) return all_reduce_algorithm_;
  if (last_all_reduce_.bytes != bytes) {
    last_all_reduce_ = {bytes, cost_model_.best_all_reduce(bytes, size_)};
  }
  return last_all_reduce_.algorithm;
}

AllToAllAlgorithm Communicator::all_to_all_algorithm_for(size_t block_bytes) const {
  if (all_to_all_algorithm_ != AllToAllAlgorithm::kAuto) return all_to_all_algorithm_;
  if (last_all_to_all_.bytes != block_bytes) {
    last_all_to_all_ = {block_bytes, cost_model_.best_all_to_all(block_bytes, size_)};
  }
  return last_all_to_all_.algorithm;
}

CollectiveRequest Communicator::launch(Mode mode, const char* what, CallSignature signature,
                                       std::function<void()> body) {
  signature.operation = operation_code(what);
  auto call = [this, what, signature, body = std::move(body)] {
    if (verify_calls_) {
      ++sequence_;
      verify(what, signature);
    }
    ++sequence_;  // a new tag space for the call
    body();
  };
  if (mode == Mode::kBlocking) {
    calls_.run(call);
    return {};
  }
  return calls_.start(std::move(call));
}

void Communicator::verify(const char* what, const CallSignature& mine) {
  static_assert(sizeof(CallSignature) == 16);
  std::vector<CallSignature> all(static_cast<size_t>(size_));
  all[static_cast<size_t>(rank_)] = mine;
  algo::ring_all_gather(*this, all.data(), algo::fixed_blocks(sizeof(CallSignature), size_), 1, 0);
  auto describe = [](const CallSignature& s) {
    const char* op = s.operation < std::size(kOperations) ? kOperations[s.operation] : "?";
    return fmt::format("{}(type {}, op {}, count {}, root {})", op,
                       name(static_cast<DataType>(s.type)), name(static_cast<ReduceOp>(s.op)),
                       s.count, s.root);
  };
  for (int r = 0; r < size_; ++r) {
    if (std::memcmp(&all[static_cast<size_t>(r)], &mine, sizeof mine) != 0) {
      throw CollectiveError(fmt::format("{}: ranks disagree: rank {} called {}, rank {} called {}",
                                        what, rank_, describe(mine), r,
                                        describe(all[static_cast<size_t>(r)])));
    }
  }
}

CollectiveRequest Communicator::start_all_reduce(Mode mode, const void* send, void* recv,
                                                 size_t count, DataType type, ReduceOp op) {
  check_buffers(send, recv, count, type, 1, "all_reduce");
  check_reduction(type, op, "all_reduce");
  const AllReduceAlgorithm algorithm = all_reduce_algorithm_for(count * size_of(type));
  CallSignature s{
      .type = static_cast<uint8_t>(type), .op = static_cast<uint8_t>(op), .count = count};
  return launch(mode, "all_reduce", s, [=, this] {
    // Rabenseifner and two-shot read `send` themselves; the others work in place in recv.
    const bool reads_send =
        algorithm == AllReduceAlgorithm::kRabenseifner || algorithm == AllReduceAlgorithm::kTwoShot;
    if (!reads_send && send != recv && count > 0) move_bytes(recv, send, count * size_of(type));
    switch (algorithm) {
      case AllReduceAlgorithm::kRecursiveDoubling:
        algo::recursive_doubling_all_reduce(*this, recv, count, type, op);
        break;
      case AllReduceAlgorithm::kRabenseifner:
        algo::rabenseifner_all_reduce(*this, send, recv, count, type, op);
        break;
      case AllReduceAlgorithm::kDoubleBinaryTree:
        algo::double_binary_tree_all_reduce(*this, recv, count, type, op);
        break;
      case AllReduceAlgorithm::kTwoShot:
        algo::two_shot_all_reduce(*this, send, recv, count, type, op);
        break;
      case AllReduceAlgorithm::kRing:
      case AllReduceAlgorithm::kAuto:
        algo::ring_all_reduce(*this, recv, count, type, op);
        break;
    }
    if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
  });
}

void Communicator::all_reduce_compressed(const void* send, void* recv, size_t count, DataType type,
                                         ReduceOp op, const Compression& z) {
  check_buffers(send, recv, count, type, 1, "all_reduce_compressed");
  if (type != DataType::kF32 && type != DataType::kF16 && type != DataType::kBF16) {
    throw CollectiveError(fmt::format(
        "all_reduce_compressed: {} is not a floating type it compresses (f32, f16, bf16)",
        name(type)));
  }
  if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
    throw CollectiveError("all_reduce_compressed: only sum and avg are defined");
  }
  if ((z.bits != 4 && z.bits != 8) || z.group_size == 0) {
    throw CollectiveError(fmt::format(
        "all_reduce_compressed: {} bits in groups of {}: need 4 or 8 bits, groups of 1 or more",
        z.bits, z.group_size));
  }
  CallSignature s{
      .type = static_cast<uint8_t>(type), .op = static_cast<uint8_t>(op), .count = count};
  launch(Mode::kBlocking, "all_reduce_compressed", s, [=, this] {
    if (size_ == 1) {
      if (send != recv && count > 0) move_bytes(recv, send, count * size_of(type));
    } else {
      algo::compressed_all_reduce(*this, send, recv, count, type, z);
    }
    if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
  });
}

CollectiveRequest Communicator::start_reduce_scatter(Mode mode, const void* send, void* recv,
                                                     size_t count, DataType type, ReduceOp op) {
  check_buffers(send, recv, count, type, static_cast<size_t>(size_), "reduce_scatter");
  check_reduction(type, op, "reduce_scatter");
  CallSignature s{
      .type = static_cast<uint8_t>(type), .op = static_cast<uint8_t>(op), .count = count};
  return launch(mode, "reduce_scatter", s, [=, this] {
    const size_t es = size_of(type), all = count * static_cast<size_t>(size_);
    // The ring works over every block in place; the caller's send buffer stays intact.
    uint8_t* work = scratch(1, all * es);
    if (all > 0) copy_bytes(work, send, all * es);
    algo::ring_reduce_scatter(*this, work, algo::fixed_blocks(count, size_), type, op, 0);
    if (count > 0) copy_bytes(recv, work + static_cast<size_t>(rank_) * count * es, count * es);
    if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
  });
}

CollectiveRequest Communicator::start_all_gather(Mode mode, const void* send, void* recv,
                                                 size_t count, DataType type) {
  check_buffers(send, recv, count, type, static_cast<size_t>(size_), "all_gather");
  CallSignature s{.type = static_cast<uint8_t>(type), .count = count};
  return launch(mode, "all_gather", s, [=, this] {
    const size_t es = size_of(type);
    auto* own = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank_) * count * es;
    if (send != own && count > 0) move_bytes(own, send, count * es);  // in place: send == own
    algo::ring_all_gather(*this, recv, algo::fixed_blocks(count, size_), es, 0);
  });
}

CollectiveRequest Communicator::start_broadcast(Mode mode, void* buffer, size_t count,
                                                DataType type, int root) {
  check_buffers(buffer, buffer, count, type, 1, "broadcast");
  check_root(root, size_, "broadcast");
  CallSignature s{.type = static_cast<uint8_t>(type), .root = root, .count = count};
  return launch(mode, "broadcast", s, [=, this] {
    algo::binomial_broadcast(*this, buffer, count * size_of(type), root);
  });
}

CollectiveRequest Communicator::start_reduce(Mode mode, const void* send, void* recv, size_t count,
                                             DataType type, ReduceOp op, int root) {
  check_root(root, size_, "reduce");
  check_buffers(send, rank_ == root ? recv : send, count, type, 1, "reduce");
  check_reduction(type, op, "reduce");
  CallSignature s{.type = static_cast<uint8_t>(type),
                  .op = static_cast<uint8_t>(op),
                  .root = root,
                  .count = count};
  return launch(mode, "reduce", s, [=, this] {
    const size_t bytes = count * size_of(type);
    uint8_t* work = scratch(1, bytes);  // the tree reduces in place; keep send intact
    if (bytes > 0) copy_bytes(work, send, bytes);
    algo::binomial_reduce(*this, work, count, type, op, root);
    if (rank_ != root) return;
    if (bytes > 0) copy_bytes(recv, work, bytes);
    if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
  });
}

CollectiveRequest Communicator::start_all_to_all_v(Mode mode, bool uniform, const void* send,
                                                   std::span<const size_t> send_counts,
                                                   std::span<const size_t> send_displs, void* recv,
                                                   std::span<const size_t> recv_counts,
                                                   std::span<const size_t> recv_displs,
                                                   DataType type) {
  const auto p = static_cast<size_t>(size_);
  const char* what = uniform ? "all_to_all" : "all_to_all_v";
  if (send_counts.size() != p || send_displs.size() != p || recv_counts.size() != p ||
      recv_displs.size() != p) {
    throw CollectiveError(
        fmt::format("{}: counts and displacements need one entry per rank", what));
  }
  const size_t es = size_of(type);
  std::vector<size_t> sb(p), so(p), rb(p), ro(p);
  size_t send_end = 0, total = 0;
  const size_t most = max_elements(type);
  for (size_t r = 0; r < p; ++r) {
    // Each block must lie within a possible buffer, and so must the sum of all.
    for (const size_t* v : {&send_counts[r], &send_displs[r], &recv_counts[r], &recv_displs[r]}) {
      if (*v > most / 2) {
        throw CollectiveError(fmt::format(
            "{}: a count or displacement of {} {} elements (rank {}) is larger than any buffer",
            what, *v, name(type), r));
      }
    }
    if (total / es > most - send_counts[r]) {
      throw CollectiveError(fmt::format("{}: the counts add up to more than any buffer", what));
    }
    sb[r] = send_counts[r] * es;
    so[r] = send_displs[r] * es;
    rb[r] = recv_counts[r] * es;
    ro[r] = recv_displs[r] * es;
    if ((sb[r] && !send) || (rb[r] && !recv))
      throw CollectiveError(fmt::format("{}: null buffer", what));
    send_end = std::max(send_end, so[r] + sb[r]);
    total += sb[r];
  }
  // Bruck needs equal blocks; all_to_all_v picks between the pairwise orders by the
  // mean block.
  AllToAllAlgorithm algorithm = all_to_all_algorithm_for(total / p);
  if (!uniform && algorithm == AllToAllAlgorithm::kBruck) algorithm = AllToAllAlgorithm::kSpreadOut;
  CallSignature s{.type = static_cast<uint8_t>(type), .count = uniform ? send_counts[0] : 0};
  return launch(
      mode, what, s,
      [=, this, sb = std::move(sb), so = std::move(so), rb = std::move(rb), ro = std::move(ro)] {
        auto* out = static_cast<uint8_t*>(recv);
        const auto* in = static_cast<const uint8_t*>(send);
        if (send == recv && send_end > 0) {  // in place: send from a copy of the blocks
          uint8_t* copy = scratch(3, send_end);
          copy_bytes(copy, in, send_end);
          in = copy;
        }
        if (algorithm == AllToAllAlgorithm::kBruck) {
          algo::bruck_all_to_all(*this, in, out, sb[0]);
        } else {
          const int window = algorithm == AllToAllAlgorithm::kSpreadOut ? kSpreadOutWindow : 1;
          algo::spread_out_all_to_all_v(*this, in, sb, so, out, rb, ro, window);
        }
      });
}

// The public calls: each operation blocking and queued.

void Communicator::all_reduce(const void* send, void* recv, size_t count, DataType type,
                              ReduceOp op) {
  start_all_reduce(Mode::kBlocking, send, recv, count, type, op);
}
CollectiveRequest Communicator::iall_reduce(const void* send, void* recv, size_t count,
                                            DataType type, ReduceOp op) {
  return start_all_reduce(Mode::kQueued, send, recv, count, type, op);
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op) {
  start_reduce_scatter(Mode::kBlocking, send, recv, count, type, op);
}
CollectiveRequest Communicator::ireduce_scatter(const void* send, void* recv, size_t count,
                                                DataType type, ReduceOp op) {
  return start_reduce_scatter(Mode::kQueued, send, recv, count, type, op);
}
void Communicator::all_gather(const void* send, void* recv, size_t count, DataType type) {
  start_all_gather(Mode::kBlocking, send, recv, count, type);
}
CollectiveRequest Communicator::iall_gather(const void* send, void* recv, size_t count,
                                            DataType type) {
  return start_all_gather(Mode::kQueued, send, recv, count, type);
}
void Communicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  start_broadcast(Mode::kBlocking, buffer, count, type, root);
}
CollectiveRequest Communicator::ibroadcast(void* buffer, size_t count, DataType type, int root) {
  return start_broadcast(Mode::kQueued, buffer, count, type, root);
}
void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          int root) {
  start_reduce(Mode::kBlocking, send, recv, count, type, op, root);
}
CollectiveRequest Communicator::ireduce(const void* send, void* recv, size_t count, DataType type,
                                        ReduceOp op, int root) {
  return start_reduce(Mode::kQueued, send, recv, count, type, op, root);
}

namespace {
// Counts and displacements of an all-to-all of `count` elements per block.
struct UniformBlocks {
  std::vector<size_t> counts, displs;
  UniformBlocks(size_t count, int ranks)
      : counts(static_cast<size_t>(ranks), count), displs(static_cast<size_t>(ranks)) {
    for (size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
  }
};
}  // namespace

void Communicator::all_to_all(const void* send, void* recv, size_t count, DataType type) {
  const UniformBlocks b(count, size_);
  start_all_to_all_v(Mode::kBlocking, true, send, b.counts, b.displs, recv, b.counts, b.displs,
                     type);
}
CollectiveRequest Communicator::iall_to_all(const void* send, void* recv, size_t count,
                                            DataType type) {
  const UniformBlocks b(count, size_);
  return start_all_to_all_v(Mode::kQueued, true, send, b.counts, b.displs, recv, b.counts, b.displs,
                            type);
}
void Communicator::all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                std::span<const size_t> send_displs, void* recv,
                                std::span<const size_t> recv_counts,
                                std::span<const size_t> recv_displs, DataType type) {
  start_all_to_all_v(Mode::kBlocking, false, send, send_counts, send_displs, recv, recv_counts,
                     recv_displs, type);
}
CollectiveRequest Communicator::iall_to_all_v(const void* send, std::span<const size_t> send_counts,
                                              std::span<const size_t> send_displs, void* recv,
                                              std::span<const size_t> recv_counts,
                                              std::span<const size_t> recv_displs, DataType type) {
  return start_all_to_all_v(Mode::kQueued, false, send, send_counts, send_displs, recv, recv_counts,
                            recv_displs, type);
}
void Communicator::barrier() {
  launch(Mode::kBlocking, "barrier", {}, [this] { algo::dissemination_barrier(*this); });
}
CollectiveRequest Communicator::ibarrier() {
  return launch(Mode::kQueued, "barrier", {}, [this] { algo::dissemination_barrier(*this); });
}

}  // namespace spray::coll
