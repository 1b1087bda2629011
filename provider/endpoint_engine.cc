// The datapaths an endpoint can run over, and the engine over each: the configuration
// each datapath takes from the endpoint's source address and the FI_SPRAY_* parameters.
#include "provider/endpoint_engine.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>

#include "provider/security.h"
#include "transport/datapath/auto/auto_datapath.h"
#include "transport/datapath/clock.h"
#include "transport/datapath/dpdk/dpdk_datapath.h"
#include "transport/datapath/fabric/fabric_datapath.h"
#include "transport/datapath/shm/shm_datapath.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"
#include "transport/datapath/verbs/verbs_datapath.h"
#include "transport/engine/engine.h"
#include "transport/engine/real_time_config.h"
#include "transport/tss/key_derivation.h"

namespace spray::fi {
namespace {

// One engine over a datapath of type D; owns both (the engine refers to the datapath).
// Operations that may wait for a PDC (send, write, read) move the engine's clock to now
// first: under manual progress the last progress may be long past (Engine::advance_clock).
template <class D>
class EngineOver final : public EndpointEngine {
 public:
  EngineOver(std::unique_ptr<D> datapath, const engine::EngineConfig& config)
      : datapath_(std::move(datapath)), engine_(*datapath_, config) {}

  pds::PeerIndex add_peer(const dp::NetAddr& addr) override { return engine_.add_peer(addr); }
  dp::NetAddr peer_address(pds::PeerIndex p) const override { return engine_.peer_address(p); }
  dp::NetAddr local_address() const override { return engine_.local_address(); }
  Status send(pds::PeerIndex peer, const void* buf, uint64_t len, ses::UserContext ctx,
              const ses::SendSpec& spec) override {
    engine_.advance_clock(dp::monotonic_now());
    return engine_.send(peer, buf, len, ctx, spec);
  }
  Status send_datagram(pds::PeerIndex peer, const void* buf, uint64_t len, ses::UserContext ctx,
                       const ses::SendSpec& spec) override {
    return engine_.send_datagram(peer, buf, len, ctx, spec);
  }
  Status post_recv(const ses::RecvSpec& spec) override { return engine_.post_recv(spec); }
  Status cancel_recv(ses::UserContext ctx) override { return engine_.cancel_recv(ctx); }
  Status probe(const ses::RecvSpec& spec, ses::ProbeAction action, uint64_t claim_key) override {
    return engine_.probe(spec, action, claim_key);
  }
  Status recv_claimed(const ses::RecvSpec& spec, uint64_t claim_key) override {
    return engine_.recv_claimed(spec, claim_key);
  }
  Status write(pds::PeerIndex peer, const void* local, uint64_t len, uint64_t remote_addr,
               uint64_t key, ses::UserContext ctx, const ses::SendSpec& spec) override {
    engine_.advance_clock(dp::monotonic_now());
    return engine_.write(peer, local, len, remote_addr, key, ctx, spec);
  }
  Status read(pds::PeerIndex peer, void* local, uint64_t len, uint64_t remote_addr, uint64_t key,
              ses::UserContext ctx, pds::Mode mode) override {
    engine_.advance_clock(dp::monotonic_now());
    return engine_.read(peer, local, len, remote_addr, key, ctx, mode);
  }
  Status atomic(pds::PeerIndex peer, const ses::AtomicSpec& spec, uint64_t remote_addr,
                uint64_t key, ses::UserContext ctx, pds::Mode mode) override {
    engine_.advance_clock(dp::monotonic_now());
    return engine_.atomic(peer, spec, remote_addr, key, ctx, mode);
  }
  Status register_memory(const ses::MemoryRegion& r) override { return engine_.register_memory(r); }
  Status deregister_memory(uint64_t key) override { return engine_.deregister_memory(key); }
  void update_tss_keys(const DomainKeys& keys) override {
    if (tss::SecureChannels* channels = engine_.secure_channels()) {
      apply_domain_keys(keys, *channels);
    }
  }
  size_t progress(Time now) override { return engine_.progress(now); }
  size_t transmit(Time now) override { return engine_.transmit(now); }
  bool receive_poll_is_a_system_call() const override {
    return std::is_same_v<D, dp::UdpDatapath> || std::is_same_v<D, dp::FabricDatapath>;
  }
  bool poll_completion(ses::Completion& out) override { return engine_.poll_completion(out); }
  size_t tx_in_use() override { return engine_.ses().tx_in_use(); }
  void wait(Duration timeout) override { datapath_->wait(timeout); }
  void send_held_acks() override {
    if (engine_.holds_acks()) engine_.send_held_acks(dp::monotonic_now());
  }
  bool prepare_wait() override {
    send_held_acks();
    if constexpr (requires(D & d) { d.prepare_wait(); }) {
      return datapath_->prepare_wait();
    } else {
      return true;  // kernel sockets signal their descriptor by themselves
    }
  }
  void close_pdcs(Duration limit) override {
    const Time end = dp::monotonic_now() + limit;
    ses::Completion dropped;
    for (Time now = dp::monotonic_now(); now < end; now = dp::monotonic_now()) {
      if (engine_.close_all(now) == 0) return;
      const size_t moved = engine_.progress(now);
      while (engine_.poll_completion(dropped)) {
      }
      // Waiting for the peers' answers: sleep on the datapath, as a blocked reader would.
      if (moved == 0) datapath_->wait(std::min(Duration::microseconds(500), end - now));
    }
  }
  std::string stats() override {
    const pds::PdsStats& p = engine_.pds().stats();
    const engine::EngineStats& e = engine_.stats();
    const ses::SesStats& s = engine_.ses().stats();
    const std::string transport = fmt::format(
        "packets tx {} rx {}; retransmits {} (rack {}, timeout {}, twin copies {}); "
        "duplicates {}; acks sent {} (held {}) received {} (stale {}); nacks sent {} received {}; "
        "bad {}; "
        "malformed {}; of another job {}; refused {}; ordered lines stalled {} (behind an older "
        "pdc {}); unknown peers {}; pdcs opened {} closed {} "
        "failed {} (unanswered {}, unknown at the peer {}, peer full {}) reopened {} refused {} "
        "reclaimed {} (close requests {}, sends that waited {}, failed waiting {}); answer "
        "detours {}; "
        "rendezvous direct reads {} (fell back {}); stale tickets {}; receives abandoned by a "
        "failed sender {}, their missing send ids passed over {}, writes abandoned by a failed "
        "initiator "
        "{}; peers restarted {} (their pdcs failed {}; requests of a retired incarnation {}, "
        "to an earlier one of ours {}; hellos sent {}); atomics applied {} refused {}",
        e.tx_packets, e.rx_packets, p.retransmits, p.rack_retransmits, p.timeout_retransmits,
        p.twin_copies, p.rx_duplicates, p.acks_sent, p.acks_held, p.acks_received, p.stale_acks,
        p.nacks_sent, p.nacks_received, p.bad_packets, e.rx_malformed, e.rx_foreign_job,
        e.rx_refused, e.rx_rod_stalls, e.rx_rod_behind, e.rx_unknown_peer, p.pdcs_opened,
        p.pdcs_closed, p.pdcs_failed, p.pdcs_failed_unanswered, p.pdcs_failed_unknown_at_peer,
        p.pdcs_failed_peer_full, p.pdcs_reopened, p.pdcs_refused, p.pdcs_reclaimed,
        p.close_requests, p.pdc_waits, p.pdc_wait_failures, p.answer_detours, s.direct_reads,
        s.direct_read_fallbacks, s.stale_tickets, s.receives_abandoned, s.missing_ids_passed_over,
        s.writes_abandoned, s.peers_restarted, p.pdcs_of_restarted_peers,
        s.requests_of_a_retired_incarnation, s.requests_to_an_earlier_incarnation, s.hellos_sent,
        s.atomics_applied, s.atomic_errors);
    return transport + tss_stats() + datapath_stats();
  }
  uint64_t pdcs_failed() const override { return engine_.pds().stats().pdcs_failed; }
  pds::PdcFailureRecord last_pdc_failure() const override {
    return engine_.pds().last_pdc_failure();
  }
  // What only the DPDK and fabric datapaths count: what they could not send and what they
  // refused.
  std::string datapath_stats() const {
    if constexpr (std::is_same_v<D, dp::DpdkDatapath>) {
      const dp::DpdkStats& d = datapath_->stats();
      return fmt::format(
          "; DPDK tx dropped {} without neighbour {}; rx not for us {} bad checksum {} malformed "
          "{}{}",
          d.tx_dropped, d.tx_no_neighbour, d.rx_not_for_us, d.rx_bad_checksum, d.rx_malformed,
          d.link_wait_expired ? "; the link was still down when the first frames went out" : "");
    } else if constexpr (std::is_same_v<D, dp::FabricDatapath>) {
      const dp::FabricDatapathStats& f = datapath_->stats();
      return fmt::format(
          "; through spray-fabric at {}: tx dropped {}; rx not from the fabric {} malformed {}",
          datapath_->fabric_address().to_string(), f.tx_dropped, f.rx_not_from_fabric,
          f.rx_malformed);
    } else if constexpr (std::is_same_v<D, dp::UdpDatapath>) {
      const dp::UdpStats& u = datapath_->stats();
      return fmt::format(
          "; UDP tx {} packets in {} sendmmsg ({} GSO runs), dropped {}; rx {} packets in {} "
          "recvmmsg ({} GRO runs), copied {}, no buffer {}, truncated {}",
          u.tx_packets, u.tx_syscalls, u.tx_gso_messages, u.tx_dropped, u.rx_packets, u.rx_syscalls,
          u.rx_gro_messages, u.rx_copied, u.rx_no_buffer, u.rx_truncated);
    } else {
      return "";
    }
  }
  // What TSS sealed, opened and refused, when the endpoint is secured.
  std::string tss_stats() {
    if (!engine_.secured()) return "";
    const tss::TssStats& t = engine_.tss_stats();
    return fmt::format(
        "; TSS sealed {} opened {}, refused: not secured {} other domain {} replayed {} forged "
        "{} trimmed from unknown {}; trims {}; not sealed {}; with association 1 sealed {} "
        "opened {}",
        t.sealed, t.opened, t.rx_not_secured, t.rx_other_domain, t.rx_replayed, t.rx_forged,
        t.rx_trimmed_unknown, t.rx_trimmed, t.tx_failed, t.sealed_an1, t.opened_an1);
  }
  int wait_fd() const override {
    if constexpr (requires(const D& d) { d.wait_fd(); }) {
      return datapath_->wait_fd();
    } else {
      return -1;
    }
  }

 private:
  std::unique_ptr<D> datapath_;
  engine::Engine<D> engine_;
};

// The engine of an endpoint of job `job_id` opened with `caps` (see open_endpoint_engine),
// from the runtime parameters.
engine::EngineConfig engine_config(uint64_t caps, uint32_t job_id) {
  const Params& p = params();
  engine::EngineConfig e = engine::real_time_engine_config();
  e.pds.cc_name = p.congestion;
  e.pds.path_name = p.path_selection;
  e.pds.entropy_count = static_cast<uint16_t>(p.entropy_ports);
  e.pds.reps_cache = static_cast<uint16_t>(std::clamp(p.reps_cache, 1, 32));
  e.pds.max_pdcs = static_cast<uint32_t>(std::clamp(p.max_pdcs, 2, 32768));
  const int default_rate = p.datapath == "shm" ? 400 : 100;
  e.pds.cc.line_rate_gbps =
      p.line_rate_gbps > 0 ? std::min(p.line_rate_gbps, 100000) : default_rate;
  // Kernel UDP crosses two network stacks each way: unloaded, a loopback round trip is
  // about 20-25 us (fi_pingpong's 8 B latency), against a few over shared memory or a
  // kernel-bypass NIC. But NSCC's window is at most 1.5 x line rate x base RTT, and under
  // a bulk transfer the receiving host's own work (its copies, its acknowledgements)
  // stretches the round trip a full packet and its ACK take: at 25 the window (470 KB)
  // kept a loopback stream waiting for ACKs, the sender polling its socket 160,000 times
  // a second. At 75 (2026-11-25, spray-fi-rate 1 MiB streams, interleaved rounds) the
  // stream ran 1.05-1.33x faster and fi_pingpong's 1 MiB 1.0-1.2x, with 8 B latency and
  // 4-rank collectives over udp unchanged or better. (10 had been ~20 % slower than 25.)
  // Over auto, peers on other hosts are reached by kernel UDP and get its figure
  // (EngineConfig::network_base_rtt); with 10 for them too a 1 MiB stream over UDP ran
  // at 0.69x (4380 against 6340 MB/s, spray-fi-rate over udp, 2026-11-26).
  constexpr int kKernelUdpRttUs = 75, kOtherRttUs = 10;
  const auto rtt = [&p](int default_us) {
    return Duration::microseconds(
        std::clamp(p.base_rtt_us > 0 ? p.base_rtt_us : default_us, 1, 100000));
  };
  // Through spray-fabric a packet crosses the kernel twice and the daemon once: at least
  // kernel UDP's figure.
  e.pds.cc.base_rtt =
      rtt(p.datapath == "udp" || p.datapath == "fabric" ? kKernelUdpRttUs : kOtherRttUs);
  if (p.datapath == "auto") e.network_base_rtt = rtt(kKernelUdpRttUs);
  e.pds.min_rto = Duration::microseconds(p.rto_min_us);
  e.pds.max_rto = Duration::milliseconds(p.rto_max_ms);
  e.pds.max_retries = static_cast<uint32_t>(p.retries);
  e.ses.job_id = job_id;
  e.ses.report_remote_access = (caps & FI_RMA_EVENT) != 0;
  return e;
}

// The endpoint's local address: info's source address, else default_address() port 0.
bool local_address(const fi_info* info, dp::NetAddr& out, std::string& error) {
  if (!info->src_addr) {
    const std::string address = default_address(error);
    if (address.empty()) return false;
    const auto a = dp::parse_ip(address, 0);
    if (!a) error = "FI_SPRAY_ADDRESS '" + address + "' is not an IP address";
    if (a) out = *a;
    return a.has_value();
  }
  const auto family = static_cast<const sockaddr*>(info->src_addr)->sa_family;
  if (family != AF_INET && family != AF_INET6) {
    error = "source address is not IPv4 or IPv6";
    return false;
  }
  sockaddr_storage ss{};
  std::memcpy(&ss, info->src_addr, std::min(info->src_addrlen, sizeof(ss)));
  out = dp::from_sockaddr(ss);
  return true;
}

dp::UdpConfig udp_config(const dp::NetAddr& local) {
  dp::UdpConfig c;
  c.address = dp::ip_to_string(local);
  c.port = local.port;
  c.entropy_ports = static_cast<uint16_t>(params().entropy_ports);
  c.mtu_bytes = datagram_bytes(c.address);
  c.buffers = 4096;
  c.interface = params().iface;
  c.socket_buffer_bytes = static_cast<uint32_t>(std::clamp(params().socket_buffer, 4096, 1 << 30));
  return c;
}

// Says once per endpoint when the kernel granted smaller socket buffers than asked
// (net.core.rmem_max / wmem_max without CAP_NET_ADMIN): bursts the receive buffer cannot
// hold are dropped and resent, which shows only as lower throughput.
void warn_if_buffers_short(const dp::UdpDatapath& udp, const dp::UdpConfig& asked) {
  const dp::UdpDatapath::SocketBuffers got = udp.socket_buffers();
  if (got.receive_bytes >= asked.socket_buffer_bytes &&
      got.send_bytes >= asked.socket_buffer_bytes) {
    return;
  }
  SPRAY_WARN(FI_LOG_EP_CTRL,
             "FI_SPRAY_SOCKET_BUFFER=%u: the kernel granted %u receive and %u send bytes "
             "(raise net.core.rmem_max and wmem_max, or give the process CAP_NET_ADMIN)\n",
             asked.socket_buffer_bytes, got.receive_bytes, got.send_bytes);
}

std::unique_ptr<EndpointEngine> open_udp(const dp::NetAddr& local,
                                         const engine::EngineConfig& engine_cfg,
                                         std::string& error) {
  const dp::UdpConfig config = udp_config(local);
  auto datapath = dp::UdpDatapath::open(config, error);
  if (!datapath) return nullptr;
  warn_if_buffers_short(*datapath, config);
  return std::make_unique<EngineOver<dp::UdpDatapath>>(std::move(datapath), engine_cfg);
}

std::unique_ptr<EndpointEngine> open_dpdk(const dp::NetAddr& local,
                                          const engine::EngineConfig& engine_cfg,
                                          std::string& error) {
  const Params& p = params();
  dp::DpdkConfig c;
  c.eal_args = p.dpdk_args;
  c.port = p.dpdk_port;
  c.address = dp::ip_to_string(local);
  c.udp_port = local.port ? local.port : c.udp_port;
  c.entropy_ports = static_cast<uint16_t>(p.entropy_ports);
  c.mtu_bytes = datagram_bytes(c.address);
  std::istringstream entries(p.dpdk_neighbours);
  for (std::string entry; std::getline(entries, entry, ',');) {
    if (!entry.empty()) c.neighbours.push_back(entry);
  }
  // Sends in the first 2 s wait for the link (a memif client's comes up once it has
  // connected), so that a DGRAM application's first datagram is not lost.
  c.first_link_wait = Duration::seconds(2);
  auto datapath = dp::DpdkDatapath::open(c, error);
  if (!datapath) return nullptr;
  return std::make_unique<EngineOver<dp::DpdkDatapath>>(std::move(datapath), engine_cfg);
}

// Shared memory names endpoints like UDP does (address and port), so the address vector
// and fi_getname are the same; every peer must be on this host.
std::unique_ptr<EndpointEngine> open_shm(const dp::NetAddr& local,
                                         const engine::EngineConfig& engine_cfg,
                                         std::string& error) {
  dp::ShmConfig c;
  c.address = dp::ip_to_string(local);
  c.port = local.port;
  c.mtu_bytes = datagram_bytes(c.address);
  auto datapath = dp::ShmDatapath::open(c, error);
  if (!datapath) return nullptr;
  return std::make_unique<EngineOver<dp::ShmDatapath>>(std::move(datapath), engine_cfg);
}

// An RDMA NIC's UD queue pair; the endpoint's name is the port's GID and the QP number,
// known once the QP exists (an FI_ADDR_IB_UD src_addr cannot choose them).
std::unique_ptr<EndpointEngine> open_verbs(const engine::EngineConfig& engine_cfg,
                                           std::string& error) {
  auto datapath = dp::VerbsDatapath::open(verbs_config(), error);
  if (!datapath) return nullptr;
  return std::make_unique<EngineOver<dp::VerbsDatapath>>(std::move(datapath), engine_cfg);
}

// A socket whose every packet goes through spray-fabric (FI_SPRAY_FABRIC).
std::unique_ptr<EndpointEngine> open_fabric(const dp::NetAddr& local,
                                            const engine::EngineConfig& engine_cfg,
                                            std::string& error) {
  dp::FabricDatapathConfig c;
  c.fabric = params().fabric;
  c.address = dp::ip_to_string(local);
  c.port = local.port;
  c.mtu_bytes = datagram_bytes(c.address);
  c.socket_buffer_bytes = static_cast<uint32_t>(std::clamp(params().socket_buffer, 4096, 1 << 30));
  auto datapath = dp::FabricDatapath::open(c, error);
  if (!datapath) return nullptr;
  return std::make_unique<EngineOver<dp::FabricDatapath>>(std::move(datapath), engine_cfg);
}

// UDP with shared memory to the peers of this host (the UDP endpoint's MTU for both).
std::unique_ptr<EndpointEngine> open_auto(const dp::NetAddr& local,
                                          const engine::EngineConfig& engine_cfg,
                                          std::string& error) {
  const dp::UdpConfig config = udp_config(local);
  auto datapath = dp::AutoDatapath::open(config, dp::ShmConfig{}, error);
  if (!datapath) return nullptr;
  warn_if_buffers_short(datapath->udp(), config);
  return std::make_unique<EngineOver<dp::AutoDatapath>>(std::move(datapath), engine_cfg);
}

}  // namespace

std::unique_ptr<EndpointEngine> open_endpoint_engine(const fi_info* info, uint32_t job_id,
                                                     const std::optional<tss::TssConfig>& security,
                                                     std::string& error) {
  engine::EngineConfig engine_cfg = engine_config(info->caps, job_id);
  engine_cfg.security = security;
  auto open = [&]() -> std::unique_ptr<EndpointEngine> {
    if (params().datapath == "verbs") return open_verbs(engine_cfg, error);
    dp::NetAddr local;
    if (!local_address(info, local, error)) return nullptr;
    if (params().datapath == "dpdk") return open_dpdk(local, engine_cfg, error);
    if (params().datapath == "shm") return open_shm(local, engine_cfg, error);
    if (params().datapath == "auto") return open_auto(local, engine_cfg, error);
    if (params().datapath == "fabric") return open_fabric(local, engine_cfg, error);
    return open_udp(local, engine_cfg, error);
  };
  std::unique_ptr<EndpointEngine> engine = open();
  if (engine_cfg.security) tss::wipe(engine_cfg.security->domain_key);  // the engine has its own
  return engine;
}

}  // namespace spray::fi
