#include "collectives/communicator.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/bootstrap/store.h"
#include "collectives/reduce_kernels.h"

namespace spray::coll {
namespace {

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

void check_root(int root, int size, const char* op) {
  if (root < 0 || root >= size) {
    throw CollectiveError(
        fmt::format("{}: root {} is not a rank of a group of {}", op, root, size));
  }
}

void check_buffers(const void* send, const void* recv, size_t count, const char* op) {
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
  if (const char* a = std::getenv("SPRAY_COLL_ALLREDUCE_ALGO"); a && *a) {
    const auto algo = parse_all_reduce_algorithm(a);
    if (!algo) {
      throw CollectiveError(
          fmt::format("SPRAY_COLL_ALLREDUCE_ALGO='{}' is not auto, ring or recursive_doubling", a));
    }
    options.all_reduce = *algo;
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

  if (!client->set(fmt::format("addr/{}", rank), link->address(), error)) {
    throw CollectiveError(fmt::format("rank {}: {}", rank, error));
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
  if (!client->set(fmt::format("ready/{}", rank), {}, error)) {
    throw CollectiveError(fmt::format("rank {}: {}", rank, error));
  }
  if (rank == 0) {
    std::vector<uint8_t> ignored;
    for (int r = 1; r < size; ++r) {
      if (!client->get(fmt::format("ready/{}", r), options.timeout, ignored, error)) {
        throw CollectiveError(fmt::format("rank {} never finished joining ({})", r, error));
      }
    }
  }
  return std::unique_ptr<Communicator>(
      new Communicator(rank, size, std::move(link), std::move(server), options));
}

Communicator::Communicator(int rank, int size, std::unique_ptr<FabricLink> link,
                           std::unique_ptr<StoreServer> server, const CommunicatorOptions& options)
    : rank_(rank),
      size_(size),
      link_(std::move(link)),
      server_(std::move(server)),
      timeout_(options.timeout),
      all_reduce_algorithm_(options.all_reduce) {}

std::optional<AllReduceAlgorithm> parse_all_reduce_algorithm(std::string_view s) {
  if (s == "auto") return AllReduceAlgorithm::kAuto;
  if (s == "ring") return AllReduceAlgorithm::kRing;
  if (s == "recursive_doubling") return AllReduceAlgorithm::kRecursiveDoubling;
  return std::nullopt;
}

Communicator::~Communicator() = default;

void Communicator::all_reduce(const void* send, void* recv, size_t count, DataType type,
                              ReduceOp op) {
  check_buffers(send, recv, count, "all_reduce");
  check_reduction(type, op, "all_reduce");
  begin();
  if (send != recv && count > 0) std::memmove(recv, send, count * size_of(type));
  const bool doubling = all_reduce_algorithm_ == AllReduceAlgorithm::kRecursiveDoubling ||
                        (all_reduce_algorithm_ == AllReduceAlgorithm::kAuto &&
                         count * size_of(type) <= kRecursiveDoublingMaxBytes);
  if (doubling) {
    algo::recursive_doubling_all_reduce(*this, recv, count, type, op);
  } else {
    algo::ring_all_reduce(*this, recv, count, type, op);
  }
  if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op) {
  check_buffers(send, recv, count, "reduce_scatter");
  check_reduction(type, op, "reduce_scatter");
  begin();
  const size_t es = size_of(type), all = count * static_cast<size_t>(size_);
  // The ring works over every block in place; the caller's send buffer stays intact.
  std::vector<uint8_t> work(all * es);
  if (all > 0) std::memcpy(work.data(), send, all * es);
  algo::ring_reduce_scatter(*this, work.data(), algo::fixed_blocks(count, size_), type, op, 0);
  if (count > 0)
    std::memcpy(recv, work.data() + static_cast<size_t>(rank_) * count * es, count * es);
  if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
}

void Communicator::all_gather(const void* send, void* recv, size_t count, DataType type) {
  check_buffers(send, recv, count, "all_gather");
  begin();
  const size_t es = size_of(type);
  auto* own = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank_) * count * es;
  if (send != own && count > 0) std::memmove(own, send, count * es);  // in place: send == own
  algo::ring_all_gather(*this, recv, algo::fixed_blocks(count, size_), es, 0);
}

void Communicator::broadcast(void* buffer, size_t count, DataType type, int root) {
  check_buffers(buffer, buffer, count, "broadcast");
  check_root(root, size_, "broadcast");
  begin();
  algo::binomial_broadcast(*this, buffer, count * size_of(type), root);
}

void Communicator::reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          int root) {
  check_root(root, size_, "reduce");
  check_buffers(send, rank_ == root ? recv : send, count, "reduce");
  check_reduction(type, op, "reduce");
  begin();
  const size_t bytes = count * size_of(type);
  std::vector<uint8_t> work(bytes);  // the tree reduces in place; keep send intact
  if (bytes > 0) std::memcpy(work.data(), send, bytes);
  algo::binomial_reduce(*this, work.data(), count, type, op, root);
  if (rank_ != root) return;
  if (bytes > 0) std::memcpy(recv, work.data(), bytes);
  if (op == ReduceOp::kAvg) finish_average(recv, count, type, size_);
}

void Communicator::all_to_all(const void* send, void* recv, size_t count, DataType type) {
  const std::vector<size_t> counts(static_cast<size_t>(size_), count);
  std::vector<size_t> displs(static_cast<size_t>(size_));
  for (size_t r = 0; r < displs.size(); ++r) displs[r] = r * count;
  all_to_all_v(send, counts, displs, recv, counts, displs, type);
}

void Communicator::all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                std::span<const size_t> send_displs, void* recv,
                                std::span<const size_t> recv_counts,
                                std::span<const size_t> recv_displs, DataType type) {
  const auto p = static_cast<size_t>(size_);
  if (send_counts.size() != p || send_displs.size() != p || recv_counts.size() != p ||
      recv_displs.size() != p) {
    throw CollectiveError("all_to_all_v: counts and displacements need one entry per rank");
  }
  begin();
  const size_t es = size_of(type);
  std::vector<size_t> sb(p), so(p), rb(p), ro(p);
  for (size_t r = 0; r < p; ++r) {
    sb[r] = send_counts[r] * es;
    so[r] = send_displs[r] * es;
    rb[r] = recv_counts[r] * es;
    ro[r] = recv_displs[r] * es;
    if ((sb[r] && !send) || (rb[r] && !recv)) throw CollectiveError("all_to_all_v: null buffer");
  }
  if (send == recv) {  // in place: send from a copy of what the blocks hold now
    size_t end = 0;
    for (size_t r = 0; r < p; ++r) end = std::max(end, so[r] + sb[r]);
    std::vector<uint8_t> copy(static_cast<const uint8_t*>(send),
                              static_cast<const uint8_t*>(send) + end);
    algo::pairwise_all_to_all_v(*this, copy.data(), sb, so, static_cast<uint8_t*>(recv), rb, ro);
    return;
  }
  algo::pairwise_all_to_all_v(*this, static_cast<const uint8_t*>(send), sb, so,
                              static_cast<uint8_t*>(recv), rb, ro);
}

void Communicator::barrier() {
  begin();
  algo::dissemination_barrier(*this);
}

}  // namespace spray::coll
