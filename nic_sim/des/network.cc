#include "nic_sim/des/network.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace spray::des {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: a cheap, well-spread hash
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

Network::Network(const Topology& topology, const NetworkConfig& config, std::vector<Flow> flows)
    : topo_(topology), cfg_(config), flows_(std::move(flows)), rng_(config.seed) {
  ports_.resize(topo_.links().size());
  hosts_.resize(topo_.hosts());
  pds::PdsConfig pc = cfg_.pds;
  pc.cc.mtu_bytes = cfg_.mtu_bytes;
  pc.cc.line_rate_gbps = topo_.host_gbps();
  // Base RTT: the longest unloaded path (host 0 to the last host) out, an ACK back.
  if (topo_.hosts() > 1) {
    pc.cc.base_rtt = topo_.unloaded_latency(0, topo_.hosts() - 1, cfg_.mtu_bytes) +
                     topo_.unloaded_latency(topo_.hosts() - 1, 0, kHeaderBytes);
  }
  const auto rtts = [&](double n) {
    return Duration{static_cast<int64_t>(static_cast<double>(pc.cc.base_rtt.ps) * n)};
  };
  pc.reorder_window = rtts(cfg_.reorder_window_rtts);
  pc.min_rto = rtts(cfg_.min_rto_rtts);
  // Thousands of engines: each gets PDCs for the peers its flows involve (plus slack)
  // and small fixed structures, so memory follows the traffic, not the host count.
  std::vector<std::vector<uint32_t>> peers(hosts_.size());
  for (const Flow& f : flows_) {
    peers[f.src].push_back(f.dst);
    peers[f.dst].push_back(f.src);
  }
  std::vector<uint32_t> sends(hosts_.size()), receives(hosts_.size());
  uint64_t largest_flow = 0;
  for (const Flow& f : flows_) {
    ++sends[f.src];
    ++receives[f.dst];
    largest_flow = std::max(largest_flow, f.bytes);
  }
  pc.timer_slots = 256;
  pc.control_reserve = 16;
  pc.report_reserve = 64;
  ses::SesConfig sc;
  sc.mtu_bytes = cfg_.mtu_bytes;
  sc.rendezvous_threshold_bytes = UINT64_MAX;  // every receive is posted first: all eager
  sc.max_memory_regions = 1;
  sc.completion_queue_entries = 4;  // drained after every event
  for (uint32_t h = 0; h < hosts_.size(); ++h) {
    Host& host = hosts_[h];
    std::vector<uint32_t>& p = peers[h];
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    host.peers.assign(p.begin(), p.end());  // exact size
    std::vector<uint32_t>().swap(p);
    const auto distinct = static_cast<uint32_t>(host.peers.size());
    const uint32_t pdcs_for_every_peer = 2 * distinct + 4;  // both roles, and spare
    pc.max_pdcs = std::min<uint32_t>(cfg_.pds.max_pdcs, pdcs_for_every_peer);
    // PDCs close only when a table smaller than the peers fills; the late-SYN guard then
    // remembers as many closes as an engine does by default. A table that holds every
    // peer closes nothing, and 256 remembered closes a host cost 8192 hosts 77 MB.
    pc.closed_pdcs_remembered = pc.max_pdcs < pdcs_for_every_peer ? 256 : 16;
    pc.seed = cfg_.seed * 1000003 + h;
    host.pds = std::make_unique<pds::Pds>(pc);
    sc.max_peers = std::max<uint32_t>(distinct, 1);
    // Every flow may be in flight at once: tables whose share outside SES's reserve
    // holds them all (+ MSG_ERR markers after a failure).
    sc.max_tx_messages = ses::Ses::table_size_for(sends[h] + 2);
    sc.max_rx_messages = ses::Ses::table_size_for(receives[h] + 1);
    sc.max_posted_receives = receives[h] + 1;
    sc.incarnation = static_cast<uint16_t>(h % 0xfffe + 1);  // not drawn: reproducible runs
    host.ses = std::make_unique<ses::Ses>(sc, *host.pds);
  }
  payload_per_packet_ = hosts_.empty() ? cfg_.mtu_bytes : hosts_[0].ses->payload_per_packet();
  payload_area_.reset(new uint8_t[std::max<uint64_t>(largest_flow, 1)]);  // untouched until written
  rx_scratch_.resize(cfg_.mtu_bytes + ses::kMaxSesHeaderBytes);
  // Every receive is posted before anything is sent, so no message arrives unexpected.
  for (uint32_t i = 0; i < flows_.size(); ++i) {
    const Flow& f = flows_[i];
    if (f.bytes == 0 || f.src == f.dst) continue;
    ses::RecvSpec r;
    r.buffer = payload_area_.get();
    r.length = f.bytes;
    r.context = i;
    r.tagged = true;
    r.tag = i;
    r.source = peer_index(f.dst, f.src);
    if (hosts_[f.dst].ses->post_recv(r) != Status::kOk) {
      throw std::logic_error("simulator: a receive could not be posted");
    }
  }
  for (uint32_t f = 0; f < flows_.size(); ++f) {
    if (flows_[f].waits_for == 0) events_.push(flows_[f].start, kFlowStart, f);
  }
}

Network::~Network() = default;

void Network::schedule(const LinkChange& change) {
  changes_.push_back(change);
  events_.push(change.at, kLinkChange, static_cast<uint32_t>(changes_.size() - 1));
}

void Network::watch_port(uint32_t port, Duration interval) {
  watched_.emplace_back(port, interval);
  events_.push(now_, kSample, static_cast<uint32_t>(watched_.size() - 1));
}

bool Network::run(Duration limit) {
  const Time end = now_ + limit;
  while (!events_.empty() && flows_done_ < flows_.size()) {
    if (events_.top_time() > end) {
      now_ = end;  // nothing before `end`: the clock moves on to it
      break;
    }
    const Event e = events_.pop();
    now_ = e.at();
    dispatch(e);
    ++stats_.events;
  }
  stats_.retransmits = stats_.timeouts = stats_.messages_received = 0;
  for (const Host& h : hosts_) {
    stats_.retransmits += h.pds->stats().retransmits;
    stats_.timeouts += h.pds->stats().timeouts;
    stats_.messages_received += h.ses->stats().messages_received;
  }
  return flows_done_ == flows_.size();
}

void Network::dispatch(const Event& e) {
  switch (e.kind) {
    case kArrive:
      arrive(e.a, e.b);
      break;
    case kTxDone: {
      Port& port = ports_[e.a];
      port.busy = false;
      const uint32_t from = topo_.link(e.a).from;
      if (from < topo_.hosts()) kick(from);  // the NIC is free: pull the next packet
      if (!port.busy) start_tx(e.a);
      break;
    }
    case kFlowStart:
      start_flow(e.a);
      break;
    case kHostTimer: {
      Host& h = hosts_[e.a];
      h.timer_pending = false;
      h.pds->on_timers(now_);
      drain_reports(e.a);
      kick(e.a);
      arm_timer(e.a);
      break;
    }
    case kAckFlush:
      hosts_[e.a].flush_pending = false;
      hosts_[e.a].pds->flush_acks();
      kick(e.a);
      break;
    case kLinkChange: {
      const LinkChange& c = changes_[e.a];
      Port& port = ports_[c.port];
      port.rate_fraction = c.rate_fraction;
      if (c.rate_fraction <= 0) {
        // Down: what waits in a NIC's queue is lost; what a switch had queued is already
        // scheduled and is dropped when it would arrive (arrive() checks the link), unless
        // the link is back up by then — a short outage loses less than a real one would.
        while (port.head != kNoPacket) {
          const uint32_t p = pop(port.head, port.tail);
          packets_.release(p);
          ++stats_.dropped_link_down;
        }
        port.queued_bytes = port.queued_packets = 0;
        port.busy_until = port.prio_busy_until = now_;
      } else if (!port.busy) {
        start_tx(c.port);
      }
      break;
    }
    case kSample: {
      const auto& [port, interval] = watched_[e.a];
      const Port& p = ports_[port];
      const double gbps = topo_.link(port).gbps * p.rate_fraction;
      samples_.push_back({now_, port,
                          p.queued_bytes + queued_bytes(p.busy_until, gbps) +
                              queued_bytes(p.prio_busy_until, gbps)});
      events_.push(now_ + interval, kSample, e.a);
      break;
    }
    default:
      break;
  }
}

void Network::push(uint32_t& head, uint32_t& tail, uint32_t packet) {
  packets_[packet].next = kNoPacket;
  if (tail == kNoPacket) {
    head = tail = packet;
  } else {
    packets_[tail].next = packet;
    tail = packet;
  }
}

uint32_t Network::pop(uint32_t& head, uint32_t& tail) {
  const uint32_t p = head;
  head = packets_[p].next;
  if (head == kNoPacket) tail = kNoPacket;
  return p;
}

void Network::enqueue(uint32_t port_index, uint32_t packet) {
  Port& port = ports_[port_index];
  SimPacket& p = packets_[packet];
  if (p.is_request() && !p.trimmed) port.last_offered = now_;
  if (port.rate_fraction <= 0) {
    packets_.release(packet);
    ++stats_.dropped_link_down;
    return;
  }
  if (topo_.link(port_index).from >= topo_.hosts()) {
    enqueue_at_switch(port_index, packet);
    return;
  }
  // A host's NIC: a FIFO the host fills one packet ahead (see kick()).
  port.queued_bytes += p.wire_bytes;
  ++port.queued_packets;
  push(port.head, port.tail, packet);
  if (!port.busy) start_tx(port_index);
}

uint32_t Network::queued_bytes(Time until, double gbps) const {
  if (until <= now_) return 0;
  return static_cast<uint32_t>(static_cast<double>((until - now_).ps) * gbps / 8000.0);
}

void Network::enqueue_at_switch(uint32_t port_index, uint32_t packet) {
  Port& port = ports_[port_index];
  SimPacket& p = packets_[packet];
  const Link& link = topo_.link(port_index);
  const double gbps = link.gbps * port.rate_fraction;
  const SwitchConfig& sw = cfg_.switches;
  // A FIFO served at line rate is fully described by when its last byte leaves: the
  // packet's departure is known the moment it is queued, so no per-packet queue and no
  // "transmission done" event are needed (half of all events otherwise).
  const uint32_t queued = queued_bytes(port.busy_until, gbps);
  if (queued + p.wire_bytes > sw.buffer_bytes) {
    // Full: trim data to its headers and send those ahead, in a priority lane of their
    // own; drop what cannot be trimmed.
    const bool trim = sw.trimming && p.is_request() && !p.trimmed;
    if ((trim || p.wire_bytes <= kHeaderBytes) &&
        queued_bytes(port.prio_busy_until, gbps) + kHeaderBytes <= sw.priority_buffer_bytes) {
      if (trim) {
        p.trimmed = true;
        p.wire_bytes = kHeaderBytes;
        ++stats_.trimmed;
      }
      port.prio_busy_until =
          std::max(now_, port.prio_busy_until) + serialization_time(p.wire_bytes, gbps);
      ++port.tx_packets;
      events_.push(port.prio_busy_until + link.propagation, kArrive, port_index, packet);
    } else {
      packets_.release(packet);
      ++stats_.dropped_full;
    }
    return;
  }
  if (queued > sw.ecn_min_bytes && !p.ecn) {
    const double span = std::max<double>(1, sw.ecn_max_bytes - sw.ecn_min_bytes);
    if (rng_.chance(std::min(1.0, (queued - sw.ecn_min_bytes) / span))) {
      p.ecn = true;
      ++stats_.ecn_marked;
    }
  }
  port.busy_until = std::max(now_, port.busy_until) + serialization_time(p.wire_bytes, gbps);
  stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, queued + p.wire_bytes);
  ++port.tx_packets;
  events_.push(port.busy_until + link.propagation, kArrive, port_index, packet);
}

void Network::start_tx(uint32_t port_index) {
  Port& port = ports_[port_index];
  if (port.rate_fraction <= 0) return;
  if (port.head == kNoPacket) return;
  const uint32_t packet = pop(port.head, port.tail);
  port.queued_bytes -= packets_[packet].wire_bytes;
  --port.queued_packets;
  const Link& link = topo_.link(port_index);
  const SimPacket& p = packets_[packet];
  const Duration wire = serialization_time(p.wire_bytes, link.gbps * port.rate_fraction);
  port.busy = true;
  ++port.tx_packets;
  events_.push(now_ + wire, kTxDone, port_index);
  events_.push(now_ + wire + link.propagation, kArrive, port_index, packet);
}

uint64_t Network::ecmp_hash(uint32_t node, const SimPacket& p) const {
  return mix((uint64_t{p.src} << 40) ^ (uint64_t{p.dst} << 16) ^ p.entropy ^
             (uint64_t{node} << 56) ^ (cfg_.seed * 0x9e3779b97f4a7c15ULL));
}

void Network::arrive(uint32_t port_index, uint32_t packet) {
  if (ports_[port_index].rate_fraction <= 0) {  // the link died under the packet
    packets_.release(packet);
    ++stats_.dropped_link_down;
    return;
  }
  const uint32_t node = topo_.link(port_index).to;
  if (node < topo_.hosts()) {
    receive(node, packet);
    return;
  }
  enqueue(topo_.route(node, packets_[packet].dst, ecmp_hash(node, packets_[packet])), packet);
}

pds::PeerIndex Network::peer_index(uint32_t host, uint32_t remote) const {
  const std::vector<uint32_t>& peers = hosts_[host].peers;
  const auto it = std::lower_bound(peers.begin(), peers.end(), remote);
  return it != peers.end() && *it == remote ? static_cast<pds::PeerIndex>(it - peers.begin())
                                            : pds::kNoPeer;
}

void Network::receive(uint32_t host, uint32_t packet) {
  Host& h = hosts_[host];
  pds::Pds& pds = *h.pds;
  const SimPacket& p = packets_[packet];
  const pds::PeerIndex from = peer_index(host, p.src);
  if (const auto* req = std::get_if<wire::PdsRequest>(&p.header)) {
    pds::RxClass c = pds.classify_request(from, *req, p.trimmed, p.entropy, now_);
    if (c.verdict == pds::RxVerdict::kDeliver) {
      // SES parses the header its peer wrote; the payload it places is scratch.
      std::memcpy(rx_scratch_.data(), p.ses.data(), p.ses_bytes);
      const std::span<const uint8_t> bytes(rx_scratch_.data(), p.ses_bytes + p.payload_bytes);
      switch (h.ses->on_packet(from, p.ses_next, bytes, false, now_)) {
        case ses::RxResult::kAccepted: {
          pds.commit_request(c, p.ecn);
          const auto bin = static_cast<size_t>(now_.ps / std::max<int64_t>(1, cfg_.goodput_bin.ps));
          if (bin >= delivered_.size()) delivered_.resize(bin + 1);
          delivered_[bin] += p.payload_bytes;
          break;
        }
        case ses::RxResult::kNoResource:
          ++stats_.refused_packets;
          pds.refuse_request(from, *req, wire::NackCode::kNoSesMessageAvailable);
          break;
        case ses::RxResult::kMalformed:
          ++stats_.malformed_packets;  // not committed: the sender retransmits it
          break;
      }
    }
    if (!h.flush_pending) {
      h.flush_pending = true;
      events_.push(now_ + cfg_.ack_delay, kAckFlush, host);
    }
  } else if (const auto* ack = std::get_if<wire::PdsAck>(&p.header)) {
    pds.on_ack(from, *ack, now_, p.entropy);
  } else if (const auto* nack = std::get_if<wire::PdsNack>(&p.header)) {
    pds.on_nack(from, *nack, now_);
  } else if (const auto* ctrl = std::get_if<wire::PdsCtrl>(&p.header)) {
    pds.on_ctrl(from, *ctrl, p.entropy, now_);
  }
  packets_.release(packet);
  drain_reports(host);
  kick(host);
  arm_timer(host);
}

uint32_t Network::make_packet(uint32_t src, uint32_t dst, uint16_t entropy) {
  const uint32_t i = packets_.alloc();
  SimPacket& p = packets_[i];
  p.src = src;
  p.dst = dst;
  p.entropy = entropy;
  p.wire_bytes = kHeaderBytes;
  ++stats_.packets_sent;
  return i;
}

void Network::kick(uint32_t host) {
  Host& h = hosts_[host];
  pds::Pds& pds = *h.pds;
  const uint32_t nic = topo_.node(host).up_ports[0];
  // Control packets first: they unblock peers. On the EV PDS chose (that of the packet
  // they answer), else sprayed, so no one path holds every copy.
  for (const pds::ControlPacket& c : pds.control_out()) {
    const auto entropy = c.entropy ? *c.entropy : static_cast<uint16_t>(rng_.next());
    const uint32_t i = make_packet(host, h.peers[c.peer], entropy);
    std::visit([&](const auto& header) { packets_[i].header = header; }, c.header);
    enqueue(nic, i);
  }
  pds.control_out().clear();
  uint32_t pdc = 0;
  pds::TxPacket tx;
  // One packet on the wire and one waiting behind it: the NIC never idles while the
  // PDS has something to send, and the PDS decides as late as possible.
  while (ports_[nic].queued_packets == 0) {
    if (!pds.pop_ready(pdc)) break;
    if (!pds.next_tx(pdc, now_, tx)) continue;
    const uint32_t i = make_packet(host, h.peers[tx.peer], tx.entropy);
    SimPacket& p = packets_[i];
    if (tx.is_ctrl) {
      p.header = tx.ctrl;
    } else {
      p.header = tx.request;
      uint32_t payload = 0;
      p.ses_bytes = static_cast<uint8_t>(h.ses->build_header(tx.ref, p.ses, p.ses_next, payload));
      p.payload_bytes = payload;
      p.wire_bytes = payload + kHeaderBytes;
    }
    enqueue(nic, i);
    pds.mark_ready(pdc);  // it may have more; it leaves the list when next_tx says no
  }
  drain_reports(host);
  arm_timer(host);
}

void Network::start_flow(uint32_t index) {
  Flow& f = flows_[index];
  f.started = now_;
  if (f.bytes == 0 || f.src == f.dst) {
    finish_flow(index);  // nothing to move: done at once
    return;
  }
  ses::SendSpec spec;
  spec.tagged = true;
  spec.tag = index;
  if (hosts_[f.src].ses->send(peer_index(f.src, f.dst), payload_area_.get(), f.bytes, index, spec,
                              now_) != Status::kOk) {
    ++stats_.failed_flows;  // refused at once
    finish_flow(index);
    return;
  }
  kick(f.src);
}

void Network::finish_flow(uint32_t index) {
  Flow& f = flows_[index];
  f.done = true;
  f.finished = now_;
  ++flows_done_;
  for (uint32_t d : f.dependents) {
    if (--flows_[d].waits_for == 0) events_.push(std::max(now_, flows_[d].start), kFlowStart, d);
  }
}

void Network::arm_timer(uint32_t host) {
  Host& h = hosts_[host];
  if (h.timer_pending || h.pds->armed_timers() == 0) return;
  h.timer_pending = true;
  events_.push(now_ + cfg_.timer_tick, kHostTimer, host);
}

void Network::drain_reports(uint32_t host) {
  hosts_[host].ses->take_pds_reports(now_);
  hosts_[host].pds->orphaned_buffers().clear();  // ROD only; the simulator's flows are RUD
  drain_completions(host);
}

void Network::drain_completions(uint32_t host) {
  ses::Completion c;
  while (hosts_[host].ses->poll_completion(c)) {
    if (c.context >= flows_.size()) continue;
    const auto index = static_cast<uint32_t>(c.context);
    Flow& f = flows_[index];
    const bool receive = c.op == ses::OpKind::kTaggedRecv;
    if (receive && c.status == Status::kOk) f.received = c.length;
    if (f.done) continue;
    if (c.status != Status::kOk) {
      ++stats_.failed_flows;  // the sender gave up (or its receive learnt so)
      finish_flow(index);
    } else if (receive) {
      finish_flow(index);
    }
  }
}

Duration Network::ideal_fct(const Flow& f) const {
  const uint64_t payload_per_packet = payload_per_packet_;
  const uint64_t packets =
      std::max<uint64_t>(1, (f.bytes + payload_per_packet - 1) / payload_per_packet);
  const uint64_t total = f.bytes + packets * kHeaderBytes;
  const auto first = static_cast<uint32_t>(std::min<uint64_t>(cfg_.mtu_bytes, total));
  return serialization_time(total, topo_.host_gbps()) +
         topo_.unloaded_latency(f.src, f.dst, first) - serialization_time(first, topo_.host_gbps());
}

size_t Network::memory_bytes() const {
  size_t bytes = ports_.capacity() * sizeof(Port) + packets_.memory_bytes() +
                 events_.memory_bytes() + flows_.capacity() * sizeof(Flow);
  for (const Host& h : hosts_) {
    bytes += sizeof(pds::Pds) + h.pds->memory_bytes() + sizeof(ses::Ses) +
             h.peers.capacity() * sizeof(uint32_t);
  }
  return bytes;
}

}  // namespace spray::des
