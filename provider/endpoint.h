// The endpoint object: one transport engine over one datapath (EndpointEngine), the AV and CQs it
// is bound to, and the table that maps engine operations back to libfabric contexts.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "provider/endpoint_engine.h"
#include "provider/security.h"
#include "provider/spray_fi.h"
#include "provider/staging.h"

namespace spray::fi {

struct Endpoint {
  // One operation in flight. `context` is the application's; `buf` the receive buffer.
  struct Op {
    void* context = nullptr;
    void* buf = nullptr;
    uint64_t flags = 0;       // FI_SEND|FI_MSG, FI_RECV|FI_TAGGED, FI_RMA|FI_READ ... as reported
    uint32_t inject = kNone;  // inject buffer held until the engine is done with it
    uint32_t staged = kNone;  // staging buffer held until it ends (several pieces: staging.h)
    bool report = true;       // false: no CQ entry (fi_inject, selective completion)
    bool in_use = false;
    // FI_MULTI_RECV: the transport packs message after message into `buf` and reports
    // where each landed; the op ends with the completion that releases the buffer.
    bool multi = false;
  };
  static constexpr uint32_t kNone = ~0u;

  fid_ep fid{};
  Domain* domain = nullptr;
  fi_info* info = nullptr;  // owned copy
  fi_ep_type type = FI_EP_RDM;
  AddressVector* av = nullptr;
  CompletionQueue* tx_cq = nullptr;
  CompletionQueue* rx_cq = nullptr;
  Counter* send_cntr = nullptr;
  Counter* recv_cntr = nullptr;
  Counter* read_cntr = nullptr;   // FI_READ: completed fi_read
  Counter* write_cntr = nullptr;  // FI_WRITE: completed fi_write
  // FI_RMA_EVENT endpoints only: peers' reads, fetching and compare atomics served here
  // (FI_REMOTE_READ), and their writes and plain atomics (FI_REMOTE_WRITE).
  Counter* remote_read_cntr = nullptr;
  Counter* remote_write_cntr = nullptr;
  bool tx_selective = false;  // bound with FI_SELECTIVE_COMPLETION
  bool rx_selective = false;
  uint64_t tx_op_flags = 0;
  uint64_t rx_op_flags = 0;
  bool enabled = false;
  bool ordered = true;  // any of kRdmMsgOrder asked: every operation uses ROD PDCs
  // FI_OPT_MIN_MULTI_RECV: a multi-receive buffer with less room than this is released.
  size_t min_multi_recv = 64;

  std::unique_ptr<EndpointEngine> engine;
  std::vector<pds::PeerIndex> peer_of;  // by fi_addr_t: the engine's peer (kNoPeer: not yet)
  std::vector<fi_addr_t> fi_addr_of;    // by engine peer: the AV entry, once known

  // Operation slots: tx_ops_limit for sends, writes and reads, rx_ops_limit for receives
  // (tx_attr->size and rx_attr->size: separate queues, so receives posted in bulk never
  // take the room of the sends that would satisfy them); ops holds both.
  std::vector<Op> ops;
  std::vector<uint32_t> free_ops;
  size_t tx_ops_limit = 0;
  size_t rx_ops_limit = 0;
  size_t tx_ops_in_use = 0;
  size_t rx_ops_in_use = 0;
  std::vector<uint8_t> inject_storage;  // free_injects.size() slots of inject_size bytes
  std::vector<uint32_t> free_injects;
  size_t inject_size = 0;
  StagingBuffers staging;                 // lent to operations of several pieces
  std::optional<KeyFileWatch> key_watch;  // secured endpoints: the key file (security.h)
  uint64_t pdc_failures_logged = 0;       // the engine's failed PDCs already warned of

  // The engine peer for `addr`, added on first use; kNoPeer when addr names no entry.
  pds::PeerIndex peer(fi_addr_t addr);
  // The AV entry of an engine peer, or FI_ADDR_NOTAVAIL.
  fi_addr_t source(pds::PeerIndex p);
  // Takes an operation slot (from the rx queue if `flags` has FI_RECV, else the tx
  // queue); kNone when that queue is full.
  uint32_t take_op(void* context, uint64_t flags, void* buf, bool report);
  void release_op(uint32_t index);
  // The contiguous source of what the operation in `slot` sends: the one piece itself,
  // or a copy the operation holds until it ends — in an inject buffer when `inject` (so
  // the caller may reuse its buffers at once), else in a staging buffer. nullptr when no
  // copy could be made: `error` is then -FI_EAGAIN (every inject buffer in use until
  // sends complete) or -FI_ENOMEM.
  const void* outgoing(uint32_t slot, const Pieces& p, bool inject, int& error);
  // The contiguous destination of what the operation in `slot` receives or reads: the
  // one piece itself, or a staging buffer scattered into the pieces when the operation
  // completes (complete() in endpoint.cc). nullptr with -FI_ENOMEM in `error`.
  void* incoming(uint32_t slot, const Pieces& p, int& error);
  // A staging buffer of `bytes` the operation in `slot` holds until it ends, or nullptr
  // with -FI_ENOMEM in `error`.
  uint8_t* stage(uint32_t slot, size_t bytes, int& error);
  // Every counter binding (null where none is bound), for those who visit them all.
  std::array<Counter*, 6> counters() const {
    return {send_cntr, recv_cntr, read_cntr, write_cntr, remote_read_cntr, remote_write_cntr};
  }
};

// Posting helpers shared by the message and tagged tables. `flags` are fi_*msg flags.
// `buffer` is the operation's buffer as the call gave it, one piece or several
// (pieces_of, staging.h): nullopt, an invalid one, fails the call with -FI_EINVAL.
ssize_t post_send(Endpoint& ep, const std::optional<Pieces>& buffer, fi_addr_t dest, bool tagged,
                  uint64_t tag, bool has_data, uint64_t data, void* context, uint64_t flags,
                  bool inject_call);
ssize_t post_recv(Endpoint& ep, const std::optional<Pieces>& buffer, fi_addr_t src, bool tagged,
                  uint64_t tag, uint64_t ignore, void* context, uint64_t flags);

ssize_t post_probe(Endpoint& ep, const std::optional<Pieces>& buffer, fi_addr_t src, uint64_t tag,
                   uint64_t ignore, void* context, uint64_t flags);

// Says why operations fail "peer unreachable" (or for want of a PDC): a warning for
// each batch of the engine's PDC failures not yet told, naming the last one's peer and
// cause (pdc_failure_warning.cc). Called when an operation completes so, never per packet.
void warn_of_failed_pdcs(Endpoint& ep);

extern fi_ops_msg msg_ops;
extern fi_ops_rma rma_ops;
extern fi_ops_tagged tagged_ops;
extern fi_ops_atomic atomic_ops;

}  // namespace spray::fi
