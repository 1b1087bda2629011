// The API storm's calls (see api_storm.h): the fixture's set-up, each kind of random
// call and the storm itself, which ends by catching every message, settling and
// checking what only the end can show.
#include "tests/provider/api_storm.h"

namespace spray_fi_test::storm {

void ApiStorm::SetUp() {
  open(FI_EP_RDM,
       FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RMA_EVENT | FI_MULTI_RECV | FI_DIRECTED_RECV |
           FI_SOURCE,
       FI_MR_PROV_KEY | FI_MR_VIRT_ADDR);
  if (HasFatalFailure()) return;
  inject_size = info->tx_attr->inject_size;
  for (fid_cntr*& c : remote_access) {
    fi_cntr_attr attr{};
    attr.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(fi_cntr_open(domain, &attr, &c, nullptr), 0);
    endpoint(c, FI_REMOTE_READ | FI_REMOTE_WRITE);
  }
  endpoint();  // kDead
  // The fourth endpoint goes away before the storm: its AV entry names a dead peer.
  // A socket address stays held by a plain UDP socket that never answers, so that no
  // endpoint of a test running beside this one can take the port and answer for it.
  sockaddr_storage dead_name{};
  size_t dead_len = sizeof(dead_name);
  ASSERT_EQ(fi_getname(&eps[kDead]->fid, &dead_name, &dead_len), 0);
  ASSERT_EQ(fi_close(&eps[kDead]->fid), 0);
  eps.pop_back();
  if (info->addr_format != FI_ADDR_IB_UD) {
    port_holder = socket(dead_name.ss_family, SOCK_DGRAM, 0);
    ASSERT_GE(port_holder, 0);
    ASSERT_EQ(bind(port_holder, reinterpret_cast<sockaddr*>(&dead_name),
                   static_cast<socklen_t>(dead_len)),
              0)
        << "the closed endpoint's port was taken at once: " << std::strerror(errno);
  }
  for (Region& r : regions) {
    r.bytes.assign(kSlots * kSlotBytes, 0);
    for (size_t i = 0; i < r.bytes.size(); ++i) r.bytes[i] = static_cast<uint8_t>(i * 13);
    r.expected = r.bytes;
    r.readers.assign(kSlots, 0);
    r.writers.assign(kSlots, 0);
    ASSERT_EQ(fi_mr_reg(domain, r.bytes.data(), r.bytes.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                        0, 0, &r.mr, nullptr),
              0);
    r.words.resize(kWords);
    for (size_t w = 0; w < kWords; ++w) r.words[w] = (uint64_t{0x5eed} << 32) + w * 1000003;
    r.words_at_start = r.words;
    ASSERT_EQ(fi_mr_reg(domain, r.words.data(), kWords * sizeof(uint64_t),
                        FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &r.words_mr, nullptr),
              0);
  }
}

void ApiStorm::TearDown() {
  // Endpoints first: the counters stay open while bound to them.
  for (fid_ep* ep : eps) EXPECT_EQ(fi_close(&ep->fid), 0);
  eps.clear();
  for (fid_cntr* c : remote_access) {
    if (c) {
      EXPECT_EQ(fi_close(&c->fid), 0);
    }
  }
  for (Region& r : regions) {
    if (r.mr) {
      EXPECT_EQ(fi_close(&r.mr->fid), 0);
    }
    if (r.words_mr) {
      EXPECT_EQ(fi_close(&r.words_mr->fid), 0);
    }
  }
  Fabric::TearDown();
  if (port_holder >= 0) close(port_holder);
}

Op& ApiStorm::new_op(Op::Kind kind, int ep) {
  Op& op = ops.emplace_back();
  op.kind = kind;
  op.id = ops.size() - 1;
  op.ep = ep;
  return op;
}

std::vector<iovec> ApiStorm::pieces(uint8_t* base, size_t size) {
  if (!chance(25)) return {{base, size}};
  std::vector<size_t> cuts{0, size};
  for (size_t n = 1 + pick(3); n > 0; --n) cuts.push_back(pick(size + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<iovec> out;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    out.push_back({base + cuts[i], cuts[i + 1] - cuts[i]});
  }
  ++tally.in_pieces;
  return out;
}

uint64_t ApiStorm::remote_addr(int target, size_t slot, size_t offset) const {
  const int t = target == kDead ? 0 : target;
  return reinterpret_cast<uintptr_t>(regions[t].bytes.data()) + slot * kSlotBytes + offset;
}

void ApiStorm::post_send() {
  const int src = static_cast<int>(pick(kLive));
  if (pending[src] >= kMaxPendingPerEp) return;
  Op& s = new_op(Op::kSend, src);
  s.peer = chance(3) ? kDead : static_cast<int>(pick(kLive));
  s.tagged = chance(70);
  s.size = kSizes[pick(std::size(kSizes))];
  s.inject = s.size <= inject_size && chance(25);
  // An untagged message shorter than its id names its send by CQ data.
  s.with_data = chance(30) || (!s.tagged && s.size < 8);
  s.tag = s.tagged ? (uint64_t{pick(kClasses)} << kTagClassShift) | s.id : 0;
  s.buf = payload(s.id, s.size);
  fid_ep* ep = eps[src];
  const fi_addr_t to = addrs[s.peer];
  const std::vector<iovec> iov = s.inject ? std::vector<iovec>{} : pieces(s.buf.data(), s.size);
  const bool posted = post_op([&]() -> ssize_t {
    if (iov.size() > 1) {  // the v and msg forms (immediate data needs msg)
      if (s.tagged) {
        const fi_msg_tagged m{iov.data(), nullptr, iov.size(), to, s.tag, 0, &s.ctx, s.id};
        return fi_tsendmsg(ep, &m, FI_COMPLETION | (s.with_data ? FI_REMOTE_CQ_DATA : 0));
      }
      if (!s.with_data) return fi_sendv(ep, iov.data(), nullptr, iov.size(), to, &s.ctx);
      const fi_msg m{iov.data(), nullptr, iov.size(), to, &s.ctx, s.id};
      return fi_sendmsg(ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA);
    }
    if (s.tagged) {
      if (s.inject)
        return s.with_data ? fi_tinjectdata(ep, s.buf.data(), s.size, s.id, to, s.tag)
                           : fi_tinject(ep, s.buf.data(), s.size, to, s.tag);
      return s.with_data ? fi_tsenddata(ep, s.buf.data(), s.size, nullptr, s.id, to, s.tag, &s.ctx)
                         : fi_tsend(ep, s.buf.data(), s.size, nullptr, to, s.tag, &s.ctx);
    }
    if (s.inject)
      return s.with_data ? fi_injectdata(ep, s.buf.data(), s.size, s.id, to)
                         : fi_inject(ep, s.buf.data(), s.size, to);
    return s.with_data ? fi_senddata(ep, s.buf.data(), s.size, nullptr, s.id, to, &s.ctx)
                       : fi_send(ep, s.buf.data(), s.size, nullptr, to, &s.ctx);
  });
  if (!posted) {
    ops.pop_back();
    return;
  }
  // An injected send's payload is the provider's copy: scribbling on ours proves it.
  if (s.inject) std::fill(s.buf.begin(), s.buf.end(), 0);
  if (!s.inject) ++pending[src];
  if (s.inject && s.peer == kDead) ++injected_to_dead;
}

void ApiStorm::post_recv(int at, bool catch_all, bool tagged) {
  Op& r = new_op(Op::kRecv, at);
  r.tagged = tagged;
  pick_criteria(r, catch_all);
  // Untagged buffers hold at least a send id; catch-alls hold any message whole.
  const size_t min = tagged ? 0 : 8;
  r.size = catch_all ? kSizes[std::size(kSizes) - 1]
                     : std::max(min, kSizes[pick(std::size(kSizes))] + pick(3));
  r.buf.assign(r.size + 1, kUntouched);  // one byte more: it must stay untouched
  fid_ep* ep = eps[at];
  const fi_addr_t from = r.peer < 0 ? FI_ADDR_UNSPEC : addrs[r.peer];
  const std::vector<iovec> iov = pieces(r.buf.data(), r.size);
  submit([&]() -> ssize_t {
    if (iov.size() > 1) {
      return r.tagged
                 ? fi_trecvv(ep, iov.data(), nullptr, iov.size(), from, r.tag, r.ignore, &r.ctx)
                 : fi_recvv(ep, iov.data(), nullptr, iov.size(), from, &r.ctx);
    }
    return r.tagged ? fi_trecv(ep, r.buf.data(), r.size, nullptr, from, r.tag, r.ignore, &r.ctx)
                    : fi_recv(ep, r.buf.data(), r.size, nullptr, from, &r.ctx);
  });
}

void ApiStorm::post_multi() {
  const int at = static_cast<int>(pick(kLive));
  if (pending[at] >= kMaxPendingPerEp) return;
  Op& m = new_op(Op::kMulti, at);
  pick_criteria(m, false);
  constexpr size_t kMultiSizes[] = {4096, 65536, 300000};
  m.size = kMultiSizes[pick(std::size(kMultiSizes))] + pick(100);
  m.buf.assign(m.size, kUntouched);
  m.expected_completions = INT_MAX;
  iovec iov{m.buf.data(), m.size};
  fi_msg msg{};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.addr = m.peer < 0 ? FI_ADDR_UNSPEC : addrs[m.peer];
  msg.context = &m.ctx;
  submit([&] { return fi_recvmsg(eps[at], &msg, FI_MULTI_RECV | FI_COMPLETION); });
}

bool ApiStorm::receive_waiting(const Op& r) const {
  return (r.kind == Op::kRecv || r.kind == Op::kMulti) && !ended(r) && !r.cancel_requested;
}

void ApiStorm::cancel_some_recv() {
  for (int tries = 0; tries < 8 && !ops.empty(); ++tries) {
    Op& r = ops[pick(ops.size())];
    if (!receive_waiting(r)) continue;
    r.cancel_requested = true;
    const ssize_t rc = fi_cancel(&eps[r.ep]->fid, &r.ctx);
    if (rc != 0 && rc != -FI_ENOENT) fail("fi_cancel returned " + std::to_string(rc));
    return;
  }
}

void ApiStorm::pick_criteria(Op& r, bool catch_all) {
  r.peer = !catch_all && chance(40) ? static_cast<int>(pick(kLive)) : -1;
  if (r.tagged && !catch_all && chance(60)) {
    r.tag = uint64_t{pick(kClasses)} << kTagClassShift;
    r.ignore = kIdMask;
  } else {
    r.ignore = ~uint64_t{0};
  }
}

ssize_t ApiStorm::trecvmsg(Op& r, bool with_buffer, uint64_t flags) {
  iovec iov{r.buf.data(), r.size};
  fi_msg_tagged m{};
  m.msg_iov = with_buffer ? &iov : nullptr;
  m.iov_count = with_buffer ? 1 : 0;
  m.addr = r.peer < 0 ? FI_ADDR_UNSPEC : addrs[r.peer];
  m.tag = r.tag;
  m.ignore = r.ignore;
  m.context = &r.ctx;
  return fi_trecvmsg(eps[r.ep], &m, flags | FI_COMPLETION);
}

void ApiStorm::post_probe() {
  const int at = static_cast<int>(pick(kLive));
  if (pending[at] >= kMaxPendingPerEp) return;
  Op& p = new_op(Op::kProbe, at);
  p.tagged = true;
  pick_criteria(p, false);
  const size_t mode = pick(3);
  p.probe_flags = FI_PEEK | (mode == 1 ? FI_DISCARD : mode == 2 ? FI_CLAIM : 0);
  submit([&] { return trecvmsg(p, false, p.probe_flags); });
}

void ApiStorm::post_rma() {
  const int from = static_cast<int>(pick(kLive));
  if (pending[from] >= kMaxPendingPerEp) return;
  const bool write = chance(50);
  Op& a = new_op(write ? Op::kWrite : Op::kRead, from);
  a.peer = chance(5) ? kDead : static_cast<int>(pick(kLive));
  a.slot = pick(kSlots);
  a.size = std::min(kSizes[pick(std::size(kSizes))], kSlotBytes);
  a.offset = pick(kSlotBytes - a.size + 1);
  uint64_t key = fi_mr_key(regions[a.peer == kDead ? 0 : a.peer].mr);
  uint64_t addr = remote_addr(a.peer, a.slot, a.offset);
  if (a.peer == kDead) {
    a.expect_err = FI_EHOSTUNREACH;
  } else if (chance(10)) {
    key += 1000;  // no region has this key
    a.expect_err = FI_EKEYREJECTED;
  } else if (chance(10)) {
    addr = remote_addr(a.peer, kSlots - 1, kSlotBytes - a.size / 2);  // runs off the end
    a.size += 16;
    a.expect_err = FI_EINVAL;
  } else {
    // A valid op owns its slot: no write beside another op, no read beside a write.
    Region& r = regions[a.peer];
    if (r.writers[a.slot] > 0 || (write && r.readers[a.slot] > 0)) {
      ops.pop_back();
      return;
    }
    (write ? r.writers : r.readers)[a.slot]++;
  }
  a.buf = write ? payload(a.id, a.size) : std::vector<uint8_t>(a.size + 1, kUntouched);
  a.with_data = write && chance(30);  // the target's CQ reports it (only if it lands)
  fid_ep* ep = eps[from];
  const std::vector<iovec> iov = pieces(a.buf.data(), a.size);
  const bool posted = post_op([&]() -> ssize_t {
    if (iov.size() > 1 && !a.with_data) {
      return write
                 ? fi_writev(ep, iov.data(), nullptr, iov.size(), addrs[a.peer], addr, key, &a.ctx)
                 : fi_readv(ep, iov.data(), nullptr, iov.size(), addrs[a.peer], addr, key, &a.ctx);
    }
    if (a.with_data)
      return fi_writedata(ep, a.buf.data(), a.size, nullptr, a.id, addrs[a.peer], addr, key,
                          &a.ctx);
    return write ? fi_write(ep, a.buf.data(), a.size, nullptr, addrs[a.peer], addr, key, &a.ctx)
                 : fi_read(ep, a.buf.data(), a.size, nullptr, addrs[a.peer], addr, key, &a.ctx);
  });
  if (!posted) {
    release_slot(a);
    ops.pop_back();
    return;
  }
  ++pending[from];
}

void ApiStorm::post_atomic() {
  const int from = static_cast<int>(pick(kLive));
  if (pending[from] >= kMaxPendingPerEp) return;
  Op& a = new_op(Op::kAtomic, from);
  a.peer = static_cast<int>(pick(kLive));
  a.fetching = chance(50);
  if (a.fetching) {
    a.word = pick(kChainWords);
    a.count = 1;
    a.atomic_read = chance(20);
  } else {
    a.count = 1 + pick(kMaxAtomicCount);
    a.word = kChainWords + pick(kWords - kChainWords - a.count + 1);
    a.inject = chance(30);
  }
  // Distinct enough that a sum applied twice or lost cannot go unseen.
  for (size_t i = 0; i < a.count; ++i) a.operands.push_back(1 + (rng() & 0xffffff));
  a.size = a.count * sizeof(uint64_t);
  const Region& target = regions[a.peer];
  uint64_t key = fi_mr_key(target.words_mr);
  uint64_t addr = reinterpret_cast<uintptr_t>(target.words.data() + a.word);
  if (!a.inject && chance(20)) {
    switch (pick(4)) {
      case 0:
        a.peer = kDead;  // with the key and address of the live endpoint picked first
        a.expect_err = FI_EHOSTUNREACH;
        break;
      case 1:
        key += 1000;  // no region has this key
        a.expect_err = FI_EKEYREJECTED;
        break;
      case 2:
        addr = reinterpret_cast<uintptr_t>(target.words.data() + kWords - a.count) + 8;
        a.expect_err = FI_EINVAL;  // the last element lies past the end
        break;
      default:
        addr += 4;  // not on an 8-byte boundary
        a.expect_err = FI_EINVAL;
        break;
    }
  }
  a.buf.assign(a.fetching ? a.size + 1 : 0, kUntouched);
  // The operands handed to the provider. Those of a posted atomic must stay put until it
  // completes (the op's own); an injected atomic's are a copy, scribbled on and freed once
  // posted, so only the provider's own copy can travel.
  std::vector<uint64_t> inject_copy = a.operands;
  uint64_t* given = a.inject ? inject_copy.data() : a.operands.data();
  fid_ep* ep = eps[from];
  const fi_addr_t to = addrs[a.peer];
  const bool posted = post_op([&]() -> ssize_t {
    if (a.atomic_read)
      return fi_fetch_atomic(ep, nullptr, 1, nullptr, a.buf.data(), nullptr, to, addr, key,
                             FI_UINT64, FI_ATOMIC_READ, &a.ctx);
    if (a.fetching)
      return fi_fetch_atomic(ep, given, 1, nullptr, a.buf.data(), nullptr, to, addr, key, FI_UINT64,
                             FI_SUM, &a.ctx);
    if (a.inject) return fi_inject_atomic(ep, given, a.count, to, addr, key, FI_UINT64, FI_SUM);
    return fi_atomic(ep, given, a.count, nullptr, to, addr, key, FI_UINT64, FI_SUM, &a.ctx);
  });
  if (!posted) {
    ops.pop_back();
    return;
  }
  if (a.inject) {
    std::fill(inject_copy.begin(), inject_copy.end(), 0);
  } else {
    ++pending[from];
  }
}

void ApiStorm::release_slot(const Op& a) {
  if (a.expect_err != 0) return;
  Region& r = regions[a.peer];
  (a.kind == Op::kWrite ? r.writers : r.readers)[a.slot]--;
}

void ApiStorm::misuse() {
  fid_ep* ep = eps[pick(kLive)];
  char b[16] = {};
  std::vector<uint8_t> big(inject_size + 1);
  fi_msg_tagged m{};
  iovec iov{b, sizeof(b)};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = &misuse_marker;
  struct Case {
    const char* what;
    ssize_t rc, want;
  };
  Case c{"", 0, 0};
  ++tally.misuses;
  switch (pick(5)) {
    case 0:
      c = {"send to an fi_addr never inserted",
           fi_tsend(ep, b, sizeof(b), nullptr, 12345, 1, &misuse_marker), -FI_EINVAL};
      break;
    case 1:
      c = {"send of a null buffer", fi_send(ep, nullptr, 8, nullptr, addrs[0], &misuse_marker),
           -FI_EINVAL};
      break;
    case 2:
      c = {"inject above inject_size", fi_tinject(ep, big.data(), big.size(), addrs[1], 1),
           -FI_EINVAL};
      break;
    case 3:
      c = {"receive with a transmit flag", fi_trecvmsg(ep, &m, FI_ATOMIC), -FI_EBADFLAGS};
      break;
    default:
      c = {"write to an fi_addr never inserted",
           fi_write(ep, b, 8, nullptr, 9999, 0, fi_mr_key(regions[0].mr), &misuse_marker),
           -FI_EINVAL};
      break;
  }
  if (c.rc != c.want) {
    fail(std::string(c.what) + ": returned " + std::to_string(c.rc) + ", not " +
         std::to_string(c.want));
  }
}

void ApiStorm::catch_everything() {
  size_t unreceived[kLive][2] = {};
  for (const Op& op : ops) {
    if (op.kind == Op::kSend && op.peer != kDead && !op.matched) ++unreceived[op.peer][op.tagged];
  }
  for (int at = 0; at < kLive; ++at) {
    for (int tagged = 0; tagged < 2; ++tagged) {
      for (size_t k = 0; k < unreceived[at][tagged]; ++k) post_recv(at, true, tagged != 0);
    }
  }
}

void ApiStorm::storm(uint64_t seed) {
  rng.seed(seed);
  for (int at = 0; at < kLive; ++at) {
    min_multi_recv[at] = 8 + pick(2048);
    ASSERT_EQ(fi_setopt(&eps[at]->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_multi_recv[at],
                        sizeof(size_t)),
              0);
  }
  for (size_t step = 0; step < kSteps && failure.empty(); ++step) {
    const size_t roll = pick(100);
    if (roll < 30) {
      post_send();
    } else if (roll < 58) {
      const int at = static_cast<int>(pick(kLive));
      if (pending[at] < kMaxPendingPerEp) post_recv(at, false, chance(70));
    } else if (roll < 63) {
      cancel_some_recv();
    } else if (roll < 67) {
      post_probe();
    } else if (roll < 69) {
      post_multi();
    } else if (roll < 75) {
      post_rma();
    } else if (roll < 79) {
      post_atomic();
    } else if (roll < 82) {
      misuse();
    } else {
      for (size_t k = pick(4); k > 0; --k) read_cq();
    }
  }
  // Receives still posted may take messages the catch-alls were meant for; what is
  // left over after everything settles is canceled.
  catch_everything();
  if (!run_until([&] { return settled(false) || !failure.empty(); }, std::chrono::seconds(60)))
    fail("not settled within 60 s:" + unfinished());
  for (Op& r : ops) {
    if (receive_waiting(r)) {
      r.cancel_requested = true;
      const ssize_t rc = fi_cancel(&eps[r.ep]->fid, &r.ctx);
      if (rc != 0)
        fail("cancel of idle receive " + std::to_string(r.id) + ": " + std::to_string(rc));
    }
  }
  if (!run_until([&] { return settled(true) || !failure.empty(); }, std::chrono::seconds(10)))
    fail("canceled receives not reported within 10 s:" + unfinished());
  // Nothing more may complete.
  const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  while (std::chrono::steady_clock::now() < quiet_until && failure.empty()) read_cq();
  if (failure.empty()) check_order();
  for (int t = 0; t < kLive; ++t) {
    if (regions[t].bytes != regions[t].expected)
      fail("region " + std::to_string(t) + " holds bytes no valid write put there");
  }
  if (failure.empty()) check_atomic_words();
  if (failure.empty()) check_remote_access_counts();
}

}  // namespace spray_fi_test::storm
