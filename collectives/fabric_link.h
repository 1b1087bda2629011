// FabricLink: the collective layer's one libfabric endpoint (FI_EP_RDM, tagged), opened on
// any provider by name, and the requests posted on it. Only the public libfabric API is
// used, so `spray`, `tcp`, `shm`, ... are interchangeable underneath.
//
// Requests: isend/irecv return a Request (a slot index); wait()/wait_all() progress the
// CQ until those complete. Slots come from a fixed pool sized at open (no allocation per
// message); a request's slot is free again once it has been waited for and the provider
// has handed back its context.
//
// Small sends (up to the provider's inject_size) are posted with FI_INJECT: the provider
// copies the payload, so the request is complete at once and a wait for it costs nothing.
// Why: a reliable provider completes a send only once the peer acknowledged it, a round
// trip the algorithms would otherwise wait out on every small step (4-rank spray
// all-reduce of 8 B-1 KiB: ~20-28 % of its time). The send's completion still arrives
// later and frees its slot then; if it is an error, the next call throws it, naming the
// send. So does the failure of any send, even while the caller waits for something else
// (a receive from the same dead peer, say): it would never complete. A provider with
// manual progress (spray) resends a lost packet only while its owner calls in, and a rank
// may compute for a long time between collectives; so once injected sends are due, a
// SendDrainer thread (send_drainer.h) polls the link while the caller is away, until
// they have completed. finish_sends() waits for them in the
// caller; the destructor gives them up to 1 s.
//
// Thread safety: one caller thread at a time (FI_THREAD_DOMAIN), plus the drainer; the
// public calls take mutex_, which the drainer only ever try-locks.
//
// Over libfabric's `tcp` (ofi_rxm on tcp) the link asks rxm to pass its calls straight
// to tcp's own RDM endpoint (FI_OFI_RXM_ENABLE_PASSTHRU, unless the user set it): see
// fabric_link.cc for why and what it gained.
//
// Waiting (ranks may outnumber cores): poll the CQ in a tight loop for a spin (none by
// default; SPRAY_COLL_SPIN_US sets one: spinning with more ranks than cores starves the
// rank being waited for, see fabric_link.cc), then poll with sched_yield between polls for
// 500 us (SPRAY_COLL_YIELD_US; a yield hands the core to a runnable rank at once, where
// blocking costs a sleep and a wake-up per message: with 4 ranks on 2 cores a 1 MiB
// all-reduce took about 1.9 ms blocking at once and 1.3 ms yielding first), then block
// in fi_cq_sread for at most 1 ms at a time when the provider's CQ has a wait object,
// else keep yielding. Every wait has a deadline: a peer that died or stalled becomes an
// error naming the request, never a hang.
#pragma once

#include <rdma/fabric.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "provider/client/rdm_endpoint.h"

namespace spray::coll {

class SendDrainer;

// Thrown by the collective layer for what a caller cannot retry: a peer that failed or
// timed out, a provider error, inconsistent arguments across ranks.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Request = uint32_t;

class FabricLink {
 public:
  // Opens fabric, domain, AV (FI_AV_TABLE), CQ and an RDM endpoint on `provider`.
  // nullptr and an error (naming the provider and the failing call) on failure.
  static std::unique_ptr<FabricLink> open(const std::string& provider, std::string& error);
  ~FabricLink();
  FabricLink(const FabricLink&) = delete;
  FabricLink& operator=(const FabricLink&) = delete;

  const std::string& provider() const { return provider_; }
  // What libfabric opened for it: the provider stack and the endpoint's protocol, e.g.
  // "tcp;ofi_rxm, FI_PROTO_RXM_TCP" (for benchmark headers: which path was measured).
  std::string opened_path() const;
  // The fabric a calibration holds for (CostModel::fabric): the provider's name and, for
  // spray, the datapath its environment names (FI_SPRAY_DATAPATH, default auto), e.g.
  // "spray:udp" or "tcp". Spray's datapaths move data between local ranks as differently
  // as shared memory and kernel UDP do.
  std::string fabric_name() const;
  // The endpoint's address, to publish through the rendezvous store.
  std::vector<uint8_t> address() const;
  // Enters every rank's address, in rank order; false and an error on failure.
  bool set_peers(const std::vector<std::vector<uint8_t>>& addresses, std::string& error);

  // Posts a tagged send / receive. `peer` is a rank. Throws CollectiveError if the
  // provider refuses the post for good.
  Request isend(int peer, const void* buf, size_t len, uint64_t tag);
  Request irecv(int peer, void* buf, size_t len, uint64_t tag);
  // Progresses until `r` completes (then frees it). Throws on error or at `deadline`.
  void wait(Request r, std::chrono::steady_clock::time_point deadline);
  void wait_all(std::span<const Request> rs, std::chrono::steady_clock::time_point deadline);
  // Progresses until every injected send waited for has its completion (see above).
  // Throws the first that failed, or at `deadline`.
  void finish_sends(std::chrono::steady_clock::time_point deadline);
  // For the drainer: reads completions once if injected sends are due and no caller has
  // been in the link since the drainer's last visit. True if it did and sends are still
  // due (the caller is away and they need polling), else false.
  bool progress_due_sends();
  // How long isend/irecv retry a post the provider answers with -FI_EAGAIN (its queues
  // full) before they throw. The communicator sets its wait timeout here.
  void set_post_timeout(std::chrono::milliseconds t) { post_timeout_ = t; }

 private:
  struct Slot {
    fi_context2 ctx{};           // first: the provider hands it back as op_context
    bool done = false;           // complete as far as the caller is concerned
    bool provider_owns = false;  // posted and its completion not read yet
    bool waited = false;         // the caller waited for it: free once provider_owns ends
    int error = 0;               // fi errno of an error completion
    int prov_errno = 0;          // and the provider's own code for it (fi_cq_strerror names it)
    int peer = -1;
    bool is_send = false;
    uint64_t tag = 0;
    size_t len = 0;
    size_t received = 0;  // bytes a receive got, from its completion
  };
  FabricLink() = default;
  Request take_slot(int peer, bool is_send, uint64_t tag, size_t len);
  // Returns slot `r` to the pool once it is both waited for and back from the provider
  // (a slot is free exactly then: nothing else marks it).
  void release_if_free(Request r);
  // Reads completions once; true if any arrived. `block_ms` > 0 blocks in fi_cq_sread.
  // Never throws (the drainer calls it): a failed send goes to failed_send_.
  bool progress(int block_ms);
  // Throws the failure of a send, if one failed (see failed_send_).
  void throw_failed_send() const;
  void finish_sends_locked(std::chrono::steady_clock::time_point deadline);
  // Calls `try_post` (returns an fi_* result) until it is not -FI_EAGAIN, progressing the
  // CQ in between; throws naming `call` on another error or after post_timeout_.
  template <class TryPost>
  void post(Slot& s, const char* call, TryPost try_post);
  // Throws if the completed request failed or a receive got another length than posted.
  void check_completion(const Slot& s) const;
  // fi_strerror of an error completion, with the provider's own cause where it names one.
  std::string describe_error(const Slot& s) const;
  [[noreturn]] void fail(const Slot& s, const std::string& why) const;

  std::string provider_;
  std::unique_ptr<fi_client::RdmEndpoint> fi_;  // the libfabric objects
  std::chrono::microseconds spin_{};            // polling before blocking, per wait
  std::chrono::microseconds yield_{};           // then polling with sched_yield before blocking
  std::chrono::milliseconds post_timeout_{30000};
  size_t inject_size_ = 0;  // sends up to this many bytes are injected (0: never)
  size_t detached_ = 0;     // injected sends waited for whose completion is still due
  // Public calls so far, and their count at the drainer's last visit: the drainer polls
  // only if no call came in between (the caller is away).
  uint64_t calls_ = 0;
  uint64_t calls_seen_by_drainer_ = 0;
  // The first send that failed, injected or not, waited for or not: the link is broken
  // and every call from then on throws it (the wait under way too).
  std::optional<Slot> failed_send_;
  mutable std::mutex mutex_;              // the caller's calls vs the drainer
  std::unique_ptr<SendDrainer> drainer_;  // started by the first injected send
  std::vector<fi_addr_t> peers_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace spray::coll
