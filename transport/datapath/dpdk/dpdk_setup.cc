// DpdkDatapath setup: EAL, port, queues, mempool, offloads, neighbours.
#include <fmt/format.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "transport/datapath/dpdk/dpdk_datapath.h"
#include "transport/datapath/dpdk/dpdk_eal.h"
#include "transport/datapath/dpdk/ethernet_frame.h"

namespace spray::dp {
namespace {

// The most UET bytes a jumbo frame carries over each IP version.
constexpr uint32_t max_uet_bytes(bool ipv6) {
  return kMaxIpMtu - ip_udp_header_bytes(ipv6);
}

// Ports driven by a DpdkDatapath in this process: one engine per port (one queue pair).
std::mutex ports_mutex;
std::set<uint16_t> ports_in_use;

std::string port_names() {
  std::string names;
  for (uint16_t id = 0; id < RTE_MAX_ETHPORTS; ++id) {
    if (!rte_eth_dev_is_valid_port(id)) continue;
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(id, name);
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  }
  return names.empty() ? "none" : names;
}

bool is_memif(const rte_eth_dev_info& info) {
  return info.driver_name != nullptr && std::string_view(info.driver_name) == "net_memif";
}

// DPDK 22.11's net_memif mangles a frame longer than one of its ring buffers: the chained
// buffers arrive as frames of the wrong lengths (seen here: 9014-byte frames over 2048-byte
// buffers came in as 9258-, 6914- and 2048-byte ones, which we drop as malformed, and the
// transfer failed). So a frame must fit one buffer, the `bsize` in the port's --vdev
// arguments (2048 when absent). Empty when the port is not memif or the frame fits.
std::string memif_frame_problem(const rte_eth_dev_info& info, uint32_t frame_bytes,
                                uint32_t header_bytes) {
  if (!is_memif(info)) return {};
  unsigned long buffer_bytes = 2048;
  const rte_devargs* args = info.device ? rte_dev_devargs(info.device) : nullptr;
  if (args && args->args) {
    if (rte_kvargs* kv = rte_kvargs_parse(args->args, nullptr)) {
      if (const char* bsize = rte_kvargs_get(kv, "bsize"))
        buffer_bytes = std::strtoul(bsize, nullptr, 0);
      rte_kvargs_free(kv);
    }
  }
  if (frame_bytes <= buffer_bytes) return {};
  return fmt::format(
      "net_memif buffers of {} bytes cannot hold a {}-byte frame (MTU {} + {} bytes of headers); "
      "give the port bsize={} or more in its --vdev, or a smaller MTU",
      buffer_bytes, frame_bytes, frame_bytes - header_bytes, header_bytes, frame_bytes);
}

bool find_port(const std::string& name, uint16_t& port_id, std::string& error) {
  if (!name.empty()) {
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) return true;
    error = fmt::format("no DPDK port named '{}' (ports: {}); add it with --vdev or bind a NIC",
                        name, port_names());
    return false;
  }
  if (rte_eth_dev_count_avail() != 1) {
    error = fmt::format(
        "{} DPDK ports available ({}): name one (FI_SPRAY_DPDK_PORT), or create one with "
        "--vdev in the EAL parameters",
        rte_eth_dev_count_avail(), port_names());
    return false;
  }
  for (port_id = 0; !rte_eth_dev_is_valid_port(port_id); ++port_id) {
  }
  return true;
}

bool validate(const DpdkConfig& c, bool ipv6, std::string& error) {
  const uint16_t ev = c.entropy_ports;
  if (ev == 0 || ev > 64 || (ev & (ev - 1)) != 0) {
    error = fmt::format("entropy_ports must be a power of two <= 64, got {}", ev);
  } else if (c.udp_port == 0 || c.udp_port % ev != 0) {
    error = fmt::format("UDP base port {} must be non-zero and a multiple of entropy_ports {}",
                        c.udp_port, ev);
  } else if (c.mtu_bytes < 256 || c.mtu_bytes > max_uet_bytes(ipv6)) {
    error = fmt::format("mtu_bytes {} is outside 256..{}", c.mtu_bytes, max_uet_bytes(ipv6));
  } else if (c.mbufs < 2 * (c.rx_descriptors + c.tx_descriptors)) {
    error = fmt::format("{} mbufs cannot fill {} RX and {} TX descriptors", c.mbufs,
                        c.rx_descriptors, c.tx_descriptors);
  } else {
    return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<DpdkDatapath> DpdkDatapath::open(const DpdkConfig& c, std::string& error) {
  const auto ip = parse_ip_bytes(c.address);
  if (!ip) {
    error = fmt::format("DPDK datapath needs a local IPv4 or IPv6 address, got '{}'", c.address);
    return nullptr;
  }
  const bool ipv6 = !is_ipv4_mapped(*ip);
  if (ipv6 && (*ip == IpBytes{} || (*ip)[0] == 0xff)) {
    error = fmt::format("DPDK datapath needs a unicast address, got '{}'", c.address);
    return nullptr;
  }
  const uint32_t header_bytes = frame_header_bytes(ipv6);
  if (!validate(c, ipv6, error) || !ensure_dpdk_eal(c.eal_args, error)) return nullptr;
  uint16_t port = 0;
  if (!find_port(c.port, port, error)) return nullptr;
  {
    std::lock_guard lock(ports_mutex);
    if (!ports_in_use.insert(port).second) {
      error = fmt::format("DPDK port {} is already driven by another engine in this process", port);
      return nullptr;
    }
  }
  auto fail = [&](std::string message, rte_mempool* pool) -> std::unique_ptr<DpdkDatapath> {
    error = std::move(message);
    rte_eth_dev_stop(port);
    if (pool) rte_mempool_free(pool);
    std::lock_guard lock(ports_mutex);
    ports_in_use.erase(port);
    return nullptr;
  };

  rte_eth_dev_info info{};
  if (const int rc = rte_eth_dev_info_get(port, &info); rc != 0)
    return fail(fmt::format("cannot query DPDK port {}: {}", port, rte_strerror(-rc)), nullptr);
  if (std::string why = memif_frame_problem(info, header_bytes + c.mtu_bytes, header_bytes);
      !why.empty())
    return fail(fmt::format("port {}: {}", port, why), nullptr);

  // The mbuf's private area holds its PacketBuf; the data room holds the whole frame.
  static std::atomic<uint32_t> pool_serial{0};
  const auto priv = static_cast<uint16_t>(RTE_ALIGN(sizeof(PacketBuf), RTE_MBUF_PRIV_ALIGN));
  const auto room = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + header_bytes + c.mtu_bytes);
  const std::string pool_name = fmt::format("spray{}_{}", port, pool_serial++);
  rte_mempool* pool = rte_pktmbuf_pool_create(pool_name.c_str(), c.mbufs, 256, priv,
                                              std::max<uint16_t>(room, RTE_MBUF_DEFAULT_BUF_SIZE),
                                              rte_eth_dev_socket_id(port));
  if (!pool)
    return fail(fmt::format("cannot create a pool of {} mbufs: {} (hugepages reserved? or pass "
                            "--no-huge -m MB)",
                            c.mbufs, rte_strerror(rte_errno)),
                nullptr);

  rte_eth_conf conf{};
  // IPv6 has no header checksum: only UDP's is offloaded.
  const uint64_t tx_checksums = ipv6 ? RTE_ETH_TX_OFFLOAD_UDP_CKSUM
                                     : RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
  const uint64_t rx_checksums = ipv6 ? RTE_ETH_RX_OFFLOAD_UDP_CKSUM
                                     : RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
  const bool tx_offload = (info.tx_offload_capa & tx_checksums) == tx_checksums;
  if (tx_offload) conf.txmode.offloads = tx_checksums;
  if ((info.rx_offload_capa & rx_checksums) == rx_checksums) conf.rxmode.offloads = rx_checksums;
  // Ask for RX interrupts (for wait()); PMDs without them refuse, and we poll instead.
  conf.intr_conf.rxq = 1;
  bool interrupts = rte_eth_dev_configure(port, 1, 1, &conf) == 0;
  if (!interrupts) {
    conf.intr_conf.rxq = 0;
    if (const int rc = rte_eth_dev_configure(port, 1, 1, &conf); rc != 0)
      return fail(fmt::format("cannot configure DPDK port {}: {}", port, rte_strerror(-rc)), pool);
  }
  uint16_t rx_desc = c.rx_descriptors, tx_desc = c.tx_descriptors;
  rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc);
  const auto socket = static_cast<unsigned>(rte_eth_dev_socket_id(port));
  if (const int rc = rte_eth_rx_queue_setup(port, 0, rx_desc, socket, nullptr, pool); rc != 0)
    return fail(fmt::format("cannot set up RX queue on port {}: {}", port, rte_strerror(-rc)),
                pool);
  if (const int rc = rte_eth_tx_queue_setup(port, 0, tx_desc, socket, nullptr); rc != 0)
    return fail(fmt::format("cannot set up TX queue on port {}: {}", port, rte_strerror(-rc)),
                pool);
  const uint32_t frame_mtu = c.mtu_bytes + header_bytes - kEthernetHeaderBytes;
  // The port's MTU must hold our packets: ours is asked for when the port's is smaller (a
  // larger one is left as it is). A PMD with no MTU to set (-ENOTSUP: net_memif, whose
  // frames are bounded by its buffers instead, see memif_frame_problem) is taken as it is.
  // DPDK 22.11's net_af_packet reports a largest frame of 1518 bytes, so ethdev refuses it
  // any MTU above 1500, whatever its kernel interface's: the reason goes to the user.
  uint16_t port_mtu = 0;
  const bool mtu_known = rte_eth_dev_get_mtu(port, &port_mtu) == 0;
  if (mtu_known ? port_mtu < frame_mtu : frame_mtu > RTE_ETHER_MTU) {
    if (const int rc = rte_eth_dev_set_mtu(port, static_cast<uint16_t>(frame_mtu));
        rc != 0 && rc != -ENOTSUP)
      return fail(
          fmt::format("port {} does not accept an IP MTU of {} (MTU {} + {} bytes of {} and UDP): "
                      "{}; its MTU is {}, its largest frame {} bytes",
                      port, frame_mtu, c.mtu_bytes, header_bytes - kEthernetHeaderBytes,
                      ipv6 ? "IPv6" : "IPv4", rte_strerror(-rc), port_mtu, info.max_rx_pktlen),
          pool);
  }
  // The kernel's neighbours are read before the port starts: read after it, a permanent
  // IPv6 entry on the kernel interface that a net_af_packet port drives was gone (seen
  // on a veth, 2026-12-06), whatever in the port's start removed it.
  NeighbourTable kernel_neighbours;
  if (c.kernel_neighbours) {
    if (ipv6) {
      kernel_neighbours.load_kernel_ipv6_table();
    } else {
      kernel_neighbours.load_kernel_table();
    }
  }
  if (const int rc = rte_eth_dev_start(port); rc != 0)
    return fail(fmt::format("cannot start DPDK port {}: {}", port, rte_strerror(-rc)), pool);
  // Neighbour solicitations for our address arrive on its solicited-node multicast group:
  // a NIC that filters multicast must let them in. (The virtual ports tested here, memif,
  // af_packet and af_xdp on a veth, pass every frame, whatever this call returns.)
  if (ipv6) rte_eth_allmulticast_enable(port);

  rte_ether_addr mac{};
  rte_eth_macaddr_get(port, &mac);
  MacAddress our_mac{};
  std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), our_mac.begin());
  std::unique_ptr<DpdkDatapath> d(new DpdkDatapath(c, port, pool, our_mac, *ip));
  d->tx_checksum_offload_ = tx_offload;
  d->leave_report_on_close_ = !is_memif(info);
  // A PMD may accept the configuration yet have no per-queue interrupt (memif here):
  // enabling tells, before asking for the event fd.
  if (interrupts && rte_eth_dev_rx_intr_enable(port, 0) == 0) {
    d->rx_interrupt_fd_ = rte_eth_dev_rx_intr_ctl_q_get_fd(port, 0);
    d->rx_interrupts_ = d->rx_interrupt_fd_ >= 0;
    rte_eth_dev_rx_intr_disable(port, 0);
  }
  d->neighbours_ = std::move(kernel_neighbours);  // then configuration, which overrides it
  for (const auto& entry : c.neighbours) {
    if (!d->neighbours_.add_from_text(entry, error)) return nullptr;  // dtor releases the port
  }
  return d;
}

DpdkDatapath::DpdkDatapath(const DpdkConfig& config, uint16_t port_id, rte_mempool* pool,
                           MacAddress mac, const IpBytes& ip)
    : cfg_(config),
      port_id_(port_id),
      pool_(pool),
      mac_(mac),
      ipv6_(!is_ipv4_mapped(ip)),
      ip_(ip),
      header_bytes_(frame_header_bytes(ipv6_)) {
  local_.port = config.udp_port;
  if (ipv6_) {
    local_.family = NetAddr::Family::kIpv6;
    local_.ip = ip;
  } else {
    local_.family = NetAddr::Family::kIpv4;
    std::copy(ip.begin() + 12, ip.end(), local_.ip.begin());
    ipv4_ = ipv4_from_mapped(ip);
  }
  resolve_holdoff_cycles_ = rte_get_tsc_hz() / 1000;
  awaiting_first_link_ = config.first_link_wait.ps > 0;
  first_link_deadline_ =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(config.first_link_wait.ps / 1000);
  resolving_.reserve(kMaxPendingResolutions);
  held_.reserve(kMaxHeldPackets);
  hold_limit_cycles_ = rte_get_tsc_hz();  // a second
  if (ipv6_) {  // join our solicited-node group on the first poll (and once more, a second on)
    mld_unsolicited_left_ = kMldUnsolicitedReports;
    mld_report_due_ = rte_get_tsc_cycles();
  }
}

bool DpdkDatapath::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

bool DpdkDatapath::link_up_by(std::chrono::steady_clock::time_point deadline) const {
  while (!link_up() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return link_up();
}

bool DpdkDatapath::await_link(Duration timeout) {
  link_up_by(std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout.ps / 1000));
  std::array<PacketBuf*, 32> received{};
  free(received.data(), rx_burst(received.data(), received.size()));
  return link_up();
}

DpdkDatapath::~DpdkDatapath() {
  if (ipv6_ && leave_report_on_close_ && link_up()) {
    send_mld_report(MldRecord::kChangeToInclude);  // leave our group
  }
  // Stopped, not closed: a closed virtual device cannot be found by name again, and a
  // later engine in this process may want the port.
  rte_eth_dev_stop(port_id_);
  await_dpdk_interrupt_thread();
  for (const HeldPacket& h : held_) rte_pktmbuf_free(h.m);
  rte_mempool_free(pool_);
  std::lock_guard lock(ports_mutex);
  ports_in_use.erase(port_id_);
}

}  // namespace spray::dp
