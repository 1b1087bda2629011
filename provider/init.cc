// Provider entry: fi_prov_ini (what libfabric looks up in libspray-fi.so), the runtime
// parameters, and helpers every object shares.
#include <algorithm>
#include <cstring>

#include "provider/spray_fi.h"
#include "transport/datapath/fabric/fabric_datapath.h"
#include "transport/datapath/shm/shm_datapath.h"
#include "transport/datapath/udp/local_interface.h"
#include "transport/datapath/verbs/verbs_datapath.h"

namespace spray::fi {
namespace {

// libfabric unloads the provider next: no thread of ours may still run its code.
void cleanup() {
  ProgressThread::stop_all();
}

// Every parameter once: its name (FI_SPRAY_<NAME>), its field, and help text whose
// "Default:" is printed from Params{} so the default is stated in one place.
struct StringParam {
  const char* name;
  std::string Params::*field;
  const char* help;
};
struct IntParam {
  const char* name;
  int Params::*field;
  const char* help;
};

constexpr StringParam kStringParams[] = {
    {"datapath", &Params::datapath,
     "Datapath under the transport: auto (shared memory to peers on this host, kernel UDP "
     "to the others), udp (kernel UDP sockets only), shm (shared memory only; every peer "
     "on this host), dpdk (kernel bypass; one endpoint per process, IPv4), verbs (RDMA "
     "NIC, unreliable-datagram queue pairs; names are FI_ADDR_IB_UD) or fabric (every "
     "packet through spray-fabric, the software switch fabric at FI_SPRAY_FABRIC, which "
     "can lose, duplicate, corrupt, reorder and trim packets and take paths down)."},
    {"address", &Params::address,
     "Local IPv4/IPv6 address endpoints bind when the application names none "
     "(fi_getinfo node with FI_SOURCE). Empty: the address of FI_SPRAY_IFACE, or 127.0.0.1 "
     "without one."},
    {"iface", &Params::iface,
     "Network interface the UDP datapath (udp, auto) binds its sockets to, so that traffic "
     "leaves by it whatever the routes say; endpoints take its first IPv4 address (else a "
     "global IPv6 one) unless FI_SPRAY_ADDRESS or the application names another. Empty: "
     "none."},
    {"congestion", &Params::congestion,
     "Congestion control: nscc, rccc (receiver credit), nscc_rccc, dcqcn or fixed."},
    {"path_selection", &Params::path_selection,
     "Path (entropy) selection: reps, oblivious, ecmp, ecmp_repath or bitmap."},
    {"dpdk_args", &Params::dpdk_args,
     "DPDK EAL parameters, e.g. \"--no-huge -m 256 --vdev=net_memif0,role=server\"."},
    {"dpdk_port", &Params::dpdk_port, "DPDK ethdev name; empty: the only port."},
    {"fabric", &Params::fabric,
     "ADDRESS:PORT of the spray-fabric daemon that FI_SPRAY_DATAPATH=fabric sends through "
     "(its address family must be the endpoints')."},
    {"dpdk_neighbours", &Params::dpdk_neighbours,
     "Static DPDK neighbours, IP=MAC[,IP=MAC...] (IPv4 or IPv6); others are taken from "
     "the kernel's neighbour table or resolved by ARP or IPv6 neighbour discovery."},
    {"tss_key_file", &Params::tss_key_file,
     "File holding the secure domain's 32-byte key as 64 hex digits (e.g. from `openssl rand "
     "-hex 32`; readable by its owner only). Set, every packet is encrypted and "
     "authenticated with UET TSS (AES-256-GCM under keys derived for each pair of "
     "endpoints), and packets that do not open are dropped. Every process of a job must "
     "use the same key; an endpoint with another key, or none, cannot reach them. To move "
     "to a new key, the file may instead hold lines `AN KEY [seal]` (association number 0 "
     "or 1; `seal` on the key that seals); endpoints re-read it when it changes. Empty: "
     "packets are not secured."},
    {"verbs_device", &Params::verbs_device,
     "RDMA device for the verbs datapath (as ibv_devices lists it); empty: the first one."},
};
constexpr IntParam kIntParams[] = {
    {"entropy_ports", &Params::entropy_ports,
     "UDP source ports per endpoint (entropy values for ECMP spraying); a power of two <= 64, "
     "the same on every endpoint of a job."},
    {"mtu", &Params::mtu,
     "UET bytes per packet. 0: over udp the bound interface's MTU less IP and UDP headers, "
     "capped at a 9000-byte jumbo frame (8972 on loopback, 1472 on a 1500-byte Ethernet); "
     "over shm 16467 (the most SES fills); over dpdk 1472; over fabric 4096. Over auto, peers "
     "on this host get shm's (or this value if larger)."},
    {"rto_min_us", &Params::rto_min_us, "Lowest retransmission timeout, microseconds."},
    {"rto_max_ms", &Params::rto_max_ms,
     "Highest retransmission timeout after backoff, milliseconds."},
    {"retries", &Params::retries,
     "Retransmissions of one packet before the peer is declared unreachable and its "
     "operations complete in error; at most 100."},
    {"close_wait_ms", &Params::close_wait_ms,
     "How long closing an endpoint waits, at most, for its PDCs to close at its peers "
     "(so that they do not hold them for a peer that is gone) and for its last "
     "acknowledgements to go out, milliseconds; 0: not at all."},
    {"inject_size", &Params::inject_size, "Largest fi_inject / FI_INJECT payload, bytes."},
    {"socket_buffer", &Params::socket_buffer,
     "Kernel receive and send buffer of each UDP socket, bytes (4096 to 2^30). What arrives "
     "while the endpoint is not progressing waits there; when it is full the kernel drops "
     "datagrams and they must be resent. Granted in full with CAP_NET_ADMIN, else up to "
     "net.core.rmem_max / wmem_max (a warning says when less was granted)."},
    {"line_rate_gbps", &Params::line_rate_gbps,
     "Congestion control: the line rate of the path, Gbit/s; with base_rtt_us it sets the "
     "bandwidth-delay product (the starting window). 0: 100, or 400 over shm."},
    {"base_rtt_us", &Params::base_rtt_us,
     "Congestion control: the unloaded round-trip time, microseconds, for every peer. 0: 75 "
     "over kernel UDP (the round trip a bulk transfer sees, the receiving host busy), also "
     "for the peers on other hosts that auto reaches over UDP; 10 otherwise."},
    {"verbs_port", &Params::verbs_port, "Port of the RDMA device for the verbs datapath."},
    {"verbs_gid_index", &Params::verbs_gid_index,
     "GID index the verbs datapath sends from (RoCE: picks v1 or v2, IPv4 or IPv6; see "
     "show_gids)."},
    {"max_pdcs", &Params::max_pdcs,
     "PDCs (packet delivery contexts) an endpoint holds at once, 2..32768, about one per "
     "peer it talks to; beyond that, idle ones are closed and reopened as needed, which "
     "costs time."},
    {"reps_cache", &Params::reps_cache,
     "REPS: entropy values acknowledged without ECN that are kept for reuse, 1..32 (UET's "
     "REPS uses 8)."},
    {"job_id", &Params::job_id,
     "UET JobID, 0 to 16777215, that this process's endpoints put in every packet and "
     "require of every packet they take: an endpoint ignores packets of another job, as if "
     "it were not there, so a process that takes over the address of a dead one is not "
     "handed what was meant for it. Every process of a job must use the same; spray-run "
     "gives each launch its own unless this is set."},
    {"tss_domain", &Params::tss_domain,
     "Secure domain index (UET SDI, 1 to 16777215) in every secured packet; packets naming "
     "another are dropped. Used with FI_SPRAY_TSS_KEY_FILE."},
    {"tss_key_check_ms", &Params::tss_key_check_ms,
     "How often, in milliseconds, a secured endpoint looks whether FI_SPRAY_TSS_KEY_FILE "
     "changed (one stat), to take up new keys."},
    {"yield_after", &Params::yield_after,
     "fi_cq_read (or fi_cntr_read) calls in a row that find no completion and move no "
     "packet before one gives the CPU away (sched_yield), so that a peer sharing the core "
     "runs at once rather than at the end of the caller's time slice; 0: never."},
    {"standby_progress_ms", &Params::standby_progress_ms,
     "Under FI_PROGRESS_MANUAL: when the application makes no progress call (fi_cq_read, "
     "fi_cntr_read, their blocking forms) on a domain for this many milliseconds, a thread "
     "of the domain progresses its endpoints until it calls again, so that what peers "
     "send is acknowledged and answered, and what is in flight retransmitted, while it "
     "computes or blocks elsewhere. Without it a peer takes such a process for dead once "
     "its retries run out (FI_SPRAY_RETRIES). 0: no such thread (strict manual progress)."},
};

Params load_params() {
  const Params defaults;
  Params p;
  for (const StringParam& d : kStringParams) {
    fi_param_define(&provider, d.name, FI_PARAM_STRING, "%s Default: %s", d.help,
                    (defaults.*d.field).c_str());
    char* value = nullptr;
    if (fi_param_get_str(&provider, d.name, &value) == FI_SUCCESS && value) p.*d.field = value;
  }
  for (const IntParam& d : kIntParams) {
    fi_param_define(&provider, d.name, FI_PARAM_INT, "%s Default: %d", d.help, defaults.*d.field);
    fi_param_get_int(&provider, d.name, &(p.*d.field));
  }
  return p;
}

Params& mutable_params() {
  static Params p;
  return p;
}

}  // namespace

fi_provider provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(1, 17),
    .context = {},
    .name = "spray",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = cleanup,
};

const Params& params() {
  return mutable_params();
}

std::string default_address(std::string& error) {
  const Params& p = params();
  if (!p.address.empty()) return p.address;
  if (p.iface.empty()) return "127.0.0.1";
  return dp::interface_address(p.iface, error);
}

uint32_t datagram_bytes(const std::string& address) {
  if (params().mtu > 0) return static_cast<uint32_t>(params().mtu);
  if (params().datapath == "shm") return dp::ShmConfig{}.mtu_bytes;
  // DPDK owns no kernel interface to ask: what a 1500-byte IP packet holds.
  if (params().datapath == "dpdk")
    return dp::standard_udp_payload_bytes(address.find(':') != std::string::npos);
  if (params().datapath == "fabric") return dp::FabricDatapathConfig{}.mtu_bytes;
  if (params().datapath == "verbs") {
    std::string error;
    const uint32_t mtu = dp::VerbsDatapath::port_mtu(verbs_config(), error);
    return mtu ? mtu : dp::VerbsConfig{}.mtu_bytes;  // no port: the endpoint fails to open
  }
  std::string error;
  const uint32_t mtu = dp::udp_payload_mtu(address, error);
  return mtu ? mtu : 1472;  // an unknown address fails later, when the endpoint binds it
}

dp::VerbsConfig verbs_config() {
  const Params& p = params();
  dp::VerbsConfig c;
  c.device = p.verbs_device;
  c.port = static_cast<uint8_t>(std::clamp(p.verbs_port, 1, 255));
  c.gid_index = std::max(p.verbs_gid_index, 0);
  c.entropy_classes = static_cast<uint16_t>(std::clamp(p.entropy_ports, 1, 64));
  if (p.mtu > 0) c.mtu_bytes = static_cast<uint32_t>(p.mtu);
  return c;
}

int to_fi_errno(Status s) {
  switch (s) {
    case Status::kOk:
      return FI_SUCCESS;
    case Status::kTruncated:
      return FI_ETRUNC;
    case Status::kBadKey:
      return FI_EKEYREJECTED;
    case Status::kOutOfBounds:
      return FI_EINVAL;
    case Status::kAccessDenied:
      return FI_EACCES;
    case Status::kPeerUnreachable:
      return FI_EHOSTUNREACH;
    case Status::kNoPdcAvailable:
      return FI_EAGAIN;
    case Status::kCanceled:
      return FI_ECANCELED;
    case Status::kTooLong:
      return FI_EMSGSIZE;
    case Status::kAgain:
      return FI_EAGAIN;
    case Status::kInvalidArgument:
      return FI_EINVAL;
    case Status::kProtocolError:
      return FI_EIO;
    case Status::kNoMessage:
      return FI_ENOMSG;
    case Status::kUnsupported:
      return FI_EOPNOTSUPP;
    case Status::kUnaligned:
      return FI_EINVAL;
  }
  return FI_EOTHER;
}

int no_bind(fid*, fid*, uint64_t) {
  return -FI_ENOSYS;
}
int no_control(fid*, int, void*) {
  return -FI_ENOSYS;
}
int no_ops_open(fid*, const char*, uint64_t, void**, void*) {
  return -FI_ENOSYS;
}

}  // namespace spray::fi

namespace spray::fi {
namespace {

// libfabric 1.x keeps {enum type; bool disable_logging; bool disable_layering;} in the
// provider's context (ofi_prov_context, internal) and sets disable_layering for core
// providers that have a native RDM endpoint (sockets, shm, efa, ...), so that utility
// providers do not stack on them unless asked. We have one too: without this, ofi_rxd
// stacks on our DGRAM endpoint and "spray;ofi_rxd" is listed before our own RDM
// endpoint, which applications then pick. The core only ever sets the flag, never
// clears it, so setting it before registration is enough.
struct CoreProviderContext {
  int type;
  bool disable_logging;
  bool disable_layering;
};
static_assert(sizeof(CoreProviderContext) <= sizeof(fi_context));

void disable_layering() {
  if (FI_MAJOR(fi_version()) != 1) return;  // layout known for 1.x only
  CoreProviderContext c{};
  std::memcpy(&c, &provider.context, sizeof(c));
  c.disable_layering = true;
  std::memcpy(&provider.context, &c, sizeof(c));
}

}  // namespace
}  // namespace spray::fi

extern "C" FI_EXT_INI {
  spray::fi::mutable_params() = spray::fi::load_params();
  spray::fi::disable_layering();
  return &spray::fi::provider;
}
