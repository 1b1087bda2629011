#include "nic_sim/fabric.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "nic_sim/sim_nic.h"

namespace spray::sim {
namespace {

// A duplicate leaves up to this many nanoseconds after its original (apply_faults).
constexpr uint64_t kDuplicateJitterNs = 5000;

uint32_t frame_check(const dp::PacketBuf* b) {
  return static_cast<uint32_t>(crc32(0L, b->data, b->len));
}

}  // namespace

Fabric::Fabric(const FabricConfig& config)
    : cfg_(config),
      pool_(config.buffers, config.mtu_bytes),
      uplinks_(config.hosts, Queue{config.host_link, {}}),
      downlinks_(config.hosts, Queue{config.host_link, {}}),
      paths_(config.paths, Queue{config.path_link, {}}),
      path_up_(config.paths, true),
      host_up_(config.hosts, true),
      fcs_(config.buffers, 0),
      rng_(config.seed) {
  for (uint32_t h = 0; h < config.hosts; ++h) {
    nics_.push_back(std::make_unique<SimNic>(*this, h, config.nic_rx_ring));
  }
  stats_.path_packets.assign(config.paths, 0);
}

Fabric::~Fabric() = default;

Time Fabric::next_event() const {
  return events_.empty() ? Time{INT64_MAX} : events_.top().at;
}

Duration Fabric::longest_transit() const {
  // In seconds, as a double: a queue of a slow link can hold more than int64
  // picoseconds say; such a bound is as good as forever.
  const auto hop = [&](const QueueConfig& q) {
    const double bytes = static_cast<double>(q.capacity_bytes) + cfg_.mtu_bytes;
    return bytes * 8.0 / (q.gbps * 1e9) + q.propagation.as_seconds();
  };
  const double seconds = 2 * hop(cfg_.host_link) + hop(cfg_.path_link) +
                         cfg_.faults.reorder_delay.as_seconds() + kDuplicateJitterNs * 1e-9;
  if (seconds >= 1e6) return Duration{INT64_MAX};
  return Duration{static_cast<int64_t>(seconds * 1e12) + 1};
}

void Fabric::schedule(Time at, dp::PacketBuf* buf, uint32_t src, uint32_t dst, Hop hop) {
  events_.push(Event{at, seq_++, buf, src, dst, hop});
}

void Fabric::inject(uint32_t src, dp::PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    dp::PacketBuf* b = bufs[i];
    ++stats_.injected;
    const uint32_t dst = b->peer.sim_host_id();
    if (b->peer.family != dp::NetAddr::Family::kSim || dst >= hosts() || b->len == 0) {
      drop(b);
      continue;
    }
    if (!host_up_[src] || !host_up_[dst]) {
      ++stats_.dropped_host_down;
      drop(b);
      continue;
    }
    if (drop_filter_ && drop_filter_(src, dst, *b)) {
      ++stats_.dropped_by_filter;
      drop(b);
      continue;
    }
    b->peer = dp::NetAddr::sim_host(src);  // receivers see where it came from
    b->flags = 0;
    fcs_[b->owner_tag] = frame_check(b);
    schedule(now_, b, src, dst, Hop::kUplink);
  }
}

bool Fabric::enqueue(Queue& q, dp::PacketBuf* b, Time at, Time& leaves) {
  const double gbps = q.cfg.gbps;
  const double backlog =
      q.busy_until > at ? static_cast<double>((q.busy_until - at).ps) * gbps / 8000.0 : 0.0;
  if (backlog + b->len > q.cfg.capacity_bytes) {
    if (!q.cfg.trim_when_full || b->len <= kTrimmedBytes) {
      ++stats_.dropped_queue_full;
      return false;
    }
    b->len = kTrimmedBytes;
    b->flags |= dp::PacketBuf::kTrimmed;
    fcs_[b->owner_tag] = frame_check(b);  // the switch recomputes the FCS
    ++stats_.trimmed;
  } else if (backlog > q.cfg.ecn_threshold_bytes) {
    if (!(b->flags & dp::PacketBuf::kEcnCe)) ++stats_.ecn_marked;
    b->flags |= dp::PacketBuf::kEcnCe;
  }
  const Time start = std::max(at, q.busy_until);
  leaves = start + serialization_time(b->len, gbps);
  q.busy_until = leaves;
  return true;
}

void Fabric::apply_faults(const Event& e) {
  const FaultConfig& f = cfg_.faults;
  dp::PacketBuf* b = e.buf;
  if (f.loss > 0 && rng_.chance(f.loss)) {
    ++stats_.lost;
    drop(b);
    return;
  }
  if (f.trim > 0 && b->len > kTrimmedBytes && rng_.chance(f.trim)) {
    b->len = kTrimmedBytes;
    b->flags |= dp::PacketBuf::kTrimmed;
    fcs_[b->owner_tag] = frame_check(b);
    ++stats_.trimmed;
  }
  Time at = e.at;
  if (f.reorder > 0 && rng_.chance(f.reorder)) {
    at += Duration{static_cast<int64_t>(rng_.below(static_cast<uint64_t>(f.reorder_delay.ps) + 1))};
    ++stats_.reordered;
  }
  if (f.duplicate > 0 && rng_.chance(f.duplicate)) {
    if (dp::PacketBuf* copy = pool_.alloc()) {
      std::memcpy(copy->data, b->data, b->len);
      copy->len = b->len;
      copy->flags = b->flags;
      copy->peer = b->peer;
      copy->entropy = b->entropy;
      fcs_[copy->owner_tag] = fcs_[b->owner_tag];
      schedule(at + Duration::nanoseconds(static_cast<int64_t>(rng_.below(kDuplicateJitterNs))),
               copy, e.src, e.dst, Hop::kDownlink);
      ++stats_.duplicated;
    }
  }
  if (f.corrupt > 0 && b->len > 0 && rng_.chance(f.corrupt)) {
    const uint64_t bit = rng_.below(uint64_t{b->len} * 8);
    b->data[bit / 8] = static_cast<uint8_t>(b->data[bit / 8] ^ (1u << (bit % 8)));
  }
  schedule(at, b, e.src, e.dst, Hop::kDownlink);
}

void Fabric::process(const Event& e) {
  dp::PacketBuf* b = e.buf;
  Time leaves{};
  switch (e.hop) {
    case Hop::kUplink:
      if (!enqueue(uplinks_[e.src], b, e.at, leaves)) return drop(b);
      schedule(leaves + uplinks_[e.src].cfg.propagation, b, e.src, e.dst, Hop::kPath);
      return;
    case Hop::kPath: {
      const uint32_t p = b->entropy % cfg_.paths;
      ++stats_.path_packets[p];
      if (!path_up_[p]) {
        ++stats_.dropped_path_down;
        return drop(b);
      }
      if (!enqueue(paths_[p], b, e.at, leaves)) return drop(b);
      apply_faults(Event{leaves + paths_[p].cfg.propagation, e.seq, b, e.src, e.dst, e.hop});
      return;
    }
    case Hop::kDownlink:
      if (!enqueue(downlinks_[e.dst], b, e.at, leaves)) return drop(b);
      schedule(leaves + downlinks_[e.dst].cfg.propagation, b, e.src, e.dst, Hop::kDeliver);
      return;
    case Hop::kDeliver:
      if (!host_up_[e.dst]) {
        ++stats_.dropped_host_down;
        return drop(b);
      }
      if (frame_check(b) != fcs_[b->owner_tag]) {
        ++stats_.dropped_fcs;
        return drop(b);
      }
      if (!nics_[e.dst]->deliver(b)) {
        ++stats_.dropped_rx_ring;
        return drop(b);
      }
      ++stats_.delivered;
      return;
  }
}

void Fabric::advance_to(Time t) {
  while (!events_.empty() && events_.top().at <= t) {
    const Event e = events_.top();
    events_.pop();
    now_ = std::max(now_, e.at);
    process(e);
  }
  now_ = std::max(now_, t);
}

}  // namespace spray::sim
