// DpdkDatapath fast path: mbufs in, mbufs out, framing in place.
#include <poll.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_random.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "transport/datapath/dpdk/dpdk_datapath.h"
#include "transport/datapath/dpdk/ethernet_frame.h"

namespace spray::dp {
namespace {

constexpr size_t kMaxBurst = 64;

// Each mbuf's private area, right behind the rte_mbuf, holds its PacketBuf.
PacketBuf* packet_of(rte_mbuf* m) {
  return static_cast<PacketBuf*>(rte_mbuf_to_priv(m));
}
rte_mbuf* mbuf_of(PacketBuf* b) {
  return reinterpret_cast<rte_mbuf*>(reinterpret_cast<uint8_t*>(b) - sizeof(rte_mbuf));
}

uint32_t ipv4_of(const NetAddr& a) {
  return (uint32_t{a.ip[0]} << 24) | (uint32_t{a.ip[1]} << 16) | (uint32_t{a.ip[2]} << 8) | a.ip[3];
}

// A peer's address as the neighbour table keys it.
IpBytes table_key(const NetAddr& a) {
  return a.family == NetAddr::Family::kIpv6 ? a.ip : ipv4_mapped(ipv4_of(a));
}

}  // namespace

size_t DpdkDatapath::alloc(PacketBuf** bufs, size_t n) {
  size_t i = 0;
  for (; i < n; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (!m) break;
    PacketBuf* b = new (packet_of(m)) PacketBuf{};
    b->data = rte_pktmbuf_mtod(m, uint8_t*) + header_bytes_;
    b->capacity = cfg_.mtu_bytes;
    bufs[i] = b;
  }
  return i;
}

void DpdkDatapath::free(PacketBuf** bufs, size_t n) {
  std::array<rte_mbuf*, kMaxBurst> mbufs;
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(n - done, kMaxBurst);
    for (size_t i = 0; i < count; ++i) mbufs[i] = mbuf_of(bufs[done + i]);
    rte_pktmbuf_free_bulk(mbufs.data(), static_cast<unsigned>(count));
    done += count;
  }
}

size_t DpdkDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  std::array<rte_mbuf*, kMaxBurst> mbufs;
  const auto got =
      rte_eth_rx_burst(port_id_, 0, mbufs.data(), static_cast<uint16_t>(std::min(n, kMaxBurst)));
  size_t kept = 0;
  for (uint16_t i = 0; i < got; ++i) {
    if (PacketBuf* b = accept(mbufs[i])) bufs[kept++] = b;
  }
  stats_.rx_packets += kept;
  if (mld_report_due_ != 0) [[unlikely]]
    send_due_mld_report();
  return kept;
}

PacketBuf* DpdkDatapath::accept(rte_mbuf* m) {
  if (m->nb_segs != 1) {  // frames never exceed one mbuf at our MTU
    ++stats_.rx_malformed;
    rte_pktmbuf_free(m);
    return nullptr;
  }
  FrameFilter us{mac_, ipv4_, cfg_.udp_port, false, false, ipv6_, ip_};
  const uint64_t ip_ok = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  const uint64_t l4_ok = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  us.ip_checksum_checked = ip_ok == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  us.udp_checksum_checked = l4_ok == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  ParsedFrame p = parse_frame(frame, m->data_len, us);
  if (ip_ok == RTE_MBUF_F_RX_IP_CKSUM_BAD || l4_ok == RTE_MBUF_F_RX_L4_CKSUM_BAD)
    p.kind = FrameKind::kBadChecksum;
  switch (p.kind) {
    case FrameKind::kUdpForUs:
      break;
    case FrameKind::kArp:
      handle_arp(m);
      return nullptr;
    case FrameKind::kNeighbourDiscovery:
      handle_neighbour_discovery(m);
      return nullptr;
    case FrameKind::kMldQuery:
      handle_mld_query(m);
      return nullptr;
    case FrameKind::kNotForUs:
      ++stats_.rx_not_for_us;
      rte_pktmbuf_free(m);
      return nullptr;
    case FrameKind::kMalformed:
      ++stats_.rx_malformed;
      rte_pktmbuf_free(m);
      return nullptr;
    case FrameKind::kBadChecksum:
      ++stats_.rx_bad_checksum;
      rte_pktmbuf_free(m);
      return nullptr;
  }
  // Zero copy: the engine reads the UET packet where the NIC put it.
  PacketBuf* b = new (packet_of(m)) PacketBuf{};
  b->data = frame + p.payload_offset;
  b->len = p.payload_bytes;
  b->capacity = p.payload_bytes;
  const SourcePort source = split_source_port(p.src_port, cfg_.entropy_ports);
  b->peer.port = source.base;
  if (ipv6_) {
    b->peer.family = NetAddr::Family::kIpv6;
    b->peer.ip = source_ip6(frame, p);
  } else {
    b->peer.family = NetAddr::Family::kIpv4;
    b->peer.ip = {static_cast<uint8_t>(p.src_ip >> 24), static_cast<uint8_t>(p.src_ip >> 16),
                  static_cast<uint8_t>(p.src_ip >> 8), static_cast<uint8_t>(p.src_ip)};
  }
  b->entropy = source.entropy;
  if (p.ecn_ce) {
    b->flags |= PacketBuf::kEcnCe;
    ++stats_.rx_ecn_ce;
  }
  return b;
}

DpdkDatapath::Framed DpdkDatapath::frame(PacketBuf* b, rte_mbuf* m) {
  const auto family = ipv6_ ? NetAddr::Family::kIpv6 : NetAddr::Family::kIpv4;
  if (b->peer.family != family || b->len > cfg_.mtu_bytes) {
    ++stats_.tx_bad_address;
    return Framed::kUnsendable;
  }
  const IpBytes dst_ip = table_key(b->peer);
  const MacAddress* dst_mac = neighbours_.find(dst_ip);
  if (!dst_mac) {
    ++stats_.tx_no_neighbour;
    resolve(dst_ip);
    hold(m, dst_ip);
    return Framed::kHeld;
  }
  const auto src_port = static_cast<uint16_t>(cfg_.udp_port + b->entropy % cfg_.entropy_ports);
  const Checksums checksums =
      tx_checksum_offload_ ? Checksums::kOffloadToDevice : Checksums::kSoftware;
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  if (ipv6_) {
    write_udp6_frame(frame, {mac_, *dst_mac, ip_, dst_ip, src_port, b->peer.port}, b->len,
                     checksums);
  } else {
    write_udp_frame(frame, {mac_, *dst_mac, ipv4_, ipv4_of(b->peer), src_port, b->peer.port},
                    b->len, checksums);
  }
  m->data_len = static_cast<uint16_t>(header_bytes_ + b->len);
  m->pkt_len = m->data_len;
  if (tx_checksum_offload_) {
    m->l2_len = kEthernetHeaderBytes;
    m->l3_len = ipv6_ ? kIpv6HeaderBytes : kIpv4HeaderBytes;
    m->ol_flags = ipv6_ ? RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_UDP_CKSUM
                        : RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
  }
  return Framed::kReady;
}

void DpdkDatapath::hold(rte_mbuf* m, const IpBytes& target) {
  if (held_.size() == kMaxHeldPackets) {
    rte_pktmbuf_free(held_.front().m);
    held_.erase(held_.begin());
    ++stats_.tx_held_dropped;
  }
  held_.push_back({m, target, rte_get_tsc_cycles()});
}

void DpdkDatapath::release_held(const IpBytes& target) {
  std::erase_if(held_, [&](const HeldPacket& h) {
    if (h.target != target) return false;
    rte_mbuf* m = h.m;
    if (frame(packet_of(m), m) == Framed::kReady && rte_eth_tx_burst(port_id_, 0, &m, 1) == 1) {
      ++stats_.tx_packets;
    } else {
      ++stats_.tx_dropped;  // the TX queue was full (the MAC is known: framing succeeds)
      rte_pktmbuf_free(m);
    }
    return true;
  });
}

void DpdkDatapath::expire_held() {
  const uint64_t now = rte_get_tsc_cycles();
  while (!held_.empty() && now - held_.front().held_at > hold_limit_cycles_) {
    rte_pktmbuf_free(held_.front().m);
    held_.erase(held_.begin());
    ++stats_.tx_held_dropped;
  }
}

void DpdkDatapath::await_first_link() {
  if (!link_up_by(first_link_deadline_)) stats_.link_wait_expired = 1;
  awaiting_first_link_ = false;
}

size_t DpdkDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  if (awaiting_first_link_) [[unlikely]]
    await_first_link();
  if (!held_.empty()) [[unlikely]]
    expire_held();
  std::array<rte_mbuf*, kMaxBurst> mbufs;
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(n - done, kMaxBurst);
    uint16_t ready = 0;
    for (size_t i = 0; i < count; ++i) {
      rte_mbuf* m = mbuf_of(bufs[done + i]);
      switch (frame(bufs[done + i], m)) {
        case Framed::kReady:
          mbufs[ready++] = m;
          break;
        case Framed::kHeld:
          break;
        case Framed::kUnsendable:
          rte_pktmbuf_free(m);
          break;
      }
    }
    const uint16_t sent = rte_eth_tx_burst(port_id_, 0, mbufs.data(), ready);
    stats_.tx_packets += sent;
    if (sent < ready) {
      // A full TX ring drops, as a NIC would; PDS recovers the packets.
      stats_.tx_dropped += ready - sent;
      rte_pktmbuf_free_bulk(&mbufs[sent], ready - sent);
    }
    done += count;
  }
  return n;
}

void DpdkDatapath::send_now(rte_mbuf* m) {
  if (rte_eth_tx_burst(port_id_, 0, &m, 1) != 1) rte_pktmbuf_free(m);
}

bool DpdkDatapath::send_frame(const uint8_t* frame, uint32_t length) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) return false;
  if (length > rte_pktmbuf_tailroom(m)) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(length)), frame, length);
  if (rte_eth_tx_burst(port_id_, 0, &m, 1) == 1) return true;
  rte_pktmbuf_free(m);
  return false;
}

void DpdkDatapath::handle_arp(rte_mbuf* m) {
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  ArpMessage arp;
  if (!parse_arp(frame, m->data_len, arp)) {
    ++stats_.rx_malformed;
    rte_pktmbuf_free(m);
    return;
  }
  if (arp.target_ip != ipv4_ || arp.sender_ip == 0) {
    ++stats_.rx_not_for_us;
    rte_pktmbuf_free(m);
    return;
  }
  learn(ipv4_mapped(arp.sender_ip), arp.sender_mac);
  if (!arp.is_request) {
    rte_pktmbuf_free(m);
    return;
  }
  write_arp_reply(frame, mac_, ipv4_, arp.sender_mac, arp.sender_ip);
  m->data_len = kArpFrameBytes;
  m->pkt_len = kArpFrameBytes;
  m->ol_flags = 0;
  ++stats_.arp_replies_sent;
  send_now(m);
}

void DpdkDatapath::handle_neighbour_discovery(rte_mbuf* m) {
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  NeighbourMessage nd;
  if (!parse_neighbour_discovery(frame, m->data_len, nd)) {
    ++stats_.rx_malformed;
    rte_pktmbuf_free(m);
    return;
  }
  if (!nd.is_solicitation) {
    // Learnt only when asked about or known: otherwise anyone on the link could fill the
    // table, or redirect our traffic to a peer we have never sent to. A known MAC is
    // replaced only by an advertisement with the override flag (RFC 4861, 7.2.5): one
    // without it (a proxy's, an anycast address's) fills in only what is being resolved.
    const MacAddress* known = neighbours_.find(nd.target_ip);
    const bool wanted =
        asked_about(nd.target_ip) || (known && (nd.override_cached || *known == nd.link_mac));
    if (nd.has_link_mac && wanted) {
      learn(nd.target_ip, nd.link_mac);
    } else {
      ++stats_.nd_advertisements_ignored;
    }
    rte_pktmbuf_free(m);
    return;
  }
  // A solicitation from the unspecified address is another node's duplicate address
  // detection, which we do not take part in.
  if (nd.target_ip != ip_ || nd.source_ip == IpBytes{}) {
    ++stats_.rx_not_for_us;
    rte_pktmbuf_free(m);
    return;
  }
  // Its link-layer option is the asker's MAC; without one (a unicast solicitation that
  // checks a cached entry) the frame's source is.
  MacAddress asker{};
  std::memcpy(asker.data(), frame + 6, asker.size());
  if (nd.has_link_mac) {
    asker = nd.link_mac;
    learn(nd.source_ip, asker);
  }
  write_neighbour_advertisement(frame, mac_, ip_, asker, nd.source_ip);
  m->data_len = kNeighbourFrameBytes;
  m->pkt_len = kNeighbourFrameBytes;
  m->ol_flags = 0;
  ++stats_.nd_advertisements_sent;
  send_now(m);
}

void DpdkDatapath::handle_mld_query(rte_mbuf* m) {
  MldQuery query;
  const bool valid = parse_mld_query(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, query);
  rte_pktmbuf_free(m);
  if (!valid) {
    ++stats_.rx_not_for_us;  // RFC 3810: what fails the checks is ignored
    return;
  }
  ++stats_.mld_queries_received;
  if (query.group != IpBytes{} && query.group != solicited_node_group(ip_)) return;
  mld_version_ = query.version;
  // A random delay within the query's bound, so that listeners do not answer at once.
  const uint64_t bound = rte_get_tsc_hz() / 1000 * query.max_response_ms;
  const uint64_t due = rte_get_tsc_cycles() + (bound > 0 ? rte_rand_max(bound) : 0);
  if (mld_report_due_ == 0 || due < mld_report_due_) mld_report_due_ = due;
}

void DpdkDatapath::send_due_mld_report() {
  const uint64_t now = rte_get_tsc_cycles();
  if (now < mld_report_due_) return;
  if (!link_up()) {  // a memif link comes up only once its peer connects
    mld_report_due_ = now + rte_get_tsc_hz() / 100;
    return;
  }
  const bool joining = mld_unsolicited_left_ > 0;
  send_mld_report(joining ? MldRecord::kChangeToExclude : MldRecord::kModeIsExclude);
  if (joining) --mld_unsolicited_left_;
  mld_report_due_ = mld_unsolicited_left_ > 0 ? now + rte_get_tsc_hz() : 0;  // a second on
}

void DpdkDatapath::send_mld_report(MldRecord record) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) return;
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  const IpBytes group = solicited_node_group(ip_);
  if (mld_version_ == 1) {
    if (record == MldRecord::kChangeToInclude) {
      write_mldv1_done(frame, mac_, group);
    } else {
      write_mldv1_report(frame, mac_, group);
    }
    m->data_len = kMldv1FrameBytes;
    ++stats_.mldv1_reports_sent;
  } else {
    write_mldv2_report(frame, mac_, group, record);
    m->data_len = kMldv2ReportFrameBytes;
  }
  m->pkt_len = m->data_len;
  m->ol_flags = 0;
  ++stats_.mld_reports_sent;
  send_now(m);
}

bool DpdkDatapath::asked_about(const IpBytes& target) const {
  return std::any_of(resolving_.begin(), resolving_.end(),
                     [&](const auto& p) { return p.first == target; });
}

void DpdkDatapath::learn(const IpBytes& ip, const MacAddress& mac) {
  neighbours_.set(ip, mac);
  std::erase_if(resolving_, [&](const auto& p) { return p.first == ip; });
  release_held(ip);
}

void DpdkDatapath::resolve(const IpBytes& target) {
  const uint64_t now = rte_get_tsc_cycles();
  auto it = std::find_if(resolving_.begin(), resolving_.end(),
                         [&](const auto& p) { return p.first == target; });
  if (it != resolving_.end()) {
    if (now - it->second < resolve_holdoff_cycles_) return;
    it->second = now;
  } else {
    if (resolving_.size() == kMaxPendingResolutions) resolving_.erase(resolving_.begin());
    resolving_.emplace_back(target, now);
  }
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (!m) return;
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  if (ipv6_) {
    write_neighbour_solicitation(frame, mac_, ip_, target);
    m->data_len = kNeighbourFrameBytes;
    ++stats_.nd_solicitations_sent;
  } else {
    write_arp_request(frame, mac_, ipv4_, ipv4_from_mapped(target));
    m->data_len = kArpFrameBytes;
    ++stats_.arp_requests_sent;
  }
  m->pkt_len = m->data_len;
  send_now(m);
}

bool DpdkDatapath::wait(Duration timeout) {
  const auto us = std::max<int64_t>(timeout.ps / 1'000'000, 1);
  if (!rx_interrupts_) {
    // No RX interrupt on this PMD: sleep in slices short enough to keep latency sane.
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<int64_t>(us, 100)));
    return false;
  }
  // A packet that lands between the caller's last rx_burst and the enable below does
  // not raise the event; the timeout (the caller's timer tick) bounds that delay.
  rte_eth_dev_rx_intr_enable(port_id_, 0);
  pollfd p{rx_interrupt_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>((us + 999) / 1000));
  if (ready > 0) {
    uint64_t events = 0;
    [[maybe_unused]] const auto r = ::read(rx_interrupt_fd_, &events, sizeof(events));
  }
  rte_eth_dev_rx_intr_disable(port_id_, 0);
  return ready > 0;
}

}  // namespace spray::dp
