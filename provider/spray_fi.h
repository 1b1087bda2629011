// The libfabric provider `spray`: the objects an application opens and the helpers they
// share. Each object is a C++ struct whose first member is the libfabric fid struct, so
// a fid pointer handed to us converts back with container_of-style casts (fid_to<T>).
//
// Threading: every entry point takes its domain's mutex (FI_THREAD_SAFE and
// FI_THREAD_DOMAIN alike). Calls, not packets, take it: one progress call moves a burst.
// Progress: fi_cq_read / fi_cntr_read / fi_cq_sread on an object drive the engines of
// the domain's endpoints (FI_PROGRESS_MANUAL, advertised by default); a domain opened
// with FI_PROGRESS_AUTO also has a ProgressThread doing the same in the background, and
// under manual progress one stands by for when the application stops calling.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "provider/idle_yield.h"
#include "provider/progress_thread.h"
#include "provider/wait_fd.h"
#include "transport/base/status.h"
#include "transport/base/time.h"
#include "transport/datapath/net_addr.h"

namespace spray::dp {
struct VerbsConfig;
}

namespace spray::fi {

extern fi_provider provider;

// Runtime parameters (fi_param_define'd once at load; `fi_info -e` lists them).
struct Params {
  // FI_SPRAY_DATAPATH: auto (shared memory to local peers, UDP to others), udp, shm, dpdk,
  // verbs.
  std::string datapath = "auto";
  // FI_SPRAY_ADDRESS: the address endpoints bind when the application names none; empty:
  // FI_SPRAY_IFACE's, else 127.0.0.1 (see default_address).
  std::string address;
  // FI_SPRAY_IFACE: the network interface UDP sockets are bound to (SO_BINDTODEVICE), so
  // traffic leaves by it whatever the routes say; empty: none.
  std::string iface;
  // FI_SPRAY_SOCKET_BUFFER: kernel receive and send buffer of each UDP socket, bytes.
  int socket_buffer = 4 << 20;
  std::string dpdk_args;        // EAL parameters for the DPDK datapath
  std::string dpdk_port;        // its ethdev; empty: the only one
  std::string dpdk_neighbours;  // "IP=MAC,IP=MAC": static neighbours for DPDK
  std::string fabric;           // spray-fabric's ADDR:PORT for FI_SPRAY_DATAPATH=fabric
  std::string verbs_device;     // RDMA device for verbs; empty: the first one
  int verbs_port = 1;           // its port
  int verbs_gid_index = 0;      // the GID (RoCE: selects v1/v2 and IPv4/IPv6) to send from
  int entropy_ports = 8;
  int mtu = 0;  // 0: from the interface of the bound address (see datagram_bytes)
  std::string congestion = "nscc";
  std::string path_selection = "reps";
  int reps_cache = 32;  // FI_SPRAY_REPS_CACHE: REPS's recycled entropy values, 1..32
  int max_pdcs = 1024;  // FI_SPRAY_MAX_PDCS: PDCs an endpoint holds at once, 2..32768
  int rto_min_us = 1000;
  // A silent peer is declared dead after about 1+2+...+256 ms + 7 x 500 ms = 4 s: long
  // enough for a process descheduled on an oversubscribed host (0.6 s was not: ranks
  // were declared dead under load), short enough that a dead one is noticed.
  int rto_max_ms = 500;
  int retries = 16;
  // How long fi_close runs a closing endpoint to close its PDCs at the peers (see
  // EndpointEngine::close_pdcs). Peers that progress answer within a round trip and a
  // scheduling delay; a dead or unprogressed one costs the whole wait.
  int close_wait_ms = 20;
  int inject_size = 1024;
  // The path a PDC's congestion control assumes: its bandwidth-delay product is the
  // starting (and the fixed algorithm's) window. 0: 100 Gbit/s over udp/dpdk, 400 over
  // shm (memory is the link: a 125 KB window stalled 16 KiB packets every 8).
  int line_rate_gbps = 0;
  int base_rtt_us = 0;  // 0: by datapath (see engine_config)
  // FI_SPRAY_YIELD_AFTER: fi_cq_read (or fi_cntr_read) calls in a row that find nothing
  // and move no packet before one yields the CPU (see idle_yield.h); 0: never.
  int yield_after = 64;
  // FI_SPRAY_STANDBY_PROGRESS_MS: under manual progress, how long the application may make
  // no progress call before a standby thread progresses for it (progress_thread.h); 0: no
  // such thread.
  int standby_progress_ms = 10;
  // FI_SPRAY_JOB_ID: UET's JobID (0..2^24-1) in every packet this process's endpoints
  // send, and required of every packet they take (see Engine::of_our_job): endpoints of
  // different jobs ignore each other. 0: the job of every process that names none.
  int job_id = 0;
  // FI_SPRAY_TSS_KEY_FILE: a file holding the secure domain's key (64 hex digits); every
  // packet is then sealed with UET TSS (provider/security.h). Empty: not secured.
  std::string tss_key_file;
  int tss_domain = 1;  // FI_SPRAY_TSS_DOMAIN: the secure domain index (SDI), 1..2^24-1
  int tss_key_check_ms =
      1000;  // FI_SPRAY_TSS_KEY_CHECK_MS: how often endpoints look at the key file
};
const Params& params();
// The JobID an authorization key names (fi_domain_attr / fi_ep_attr auth_key): 4 bytes, a
// uint32_t in host byte order from 0 to 2^24-1 (UET's JobID is 24 bits). nullopt, with
// the reason in `why`, for any other key. Endpoints of different keys, like those of
// different FI_SPRAY_JOB_IDs, ignore each other (see Engine::of_our_job).
std::optional<uint32_t> job_id_of_auth_key(const uint8_t* key, size_t size, std::string& why);
// The address endpoints bind when the application names none: FI_SPRAY_ADDRESS, else the
// address of FI_SPRAY_IFACE (its first IPv4 one, else a global IPv6 one), else
// 127.0.0.1. Empty, with `error` saying why, when FI_SPRAY_IFACE names no interface or
// one without a usable address.
std::string default_address(std::string& error);
// UET bytes per packet on `address`: FI_SPRAY_MTU when set; else for UDP the interface's
// MTU less IP and UDP headers, capped at a 9000-byte jumbo frame (1472 if unknown); for
// shm the largest packet SES fills; for DPDK a 1500-byte Ethernet's; for verbs the
// RDMA port's active MTU (at most 4096).
uint32_t datagram_bytes(const std::string& address);
// The verbs datapath's configuration from the FI_SPRAY_VERBS_* parameters.
dp::VerbsConfig verbs_config();

#define SPRAY_WARN(subsys, ...) FI_WARN(&::spray::fi::provider, subsys, __VA_ARGS__)

// Converts a libfabric fid (or its enclosing fid_* struct) back to our object.
template <class T, class F>
T* fid_to(F* f) {
  return reinterpret_cast<T*>(f);
}

// libfabric error number for a transport status.
int to_fi_errno(Status s);
// fi_query_atomic (atomic.cc): whether the domain's endpoints offer `op` on `datatype`
// through the call `flags` names (FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC, else fi_atomic).
int query_atomic(fi_datatype datatype, fi_op op, fi_atomic_attr* attr, uint64_t flags);

struct Domain;
struct Endpoint;
struct CompletionQueue;
struct Counter;

struct Fabric {
  fid_fabric fid{};
};

// A registered buffer. Regions with remote access are entered into the engine of every
// endpoint of the domain (into one bound endpoint under FI_MR_ENDPOINT, at fi_mr_enable).
struct MemoryRegion {
  fid_mr fid{};
  Domain* domain = nullptr;
  uint64_t access = 0;
  const void* base = nullptr;
  size_t length = 0;
  uint64_t remote_base = 0;   // the address peers name for base: its VA (FI_MR_VIRT_ADDR) or 0
  Endpoint* bound = nullptr;  // FI_MR_ENDPOINT: fi_mr_bind's endpoint
  // fi_mr_bind(FI_REMOTE_WRITE): counts every peer's write or atomic that changes this
  // region through an FI_RMA_EVENT endpoint. The counter stays open while bound.
  Counter* remote_write_cntr = nullptr;
  std::vector<Endpoint*> registered_at;  // engines that hold this region
};

struct Domain {
  fid_domain fid{};
  fi_info* info = nullptr;  // owned copy (fi_dupinfo)
  std::mutex mutex;
  int refs = 0;  // open children (AVs, CQs, endpoints, MRs, counters)
  uint64_t next_key = 1;
  std::unordered_map<uint64_t, MemoryRegion*> keys;
  std::vector<Endpoint*> endpoints;  // open endpoints, for domain-wide memory regions
  // FI_PROGRESS_AUTO: notified (mutex held) when the progress thread delivered
  // completions, so fi_cq_sread / fi_cntr_wait wake without polling the datapath.
  std::condition_variable completions_delivered;
  // Progress passes the application made (domain_progress): written with the mutex
  // held, read without it by a standing-by progress thread to see whether it is away.
  std::atomic<uint64_t> application_passes{0};
  // When a pass last drove every endpoint of the domain (mutex held): posts drive their
  // own endpoint only, and use this to drive the others too when they have waited too
  // long (see endpoint_transmit).
  Time all_progressed_at{};
  // FI_PROGRESS_AUTO's thread, or manual progress's standby (FI_SPRAY_STANDBY_PROGRESS_MS);
  // last, so it stops before the members it uses go away.
  std::unique_ptr<ProgressThread> progress_thread;

  bool mr_endpoint_mode() const { return info->domain_attr->mr_mode & FI_MR_ENDPOINT; }
};

// Address vector: fi_addr_t is the index of the entry in both FI_AV_MAP and FI_AV_TABLE.
struct AddressVector {
  fid_av fid{};
  Domain* domain = nullptr;
  fi_av_type type = FI_AV_TABLE;
  uint32_t addr_format = FI_SOCKADDR_IN;  // the domain's: how names are read and written
  std::vector<dp::NetAddr> addrs;
  std::vector<bool> valid;
  std::unordered_map<uint64_t, fi_addr_t> by_hash;  // NetAddr::hash -> fi_addr
  int refs = 0;                                     // bound endpoints

  fi_addr_t find(const dp::NetAddr& a) const;
};

// A completion, kept in the widest form and narrowed to the CQ's format on read.
struct CqEntry {
  fi_cq_tagged_entry entry{};
  fi_addr_t source = FI_ADDR_NOTAVAIL;
  bool error = false;  // a marker: the next of CompletionQueue::errors is read here
};

struct CompletionQueue {
  fid_cq fid{};
  Domain* domain = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  fi_wait_obj wait_obj = FI_WAIT_NONE;
  // Completions in the order they happened. An error keeps its place with a marker in
  // `entries` while its details wait in `errors`: fi_cq_read stops at it (-FI_EAVAIL) and
  // fi_cq_readerr takes it, as libfabric's own CQs do. Without the order, a multi-receive
  // buffer's release could be read before the error entry of a message placed in it.
  std::deque<CqEntry> entries;
  std::deque<fi_cq_err_entry> errors;
  std::vector<Endpoint*> endpoints;  // bound: progressing this CQ drives them
  bool signaled = false;
  std::unique_ptr<WaitFd> wait_fd;  // FI_WAIT_FD only
  IdleYield idle_yield{static_cast<uint32_t>(std::max(params().yield_after, 0))};  // fi_cq_read's

  void push_error(const fi_cq_err_entry& e) {
    errors.push_back(e);
    entries.push_back(CqEntry{.error = true});
  }
  // Drives the domain's endpoints (see cq.cc); domain mutex held. True when any packet
  // moved or any completion was delivered.
  bool progress();
  // fi_trywait on this CQ: -FI_EAGAIN when there is something to read, else arms the
  // wait fd and returns FI_SUCCESS (domain mutex not held).
  int trywait();
};

struct Counter {
  fid_cntr fid{};
  Domain* domain = nullptr;
  uint64_t value = 0;
  uint64_t errors = 0;
  std::vector<Endpoint*> endpoints;  // bound: reading or waiting drives them
  int regions = 0;                   // memory regions bound to it (fi_mr_bind)
  fi_wait_obj wait_obj = FI_WAIT_NONE;
  std::unique_ptr<WaitFd> wait_fd;  // FI_WAIT_FD only
  // What the last fi_trywait saw: it returns -FI_EAGAIN once for every change since.
  uint64_t value_at_trywait = 0;
  uint64_t errors_at_trywait = 0;
  IdleYield idle_yield{static_cast<uint32_t>(std::max(params().yield_after, 0))};  // fi_cntr_read's

  // Drives the domain's endpoints; domain mutex held. True when any packet moved or any
  // completion was delivered.
  bool progress();
  // fi_trywait on this counter: -FI_EAGAIN when it changed since the last call, else
  // arms the wait fd and returns FI_SUCCESS (domain mutex not held).
  int trywait();
};

struct EventQueue {
  fid_eq fid{};
  std::deque<std::vector<uint8_t>> events;  // written with fi_eq_write
};

// Entry points of the objects, one file each.
int fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context);
int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context);
int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context);
int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context);
int endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);
int mr_reg(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset,
           uint64_t requested_key, uint64_t flags, fid_mr** mr, void* context);
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info);
// The order an RDM endpoint keeps (tx_attr and rx_attr msg_order): every pair of sends,
// reads, writes and atomics (FI_ORDER_STRICT and the RMA_ and ATOMIC_ forms). Asked for,
// any of these puts all the endpoint's operations to a peer, in the order posted, on one
// ROD PDC (Endpoint::ordered), whose target takes each packet in PSN order as it arrives,
// across the initiator's successive PDCs too (Engine::behind_a_stalled_line). That orders
// how operations are processed (matched, applied, served); the data orders are
// max_order_*_size (attr.cc). Not offered: FI_ORDER_DATA (a rendezvous send's data is
// pulled after later operations may have been processed). MPICH uses libfabric atomics
// for MPI's accumulates only with the four ATOMIC_ orders. tests/transport/engine/
// rod_order_test.cc checks atomics against atomics across PDC closes, reads against
// writes, and sends against writes and atomics.
inline constexpr uint64_t kRdmMsgOrder =
    FI_ORDER_STRICT | FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR | FI_ORDER_RMA_WAW |
    FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
// The mr_mode bits an application's domain_attr->mr_mode stands for. FI_MR_BASIC and
// FI_MR_SCALABLE, the whole choice before libfabric 1.5 and still accepted, are the
// values 1 and 2, which no combination of the later bits takes: BASIC is provider keys,
// virtual addresses and allocated memory; SCALABLE is none of them.
uint64_t mr_mode_bits(int mr_mode);

// Enters a region with remote access into an endpoint's engine (domain mutex held).
int mr_register_at(MemoryRegion& mr, Endpoint& ep);
// Forgets a closing endpoint in every region of its domain (domain mutex held).
void mr_forget_endpoint(Domain& d, Endpoint& ep);

// What one endpoint_progress did.
struct ProgressDone {
  size_t completions = 0;  // delivered to the endpoint's CQs and counters
  size_t packets = 0;      // the engine received and sent
};
// Drives one endpoint's engine and turns its completions into CQ entries.
ProgressDone endpoint_progress(Endpoint& ep);
// Puts what a post made ready on the wire (domain mutex held): over kernel UDP without
// receiving first (its receive poll is a system call that usually finds nothing, and
// held every message back by it); elsewhere a whole endpoint_progress.
void endpoint_transmit(Endpoint& ep);
// endpoint_progress on every endpoint of the domain for the application (domain mutex
// held; counted in Domain::application_passes): true when any packet moved or any
// completion was delivered.
bool domain_progress(Domain& d);
// Under FI_PROGRESS_AUTO: waits (domain mutex not held) for the progress thread to
// deliver completions, at most `timeout_ms`; false at once without such a thread.
bool wait_for_progress_thread(Domain& d, int timeout_ms);
// Blocks up to `timeout_ms` for traffic on the endpoint's datapath (domain mutex not held).
void endpoint_wait(Endpoint& ep, int timeout_ms);
// Arms `wait` to wake after the shortest retransmission timeout if any of `endpoints`
// has operations in flight (their timers need progress even when nothing arrives);
// disarms it otherwise. Domain mutex held.
void arm_for_timers(WaitFd& wait, const std::vector<Endpoint*>& endpoints);
// Before a wait on the descriptors of `endpoints` (their wait_fd): sends the ACKs their
// engines hold back for a step that sends something (engine::Engine::holds_acks), so that no peer
// waits out the sleep for them, and tells datapaths that must be woken (shared memory)
// that their owner is about to sleep. False when one of them has packets waiting, so the
// caller must not block. Domain mutex held.
bool ready_to_block(const std::vector<Endpoint*>& endpoints);
// Before a blocking read or wait sleeps for `endpoints`: ready_to_block when it sleeps on
// their descriptors (`on_descriptors`); otherwise (a sleep or a wait on one endpoint's
// datapath) it only sends the held ACKs, and is always ready. Domain mutex held.
bool ready_to_sleep(const std::vector<Endpoint*>& endpoints, bool on_descriptors);
// Adds `ep`'s receive descriptor to `wait`: -FI_EOPNOTSUPP (logged) when its datapath
// has none, -FI_EIO when epoll refuses it.
int watch_endpoint(WaitFd& wait, Endpoint& ep);

// The not-supported stubs every table uses where an operation does not exist here.
int no_bind(fid*, fid*, uint64_t);
int no_control(fid*, int, void*);
int no_ops_open(fid*, const char*, uint64_t, void**, void*);

}  // namespace spray::fi
