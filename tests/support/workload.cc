#include "tests/support/workload.h"

#include <algorithm>

namespace spray::test_support {
namespace {

// Context values: op index, plus a bit for the receive side.
constexpr uint64_t kRecvBit = uint64_t{1} << 62;

}  // namespace

Workload::Workload(sim::Cluster& cluster, const WorkloadConfig& cfg)
    : cluster_(cluster),
      cfg_(cfg),
      rod_order_(cluster.hosts()),
      rod_seen_(cluster.hosts()),
      unposted_(cluster.hosts()) {
  Rng rng(cfg.seed);
  const uint32_t hosts = cluster.hosts();
  regions_.resize(hosts);
  std::vector<uint64_t> write_cursor(hosts, 0);
  // RUDI writes get the second quarter of each region and never reuse it: a delayed
  // duplicate of an idempotent write is only harmless if nothing newer went there.
  std::vector<uint64_t> rudi_cursor(hosts, kRegionBytes / 4);
  // Reads come from the top half of each region, which writes never touch.
  for (uint32_t h = 0; h < hosts; ++h) {
    regions_[h].assign(kRegionBytes, 0);
    for (uint64_t i = kRegionBytes / 2; i < kRegionBytes; ++i) regions_[h][i] = pattern(h, i);
    ses::MemoryRegion r{regions_[h].data(), kRegionBytes, 0, kRegionKey,
                        ses::access::kRemoteRead | ses::access::kRemoteWrite};
    EXPECT_EQ(cluster.engine(h).register_memory(r), Status::kOk);
  }
  ops_.resize(cfg.operations);
  for (uint32_t i = 0; i < cfg.operations; ++i) {
    Op& op = ops_[i];
    op.src = static_cast<uint32_t>(rng.below(hosts));
    op.dst = static_cast<uint32_t>((op.src + 1 + rng.below(hosts - 1)) % hosts);
    const uint64_t pick = rng.below(100);
    if (rng.chance(cfg.large_fraction)) {
      op.bytes = 65536 + rng.below(cfg.max_bytes - 65536 + 1);
    } else if (pick < 10) {
      op.bytes = 0;
    } else if (pick < 60) {
      op.bytes = rng.below(4097);
    } else {
      op.bytes = rng.below(65537);
    }
    const uint64_t k = rng.below(100);
    if (cfg.rma && k < 5) {
      op.kind = Kind::kRudiWrite;
    } else if (cfg.rma && k < 15) {
      op.kind = Kind::kWrite;
    } else if (cfg.rma && k < 30) {
      op.kind = Kind::kRead;
    } else if (cfg.rod && k < 40) {
      op.kind = Kind::kRodSend;
    } else if (k < 65) {
      op.kind = Kind::kSend;
    } else {
      op.kind = Kind::kTaggedSend;
    }
    op.tag = (uint64_t{i} << 8) | rng.below(256);
    op.any_source = rng.chance(0.3);
    // ROD receives are all posted early: their completion order is then the delivery
    // order, which is what the ROD check below asserts.
    // Untagged receives match in posting order, so all untagged sends of one (src, dst)
    // pair share one choice, keeping the pairing deterministic.
    if (op.kind == Kind::kRodSend) {
      op.posted_early = true;
    } else if (op.kind == Kind::kSend) {
      op.posted_early = ((op.src * 7 + op.dst * 3 + cfg.seed) % 2) == 0;
    } else {
      op.posted_early = rng.chance(0.5);
    }
    if (op.kind == Kind::kRudiWrite) {
      op.bytes = std::min<uint64_t>(op.bytes, 16384);
      if (rudi_cursor[op.dst] + op.bytes > kRegionBytes / 2) op.bytes = 0;  // quarter used up
      op.remote_offset = rudi_cursor[op.dst];
      rudi_cursor[op.dst] += op.bytes;
    } else if (op.kind == Kind::kWrite) {
      op.bytes = std::min<uint64_t>(op.bytes, kRegionBytes / 4 / 4);
      if (write_cursor[op.dst] + op.bytes > kRegionBytes / 4) write_cursor[op.dst] = 0;
      op.remote_offset = write_cursor[op.dst];
      write_cursor[op.dst] += op.bytes;
    } else if (op.kind == Kind::kRead) {
      op.bytes = std::min<uint64_t>(op.bytes, kRegionBytes / 2);
      op.remote_offset = kRegionBytes / 2 + rng.below(kRegionBytes / 2 - op.bytes + 1);
    }
    op.buffer.resize(op.bytes);
    if (op.kind != Kind::kRead) {
      for (uint64_t b = 0; b < op.bytes; ++b) op.buffer[b] = pattern(i, b);
    }
    // Only eager ROD messages complete in delivery order; a rendezvous one completes
    // when its read (on RUD) finishes.
    if (op.kind == Kind::kRodSend && op.bytes <= kEagerLimit) rod_order_[op.dst].push_back(i);
  }
  // Early receives go up front, in operation order (the order sends are issued).
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i].posted_early) post_receive(i);
  }
}

void Workload::post_receive(uint32_t index) {
  Op& op = ops_[index];
  if (op.recv_asked || op.kind == Kind::kWrite || op.kind == Kind::kRead ||
      op.kind == Kind::kRudiWrite) {
    return;
  }
  op.recv_asked = true;
  unposted_[op.dst].push_back(index);
  post_waiting_receives(op.dst);
}

// Receives go up in the order they were asked for, so untagged ones pair with sends
// in send order; the first the table refuses holds back those behind it.
void Workload::post_waiting_receives(uint32_t host) {
  std::deque<uint32_t>& waiting = unposted_[host];
  while (!waiting.empty()) {
    Op& op = ops_[waiting.front()];
    if (op.recv_buffer.size() != op.bytes) op.recv_buffer.assign(op.bytes, 0xee);
    ses::RecvSpec r;
    r.buffer = op.recv_buffer.data();
    r.length = op.bytes;
    r.context = kRecvBit | waiting.front();
    // ROD sends are tagged (unique tags) so they need no pairing discipline.
    r.tagged = op.kind == Kind::kTaggedSend || op.kind == Kind::kRodSend;
    r.tag = op.tag;
    // Untagged receives are directed so that pairing is deterministic (send order per
    // peer); tagged ones may take any source, their tag is unique.
    r.source = (r.tagged && op.any_source) ? pds::kNoPeer : op.src;
    const Status s = cluster_.engine(op.dst).post_recv(r);
    if (s == Status::kAgain) {  // the posted-receive table is full: later
      ++receives_refused_;
      return;
    }
    EXPECT_EQ(s, Status::kOk) << "receive of op " << waiting.front();
    op.recv_posted = true;
    waiting.pop_front();
  }
}

void Workload::issue(uint32_t index) {
  Op& op = ops_[index];
  auto& e = cluster_.engine(op.src);
  Status s = Status::kOk;
  ses::SendSpec spec;
  spec.has_data = (index % 3) == 0;
  spec.data = 0xd00d0000ULL + index;
  switch (op.kind) {
    case Kind::kSend:
      s = e.send(op.dst, op.buffer.data(), op.bytes, index, spec);
      break;
    case Kind::kTaggedSend:
      spec.tagged = true;
      spec.tag = op.tag;
      s = e.send(op.dst, op.buffer.data(), op.bytes, index, spec);
      break;
    case Kind::kRodSend:
      spec.mode = pds::Mode::kRod;
      spec.tagged = true;
      spec.tag = op.tag;
      s = e.send(op.dst, op.buffer.data(), op.bytes, index, spec);
      break;
    case Kind::kWrite:
      s = e.write(op.dst, op.buffer.data(), op.bytes, op.remote_offset, kRegionKey, index);
      break;
    case Kind::kRead:
      s = e.read(op.dst, op.buffer.data(), op.bytes, op.remote_offset, kRegionKey, index);
      break;
    case Kind::kRudiWrite:
      s = e.write_idempotent(op.dst, op.buffer.data(), op.bytes, op.remote_offset, kRegionKey,
                             index);
      break;
  }
  if (s == Status::kOk) {
    op.issued = true;
    bytes_moved_ += op.bytes;
  } else {
    ASSERT_EQ(s, Status::kAgain) << "op " << index;
  }
}

void Workload::poll(uint32_t host) {
  ses::Completion c;
  while (cluster_.engine(host).poll_completion(c)) {
    if (ses::is_remote_access(c.op)) continue;
    const bool recv = (c.context & kRecvBit) != 0;
    const auto index = static_cast<uint32_t>(c.context & ~kRecvBit);
    ASSERT_LT(index, ops_.size());
    Op& op = ops_[index];
    const bool was_complete = complete(op);
    if (recv) {
      ++op.rx_completions;
      op.rx_status = c.status;
      op.rx_length = c.length;
      if (op.kind == Kind::kRodSend && op.bytes <= kEagerLimit) rod_seen_[op.dst].push_back(index);
    } else {
      ++op.tx_completions;
      op.tx_status = c.status;
    }
    if (!was_complete && complete(op)) ++done_;
  }
}

bool Workload::pump() {
  // Issue in order; stop at the first kAgain so sends keep their order.
  while (next_issue_ < ops_.size()) {
    issue(next_issue_);
    if (!ops_[next_issue_].issued) break;
    ++next_issue_;
  }
  // Late receives trail the issue cursor, so some messages arrive unexpected.
  while (next_late_post_ < next_issue_) post_receive(next_late_post_++);
  for (uint32_t h = 0; h < cluster_.hosts(); ++h) {
    poll(h);
    post_waiting_receives(h);  // completions may have made room
  }
  return done_ == ops_.size();
}

std::string Workload::describe_pending(size_t max_lines) const {
  static constexpr const char* kNames[] = {"send", "tsend", "rod", "write", "read", "rudi"};
  std::string out;
  size_t lines = 0;
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (complete(op)) continue;
    if (lines++ == max_lines) {
      out += "  ...\n";
      break;
    }
    out += "  op " + std::to_string(i) + " " + kNames[static_cast<int>(op.kind)] + " " +
           std::to_string(op.src) + "->" + std::to_string(op.dst) +
           " bytes=" + std::to_string(op.bytes) + " issued=" + std::to_string(op.issued) +
           " tx=" + std::to_string(op.tx_completions) +
           (op.tx_completions ? "(" + std::string(to_string(op.tx_status)) + ")" : "") +
           " rx=" + std::to_string(op.rx_completions) +
           " recv_posted=" + std::to_string(op.recv_posted) + "\n";
  }
  return out;
}

void Workload::verify(const std::string& label) const {
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    SCOPED_TRACE(label + " op " + std::to_string(i) + " bytes " + std::to_string(op.bytes));
    ASSERT_EQ(op.tx_completions, 1);
    ASSERT_EQ(op.tx_status, Status::kOk);
    switch (op.kind) {
      case Kind::kSend:
      case Kind::kTaggedSend:
      case Kind::kRodSend:
        ASSERT_EQ(op.rx_completions, 1);
        ASSERT_EQ(op.rx_status, Status::kOk);
        ASSERT_EQ(op.rx_length, op.bytes);
        ASSERT_TRUE(op.recv_buffer == op.buffer);
        break;
      case Kind::kRudiWrite: {
        const auto& region = regions_[op.dst];
        ASSERT_TRUE(std::equal(op.buffer.begin(), op.buffer.end(),
                               region.begin() + static_cast<ptrdiff_t>(op.remote_offset)));
        break;
      }
      case Kind::kWrite: {
        // Later writes may reuse the area; only check those not overwritten since.
        bool overwritten = false;
        for (uint32_t j = i + 1; j < ops_.size() && !overwritten; ++j) {
          const Op& o = ops_[j];
          overwritten = o.kind == Kind::kWrite && o.dst == op.dst &&
                        o.remote_offset < op.remote_offset + op.bytes &&
                        op.remote_offset < o.remote_offset + o.bytes;
        }
        if (!overwritten) {
          const auto& region = regions_[op.dst];
          ASSERT_TRUE(std::equal(op.buffer.begin(), op.buffer.end(),
                                 region.begin() + static_cast<ptrdiff_t>(op.remote_offset)));
        }
        break;
      }
      case Kind::kRead: {
        // The first wrong byte, if any, found without an assertion per byte (each builds
        // a gtest result; reads are up to 4 MiB).
        uint64_t b = 0;
        while (b < op.bytes && op.buffer[b] == pattern(op.dst, op.remote_offset + b)) ++b;
        if (b < op.bytes) {
          ASSERT_EQ(op.buffer[b], pattern(op.dst, op.remote_offset + b)) << "byte " << b;
        }
        break;
      }
    }
  }
  for (uint32_t h = 0; h < rod_order_.size(); ++h) {
    // ROD receives complete in the order their sends were issued, per sender.
    for (uint32_t src = 0; src < rod_order_.size(); ++src) {
      std::vector<uint32_t> want, got;
      for (uint32_t i : rod_order_[h])
        if (ops_[i].src == src) want.push_back(i);
      for (uint32_t i : rod_seen_[h])
        if (ops_[i].src == src) got.push_back(i);
      EXPECT_EQ(got, want) << label << " ROD order to host " << h << " from " << src;
    }
  }
}

}  // namespace spray::test_support
