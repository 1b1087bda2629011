// spray::coll::Communicator: a group of ranks (processes) joined through one libfabric
// provider, and the collective operations over them.
//
// Creation: from the environment (SPRAY_RANK, SPRAY_SIZE, SPRAY_STORE = host:port of the
// rendezvous store that rank 0 hosts, SPRAY_PROVIDER = libfabric provider, default tcp;
// spray-run sets them) or from explicit values. Each rank publishes its endpoint address
// in the store and reads everyone else's; rank 0 keeps the store up until every rank has
// read them.
//
// Semantics: every rank calls the same collectives in the same order with matching
// counts and types, as in MPI and NCCL. Calls are blocking. `send` may equal `recv`
// (in place). Errors (a rank that died or stalled past the timeout, a provider error,
// invalid arguments) throw CollectiveError with a message naming the operation and peer;
// after one, the communicator must be destroyed.
//
// Algorithms (collectives/algorithms/, one file each): ring all-reduce (reduce-scatter
// then all-gather, chunked and pipelined), ring reduce-scatter and all-gather, binomial
// broadcast and reduce, pairwise all-to-all(v), dissemination barrier.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "collectives/datatype.h"
#include "collectives/fabric_link.h"

namespace spray::coll {

class StoreServer;

// Which all-reduce algorithm runs. kAuto: recursive doubling up to
// kRecursiveDoublingMaxBytes (few latencies), the ring above (bandwidth-optimal).
enum class AllReduceAlgorithm : uint8_t { kAuto, kRing, kRecursiveDoubling };
inline constexpr size_t kRecursiveDoublingMaxBytes = 64 * 1024;
// "auto", "ring", "recursive_doubling"; nullopt otherwise.
std::optional<AllReduceAlgorithm> parse_all_reduce_algorithm(std::string_view s);

struct CommunicatorOptions {
  std::string provider = "tcp";
  // SPRAY_COLL_ALLREDUCE_ALGO overrides it in from_environment().
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto;
  // Bound on every wait: bootstrap and each collective's steps.
  std::chrono::milliseconds timeout{30000};
};

class Communicator {
 public:
  // From SPRAY_RANK / SPRAY_SIZE / SPRAY_STORE (and SPRAY_PROVIDER, SPRAY_COLL_TIMEOUT_MS
  // over `options`). Throws CollectiveError with a clear message when they are missing
  // or a rank never shows up.
  static std::unique_ptr<Communicator> from_environment(CommunicatorOptions options = {});
  static std::unique_ptr<Communicator> create(int rank, int size, const std::string& store,
                                              const CommunicatorOptions& options);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& provider() const { return link_->provider(); }
  // Every rank must choose the same algorithm for a given call.
  void set_all_reduce_algorithm(AllReduceAlgorithm a) { all_reduce_algorithm_ = a; }

  // recv[i] = OP over ranks of send[i], for `count` elements, on every rank.
  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // send holds size() blocks of `count` elements; rank r receives block r reduced.
  void reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // send holds `count` elements; recv receives size() blocks, block r from rank r.
  void all_gather(const void* send, void* recv, size_t count, DataType type);
  // `count` elements of `root`'s buffer to every rank's.
  void broadcast(void* buffer, size_t count, DataType type, int root);
  // recv (at root only; ignored elsewhere) = OP over ranks of send.
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  // send holds size() blocks of `count` elements; block j goes to rank j, and recv's
  // block i comes from rank i.
  void all_to_all(const void* send, void* recv, size_t count, DataType type);
  // Counts and displacements in elements, one per rank (MPI_Alltoallv).
  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displs, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                    DataType type);
  void barrier();

  // For algorithms: the link, a fresh tag space per collective call, and the deadline
  // of a wait starting now (a wait that sees no completion for `timeout` fails).
  FabricLink& link() { return *link_; }
  // Tag of a message in the current call: (call sequence, sender rank, step).
  uint64_t tag(int sender, uint32_t step) const {
    return (uint64_t{sequence_ & 0xffffff} << 40) | (uint64_t(sender & 0xffff) << 24) |
           (step & 0xffffff);
  }
  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() + timeout_;
  }

 private:
  Communicator(int rank, int size, std::unique_ptr<FabricLink> link,
               std::unique_ptr<StoreServer> server, const CommunicatorOptions& options);
  // Starts a collective call: a new tag space.
  void begin() { ++sequence_; }

  int rank_;
  int size_;
  std::unique_ptr<FabricLink> link_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  std::chrono::milliseconds timeout_;
  uint32_t sequence_ = 0;
  AllReduceAlgorithm all_reduce_algorithm_;
};

}  // namespace spray::coll
