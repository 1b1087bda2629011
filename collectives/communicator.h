// spray::coll::Communicator: a group of ranks (processes) joined through one libfabric
// provider, and the collective operations over them.
//
// Creation: from the environment (SPRAY_RANK, SPRAY_SIZE, SPRAY_STORE = host:port of the
// rendezvous store that rank 0 hosts, SPRAY_PROVIDER = libfabric provider, default tcp;
// spray-run sets them) or from explicit values. Each rank publishes its endpoint address
// in the store and reads everyone else's; rank 0 keeps the store up until every rank has
// read them, and hands every rank the same cost model for the tuner.
//
// Semantics: every rank starts the same collectives in the same order with matching
// counts and types, as in MPI and NCCL. Each operation comes blocking (`all_reduce`) and
// non-blocking (`iall_reduce`, returning a CollectiveRequest to test or wait; its
// buffers must stay untouched until then). Calls run one at a time in the order they
// were started (see call_queue.h). `send` may equal `recv` (in place). Errors (a rank
// that died or stalled past the timeout, a provider error, invalid arguments, counts
// that disagree across ranks) throw CollectiveError with a message naming the operation
// and peer; after one, the communicator must be destroyed. One user thread drives it.
//
// Algorithms (collectives/algorithms/, one file each): all-reduce by ring, recursive
// doubling, Rabenseifner, double binary tree or two-shot, chosen per call by the tuner's
// cost model (tuner.h) unless forced; ring reduce-scatter and all-gather; binomial
// broadcast and reduce; all-to-all by pairwise exchange, Bruck or throttled spread-out;
// dissemination barrier; and a quantised (lossy) all-reduce, only when asked for by name.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "collectives/call_queue.h"
#include "collectives/datatype.h"
#include "collectives/fabric_link.h"
#include "collectives/quantize.h"
#include "collectives/scratch_buffer.h"
#include "collectives/tuner.h"

namespace spray::coll {

class StoreServer;

struct CommunicatorOptions {
  std::string provider = "tcp";
  // kAuto: the tuner decides. SPRAY_COLL_ALLREDUCE_ALGO / SPRAY_COLL_ALLTOALL_ALGO
  // override them in from_environment().
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto;
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::kAuto;
  // A cost model file written by `spray-coll-perf --calibrate` (SPRAY_COLL_TUNING);
  // read by rank 0 only and handed to every rank. Empty: built-in defaults.
  std::string cost_model_path;
  // Before every call, compare what each rank called (operation, type, reduction,
  // count, root) and fail with the difference (SPRAY_COLL_VERIFY=1). Costs one small
  // all-gather per call; mismatched message sizes are detected without it.
  bool verify_calls = false;
  // Bound on every wait: bootstrap and each collective's steps.
  std::chrono::milliseconds timeout{30000};
};

class Communicator {
 public:
  // From SPRAY_RANK / SPRAY_SIZE / SPRAY_STORE (and SPRAY_PROVIDER, SPRAY_COLL_TIMEOUT_MS,
  // SPRAY_COLL_ALLREDUCE_ALGO, SPRAY_COLL_ALLTOALL_ALGO, SPRAY_COLL_TUNING,
  // SPRAY_COLL_VERIFY over `options`). Throws CollectiveError with a clear message when
  // they are missing or wrong, or a rank never shows up.
  static std::unique_ptr<Communicator> from_environment(CommunicatorOptions options = {});
  static std::unique_ptr<Communicator> create(int rank, int size, const std::string& store,
                                              const CommunicatorOptions& options);
  // Completes every call still queued, then closes the endpoint.
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& provider() const { return link_->provider(); }
  // The provider stack and endpoint protocol libfabric opened (FabricLink::opened_path).
  std::string opened_path() const { return link_->opened_path(); }
  const CostModel& cost_model() const { return cost_model_; }
  // Every rank must choose the same algorithm for a given call.
  void set_all_reduce_algorithm(AllReduceAlgorithm a) { all_reduce_algorithm_ = a; }
  void set_all_to_all_algorithm(AllToAllAlgorithm a) { all_to_all_algorithm_ = a; }
  // What all_reduce / all_to_all would run for this size (the tuner's pick or the forced
  // one).
  AllReduceAlgorithm all_reduce_algorithm_for(size_t bytes) const;
  AllToAllAlgorithm all_to_all_algorithm_for(size_t block_bytes) const;

  // recv[i] = OP over ranks of send[i], for `count` elements, on every rank.
  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  CollectiveRequest iall_reduce(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op);
  // All-reduce (sum or avg of f32, f16 or bf16) through group-wise quantisation to
  // `z.bits` bits: about 4x (INT8) or 8x (INT4) fewer bytes on the wire than f32, with
  // the error bound of algorithms/compressed_all_reduce.cc. All ranks get the same bits.
  void all_reduce_compressed(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                             const Compression& z);
  // send holds size() blocks of `count` elements; rank r receives block r reduced.
  void reduce_scatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  CollectiveRequest ireduce_scatter(const void* send, void* recv, size_t count, DataType type,
                                    ReduceOp op);
  // send holds `count` elements; recv receives size() blocks, block r from rank r.
  void all_gather(const void* send, void* recv, size_t count, DataType type);
  CollectiveRequest iall_gather(const void* send, void* recv, size_t count, DataType type);
  // `count` elements of `root`'s buffer to every rank's.
  void broadcast(void* buffer, size_t count, DataType type, int root);
  CollectiveRequest ibroadcast(void* buffer, size_t count, DataType type, int root);
  // recv (at root only; ignored elsewhere) = OP over ranks of send.
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  CollectiveRequest ireduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                            int root);
  // send holds size() blocks of `count` elements; block j goes to rank j, and recv's
  // block i comes from rank i.
  void all_to_all(const void* send, void* recv, size_t count, DataType type);
  CollectiveRequest iall_to_all(const void* send, void* recv, size_t count, DataType type);
  // Counts and displacements in elements, one per rank (MPI_Alltoallv). The spans are
  // copied: only the data buffers must outlive a non-blocking call.
  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displs, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                    DataType type);
  CollectiveRequest iall_to_all_v(const void* send, std::span<const size_t> send_counts,
                                  std::span<const size_t> send_displs, void* recv,
                                  std::span<const size_t> recv_counts,
                                  std::span<const size_t> recv_displs, DataType type);
  void barrier();
  CollectiveRequest ibarrier();

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
  // Scratch memory for the running call: `bytes` (uninitialised) from buffer `slot`
  // (0..kScratchSlots-1; one call uses each slot for one purpose). Kept between calls
  // so repeated collectives neither allocate nor fault pages in; it grows to the
  // largest call's needs and is freed with the communicator.
  static constexpr unsigned kScratchSlots = 4;
  uint8_t* scratch(unsigned slot, size_t bytes);

 private:
  // What a call is, for SPRAY_COLL_VERIFY: compared across ranks before it runs.
  struct CallSignature {
    uint8_t operation = 0, type = 0, op = 0, pad = 0;
    int32_t root = -1;
    uint64_t count = 0;
  };
  // How a call starts: at once (blocking) or queued (non-blocking).
  enum class Mode : uint8_t { kBlocking, kQueued };

  Communicator(int rank, int size, std::unique_ptr<FabricLink> link,
               std::unique_ptr<StoreServer> server, const CommunicatorOptions& options,
               const CostModel& cost_model);
  // Runs `body` as a collective call (a new tag space; the signature compared first when
  // verifying), blocking or queued.
  CollectiveRequest launch(Mode mode, const char* what, CallSignature signature,
                           std::function<void()> body);
  void verify(const char* what, const CallSignature& mine);
  // The operations themselves, checked and run by the public calls.
  CollectiveRequest start_all_reduce(Mode mode, const void* send, void* recv, size_t count,
                                     DataType type, ReduceOp op);
  CollectiveRequest start_reduce_scatter(Mode mode, const void* send, void* recv, size_t count,
                                         DataType type, ReduceOp op);
  CollectiveRequest start_all_gather(Mode mode, const void* send, void* recv, size_t count,
                                     DataType type);
  CollectiveRequest start_broadcast(Mode mode, void* buffer, size_t count, DataType type, int root);
  CollectiveRequest start_reduce(Mode mode, const void* send, void* recv, size_t count,
                                 DataType type, ReduceOp op, int root);
  CollectiveRequest start_all_to_all_v(Mode mode, bool uniform, const void* send,
                                       std::span<const size_t> send_counts,
                                       std::span<const size_t> send_displs, void* recv,
                                       std::span<const size_t> recv_counts,
                                       std::span<const size_t> recv_displs, DataType type);
  friend CostModel calibrate(Communicator& c);

  int rank_;
  int size_;
  std::unique_ptr<FabricLink> link_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  std::chrono::milliseconds timeout_;
  uint32_t sequence_ = 0;
  AllReduceAlgorithm all_reduce_algorithm_;
  AllToAllAlgorithm all_to_all_algorithm_;
  bool verify_calls_;
  CostModel cost_model_;
  // The tuner's last choice for each collective and the size it was for. Sizes repeat
  // (a training step calls the same all-reduce thousands of times), and asking the cost
  // model took about 70 ns a call (ten evaluations with a log2 each), 3 % of a 2-rank
  // 8-byte all-reduce over shared memory. Touched by the user thread only.
  template <class Algorithm>
  struct TunerChoice {
    size_t bytes = SIZE_MAX;
    Algorithm algorithm{};
  };
  mutable TunerChoice<AllReduceAlgorithm> last_all_reduce_;
  mutable TunerChoice<AllToAllAlgorithm> last_all_to_all_;
  ScratchBuffer scratch_[kScratchSlots];
  CallQueue calls_;  // last: destroyed (drained) before the link
};

// Measures the cost model's alpha, beta (ping-pong between rank pairs, all pairs at
// once) and gamma (the reduction kernel) on this communicator, and times every all-reduce
// and all-to-all algorithm the tuner chooses from at a few sizes (CostModel::measured);
// every rank gets the same figures, the slowest rank's. Collective: every rank calls it.
CostModel calibrate(Communicator& c);

}  // namespace spray::coll
