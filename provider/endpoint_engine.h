// EndpointEngine: the transport one endpoint drives — a transport engine over the
// datapath FI_SPRAY_DATAPATH names (auto, kernel UDP, shared memory, DPDK or verbs),
// behind one interface so the rest of the provider exists once for every datapath.
//
// Why virtual: the provider calls this once per libfabric operation or progress step,
// never per packet (the engine's per-packet loop stays a template over its datapath), so
// the indirect call costs nothing measurable, while templating the whole provider on the
// datapath would compile it twice and spread the choice over every file.
#pragma once

#include <memory>
#include <string>

#include "provider/spray_fi.h"
#include "transport/base/status.h"
#include "transport/base/time.h"
#include "transport/datapath/net_addr.h"
#include "transport/ses/ses.h"  // Completion, RecvSpec, SendSpec, MemoryRegion, ProbeAction
#include "transport/tss/secure_channels.h"

namespace spray::fi {

struct DomainKeys;

class EndpointEngine {
 public:
  virtual ~EndpointEngine() = default;

  // The engine's operations (see engine::Engine for their contracts).
  virtual pds::PeerIndex add_peer(const dp::NetAddr& addr) = 0;
  virtual dp::NetAddr peer_address(pds::PeerIndex p) const = 0;
  virtual dp::NetAddr local_address() const = 0;
  virtual Status send(pds::PeerIndex peer, const void* buf, uint64_t len, ses::UserContext ctx,
                      const ses::SendSpec& spec) = 0;
  virtual Status send_datagram(pds::PeerIndex peer, const void* buf, uint64_t len,
                               ses::UserContext ctx, const ses::SendSpec& spec) = 0;
  virtual Status post_recv(const ses::RecvSpec& spec) = 0;
  virtual Status cancel_recv(ses::UserContext ctx) = 0;
  virtual Status probe(const ses::RecvSpec& spec, ses::ProbeAction action, uint64_t claim_key) = 0;
  virtual Status recv_claimed(const ses::RecvSpec& spec, uint64_t claim_key) = 0;
  virtual Status write(pds::PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
                       uint64_t key, ses::UserContext ctx, const ses::SendSpec& spec) = 0;
  virtual Status read(pds::PeerIndex peer, void* local, uint64_t len, uint64_t remote_addr,
                      uint64_t key, ses::UserContext ctx, pds::Mode mode) = 0;
  virtual Status atomic(pds::PeerIndex peer, const ses::AtomicSpec& spec, uint64_t remote_addr,
                        uint64_t key, ses::UserContext ctx, pds::Mode mode) = 0;
  virtual Status register_memory(const ses::MemoryRegion& r) = 0;
  // Secured endpoints: makes the engine hold exactly `keys` (apply_domain_keys); nothing
  // when the endpoint is not secured.
  virtual void update_tss_keys(const DomainKeys& keys) = 0;
  virtual Status deregister_memory(uint64_t key) = 0;
  // Runs the engine once; returns the packets it received and sent (0: nothing moved).
  virtual size_t progress(Time now) = 0;
  // Sends what is ready without receiving first (engine::Engine::transmit).
  virtual size_t transmit(Time now) = 0;
  // Whether looking for received packets costs a system call (kernel UDP), rather than
  // a read of memory (shared-memory rings, DPDK and verbs queues; auto polls its UDP
  // socket only once per 20 us).
  virtual bool receive_poll_is_a_system_call() const = 0;
  virtual bool poll_completion(ses::Completion& out) = 0;
  // Sends, writes and reads not yet complete (their timers need progress).
  virtual size_t tx_in_use() = 0;

  // Blocks until a packet may be waiting or `timeout` passes.
  virtual void wait(Duration timeout) = 0;
  // Before the owner sleeps: sends the ACKs the engine holds back for a step that sends
  // something (engine::Engine::holds_acks). Domain mutex held.
  virtual void send_held_acks() = 0;
  // Before the owner blocks on wait_fd() with others (epoll): sends the held ACKs, and
  // datapaths that are woken only on request (shared memory) ask for it. False when
  // packets are already waiting.
  virtual bool prepare_wait() = 0;
  // A descriptor that becomes readable when packets arrive, for FI_WAIT_FD CQs; -1 when
  // the datapath has none (DPDK), and such an endpoint cannot join a FI_WAIT_FD CQ.
  virtual int wait_fd() const = 0;
  // Before the endpoint goes (fi_close): closes the engine's PDCs so that peers do not
  // hold theirs to it, and sends the ACKs and answers still owed, running the engine for
  // at most `limit`. Completions that arrive meanwhile are dropped: nobody reads them.
  virtual void close_pdcs(Duration limit) = 0;
  // The engine's counters in one line, logged (FI_LOG_LEVEL=info) when the endpoint closes.
  virtual std::string stats() = 0;
  // How many PDCs have failed, and the last one's peer and cause (for the warning an
  // endpoint logs when operations fail for it).
  virtual uint64_t pdcs_failed() const = 0;
  virtual pds::PdcFailureRecord last_pdc_failure() const = 0;
};

// Opens the datapath FI_SPRAY_DATAPATH names, bound to `info`'s source address (or
// FI_SPRAY_ADDRESS), and an engine over it whose packets carry, and whose peers' packets
// must carry, UET JobID `job_id` (0..2^24-1), sealed by UET TSS when `security` is set
// (see security.h). nullptr and a message naming the cause when the datapath cannot be
// opened (address not local, port in use, no DPDK port, ...).
std::unique_ptr<EndpointEngine> open_endpoint_engine(const fi_info* info, uint32_t job_id,
                                                     const std::optional<tss::TssConfig>& security,
                                                     std::string& error);

}  // namespace spray::fi
