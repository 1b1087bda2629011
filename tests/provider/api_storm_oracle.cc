// The API storm's oracle (see api_storm.h): every completion read from the CQ is
// checked against the model of what was posted, and the model is brought up to date.
#include "tests/provider/api_storm.h"

namespace spray_fi_test::storm {

bool ApiStorm::can_match(const Op& r, const Op& s) {
  if (s.peer != r.ep || s.tagged != r.tagged) return false;
  if (r.peer >= 0 && r.peer != s.ep) return false;
  return !r.tagged || ((s.tag ^ r.tag) & ~r.ignore) == 0;
}

Op* ApiStorm::op_of(void* ctx, uint64_t flags, int err) {
  if (ctx == nullptr && err == FI_EHOSTUNREACH && (flags & FI_SEND) &&
      inject_errors < injected_to_dead) {
    ++inject_errors;
    ++tally.failed_to_dead;
    return nullptr;
  }
  if (ctx == &misuse_marker) {
    fail("a refused call completed");
    return nullptr;
  }
  for (Op& op : ops) {  // not per packet: the test's own bookkeeping
    if (&op.ctx == ctx) return &op;
  }
  char what[96];
  std::snprintf(what, sizeof(what), "a completion (flags %#" PRIx64 ", error %d) for context %p",
                flags, err, ctx);
  fail(std::string(what) + ", never posted");
  return nullptr;
}

Op* ApiStorm::send_of(const Op& r, const uint8_t* at, uint64_t tag, uint64_t flags, uint64_t data) {
  uint64_t id = 0;
  if (r.tagged) {
    id = tag & kIdMask;
  } else if (flags & FI_REMOTE_CQ_DATA) {
    id = data;
  } else {
    for (int i = 7; i >= 0; --i) id = id << 8 | at[i];
  }
  if (id >= ops.size() || ops[id].kind != Op::kSend) {
    fail("receive " + std::to_string(r.id) + " got a message of no send (id " + std::to_string(id) +
         ")");
    return nullptr;
  }
  return &ops[id];
}

Op* ApiStorm::take_send(Op& r, const std::string& who, const uint8_t* at, uint64_t tag,
                        uint64_t flags, uint64_t data, std::optional<fi_addr_t> src) {
  if (src && std::find(addrs.begin(), addrs.end(), *src) == addrs.end()) {
    fail(who + " got a message from outside the AV (another process's traffic?)");
    return nullptr;
  }
  Op* s = send_of(r, at, tag, flags, data);
  if (!s) return nullptr;
  const std::string pair = who + " <- send " + std::to_string(s->id);
  if (!can_match(r, *s)) fail(pair + ": could not match it");
  if (s->matched)
    fail(pair + ": the send was already received by " + std::to_string(s->matched->id));
  s->matched = &r;
  if (src && *src != addrs[s->ep]) fail(pair + ": from another endpoint");
  return s;
}

void ApiStorm::on_recv(Op& r, size_t len, size_t olen, uint64_t tag, uint64_t flags, uint64_t data,
                       std::optional<fi_addr_t> src, int err) {
  const std::string who = "receive " + std::to_string(r.id) + " at ep " + std::to_string(r.ep);
  if (err == FI_ECANCELED) {
    if (!r.cancel_requested) fail(who + " canceled though nobody asked");
    ++tally.canceled;
    return;
  }
  if (err != 0 && err != FI_ETRUNC) {
    fail(who + " failed: " + fi_strerror(err));
    return;
  }
  Op* s = take_send(r, who, r.buf.data(), tag, flags, data, src);
  if (!s) return;
  r.matched = s;
  const std::string pair = who + " <- send " + std::to_string(s->id);
  check_delivery(pair, r.buf, r.size, true, *s, len, olen, flags, data, err);
}

void ApiStorm::on_multi(Op& m, const void* at, size_t len, size_t olen, uint64_t flags,
                        uint64_t data, std::optional<fi_addr_t> src, int err) {
  const std::string who = "multi-receive " + std::to_string(m.id) + " at ep " +
                          std::to_string(m.ep) + " (" + std::to_string(m.multi_parts.size()) +
                          " messages in " + std::to_string(m.size) + " B)";
  const bool released = (flags & FI_MULTI_RECV) != 0;
  if (released) m.expected_completions = m.completions;
  if (err == FI_ECANCELED) {
    if (!m.cancel_requested) fail(who + " canceled though nobody asked");
    if (!released) fail(who + " canceled without FI_MULTI_RECV (its buffer released)");
    ++tally.canceled;
    return;
  }
  if (err != 0 && err != FI_ETRUNC) {
    fail(who + " failed: " + fi_strerror(err));
    return;
  }
  const auto* base = m.buf.data();
  const auto* where = static_cast<const uint8_t*>(at);
  if (where < base || where > base + m.size) {
    fail(who + ": a message landed outside the buffer");
    return;
  }
  const auto offset = static_cast<size_t>(where - base);
  const std::span<const uint8_t> room = std::span(m.buf).subspan(offset, m.size - offset);
  Op* s = take_send(m, who, room.data(), 0, flags, data, src);
  if (!s) return;
  const std::string pair = who + " <- send " + std::to_string(s->id);
  check_delivery(pair, room, room.size(), false, *s, len, olen, flags, data, err);
  ++tally.into_multi;
  for (const Op::Part& p : m.multi_parts) {
    if (offset < p.offset + p.len && p.offset < offset + len)
      fail(pair + ": lands on the part of send " + std::to_string(p.send));
    // An earlier send's part lies before this one (empty ones may share an offset).
    const bool in_order = p.send < s->id ? p.offset + p.len <= offset : offset + len <= p.offset;
    if (p.from == s->ep && !in_order)
      fail(pair + ": took its part out of its sender's order (send " + std::to_string(p.send) +
           ")");
  }
  m.multi_parts.push_back({offset, len, s->ep, s->id});
  if (!released) return;
  // The buffer is the user's again: its parts are all in, packed from its start.
  std::vector<Op::Part> parts = m.multi_parts;
  // By offset; at one offset an empty part before the one that fills it.
  std::sort(parts.begin(), parts.end(), [](auto& a, auto& b) {
    return std::pair(a.offset, a.len) < std::pair(b.offset, b.len);
  });
  size_t used = 0;
  for (const Op::Part& p : parts) {
    if (p.offset != used) fail(pair + ": a gap before the part of send " + std::to_string(p.send));
    used = p.offset + p.len;
  }
  const size_t left = m.size - used;
  if (!(left == 0 || left < min_multi_recv[m.ep]) && !m.cancel_requested)
    fail(pair + ": FI_MULTI_RECV set with " + std::to_string(left) + " B left");
}

void ApiStorm::check_delivery(const std::string& pair, std::span<const uint8_t> buffer, size_t room,
                              bool tail_untouched, const Op& s, size_t len, size_t olen,
                              uint64_t flags, uint64_t data, int err) {
  const size_t want_len = std::min(s.size, room);
  if (len != want_len) fail(pair + ": length " + std::to_string(len));
  if ((err == FI_ETRUNC) != (s.size > room)) fail(pair + ": truncation misreported");
  if (err == FI_ETRUNC && olen != s.size - room)
    fail(pair + ": overflow " + std::to_string(olen) + " of a truncated message");
  if (s.with_data && (!(flags & FI_REMOTE_CQ_DATA) || data != s.id)) {
    fail(pair + ": remote CQ data lost (" + describe(s) + "; flags " + std::to_string(flags) +
         ", data " + std::to_string(data) + ", err " + std::to_string(err) + ")");
  }
  ++tally.received;
  if (err == FI_ETRUNC) ++tally.truncated;
  for (size_t i = 0; i < want_len; ++i) {
    if (buffer[i] != payload_byte(s.id, i)) {
      fail(pair + ": byte " + std::to_string(i) + " differs");
      break;
    }
  }
  if (tail_untouched && std::any_of(buffer.begin() + static_cast<long>(want_len), buffer.end(),
                                    [](uint8_t b) { return b != kUntouched; }))
    fail(pair + ": a byte past the message was written");
}

void ApiStorm::on_probe(Op& p, size_t len, size_t olen, uint64_t tag, uint64_t flags, uint64_t data,
                        std::optional<fi_addr_t> src, int err) {
  const std::string who = "probe " + std::to_string(p.id) + " at ep " + std::to_string(p.ep);
  if (p.completions == 2) {  // the claiming receive
    const std::string pair = who + " claimed send " + std::to_string(p.matched->id);
    if (tag != p.matched->tag) fail(pair + ", but its receive got tag " + std::to_string(tag));
    if (p.claim_discards) {
      if (err != 0 || len != 0) fail(pair + ": the discard ended with " + std::to_string(err));
      ++tally.discarded;
      return;
    }
    if (err != 0 && err != FI_ETRUNC) fail(pair + ": the receive failed: " + fi_strerror(err));
    check_delivery(pair, p.buf, p.size, true, *p.matched, len, olen, flags, data, err);
    ++tally.claimed;
    return;
  }
  if (err == FI_ENOMSG) return;
  if (err != 0) {
    fail(who + " failed: " + fi_strerror(err));
    return;
  }
  if (!src || std::find(addrs.begin(), addrs.end(), *src) == addrs.end()) {
    fail(who + " found a message from outside the AV");
    return;
  }
  Op* s = send_of(p, nullptr, tag, flags, data);
  if (!s) return;
  const std::string pair = who + " found send " + std::to_string(s->id);
  ++tally.peeked;
  if (!can_match(p, *s)) fail(pair + ": it could not match it");
  if (*src != addrs[s->ep]) fail(pair + ": from another endpoint");
  if (len != s->size) fail(pair + ": length " + std::to_string(len));
  if (s->with_data && (!(flags & FI_REMOTE_CQ_DATA) || data != s->id))
    fail(pair + ": remote CQ data lost");
  if (!(p.probe_flags & (FI_CLAIM | FI_DISCARD))) return;
  // Claimed or discarded: no receive may take it from now on.
  if (s->matched) fail(pair + ", already taken by op " + std::to_string(s->matched->id));
  s->matched = &p;
  p.matched = s;
  if (p.probe_flags & FI_DISCARD) {
    ++tally.discarded;
    return;
  }
  p.expected_completions = 2;
  p.claim_discards = chance(20);
  if (!p.claim_discards) {  // a buffer that may be a little short of the message
    p.size = s->size - std::min(s->size, pick(2) * pick(64));
    p.buf.assign(p.size + 1, kUntouched);
  }
  const uint64_t claim = FI_CLAIM | (p.claim_discards ? FI_DISCARD : 0);
  if (!post_op([&] { return trecvmsg(p, !p.claim_discards, claim); }))
    fail(pair + ": its claiming receive could not be posted");
}

void ApiStorm::on_remote_write(size_t len, uint64_t data, fi_addr_t src) {
  const std::string who = "remote write completion (data " + std::to_string(data) + ")";
  if (data >= ops.size() || ops[data].kind != Op::kWrite || !ops[data].with_data ||
      ops[data].expect_err != 0) {
    fail(who + " for no write with data that could land");
    return;
  }
  Op& a = ops[data];
  if (a.remote_seen) fail(who + " twice");
  a.remote_seen = true;
  ++tally.remote_writes;
  if (len != a.size) fail(who + ": length " + std::to_string(len));
  if (src != addrs[a.ep]) fail(who + ": from another endpoint");
  // Until the writer's own completion the slot is the write's: its bytes must be there.
  const Region& r = regions[a.peer];
  const size_t at = a.slot * kSlotBytes + a.offset;
  if (a.completions == 0 &&
      !std::equal(a.buf.begin(), a.buf.end(), r.bytes.begin() + static_cast<long>(at)))
    fail(who + ": reported before its bytes landed");
}

void ApiStorm::on_rma(Op& a, int err) {
  const std::string who = (a.kind == Op::kWrite ? "write " : "read ") + std::to_string(a.id);
  if (err != a.expect_err) {
    fail(who + ": ended with '" + fi_strerror(err) + "', not '" + fi_strerror(a.expect_err) + "'");
    if (err == 0 || a.expect_err == 0) return;  // its slot's bookkeeping no longer holds
  }
  ++(a.expect_err != 0 ? tally.rma_refused : tally.rma_done);
  if (a.expect_err != 0) {
    if (a.kind == Op::kRead &&
        std::count(a.buf.begin(), a.buf.end(), kUntouched) != static_cast<long>(a.buf.size()))
      fail(who + ": failed, yet wrote into the local buffer");
    return;
  }
  Region& r = regions[a.peer];
  const size_t at = a.slot * kSlotBytes + a.offset;
  if (a.kind == Op::kWrite) {
    std::copy(a.buf.begin(), a.buf.end(), r.expected.begin() + static_cast<long>(at));
    if (!std::equal(a.buf.begin(), a.buf.end(), r.bytes.begin() + static_cast<long>(at)))
      fail(who + ": did not land");
  } else {
    if (!std::equal(a.buf.begin(), a.buf.begin() + static_cast<long>(a.size),
                    r.expected.begin() + static_cast<long>(at)) ||
        a.buf[a.size] != kUntouched)
      fail(who + ": returned other bytes than the region holds");
  }
  release_slot(a);
}

void ApiStorm::on_atomic(Op& a, uint64_t flags, int err) {
  const std::string who = "atomic " + std::to_string(a.id);
  if (err != a.expect_err) {
    fail(who + ": ended with '" + fi_strerror(err) + "', not '" + fi_strerror(a.expect_err) + "'");
    return;
  }
  ++(a.expect_err != 0 ? tally.atomics_refused : tally.atomics_done);
  if (a.expect_err != 0) {
    if (std::count(a.buf.begin(), a.buf.end(), kUntouched) != static_cast<long>(a.buf.size()))
      fail(who + ": failed, yet wrote into its result buffer");
    return;
  }
  const uint64_t kind = FI_ATOMIC | (a.fetching ? FI_READ : FI_WRITE);
  if ((flags & kind) != kind) fail(who + ": completion flags " + std::to_string(flags));
  if (a.fetching && a.buf[a.size] != kUntouched) fail(who + ": wrote past its result");
}

void ApiStorm::check_atomic_words() {
  for (int t = 0; t < kLive; ++t) {
    const Region& r = regions[t];
    for (size_t w = 0; w < kWords; ++w) {
      const std::string where = "word " + std::to_string(w) + " of endpoint " + std::to_string(t);
      // (old value fetched, operand) of each fetching sum; the values atomic reads got.
      std::vector<std::pair<uint64_t, uint64_t>> sums;
      std::vector<uint64_t> reads;
      uint64_t added = 0;  // sum words: what the sums that succeeded added
      for (const Op& a : ops) {
        if (a.kind != Op::kAtomic || a.peer != t || a.expect_err != 0) continue;
        if (w < a.word || w >= a.word + a.count) continue;
        const uint64_t operand = a.operands[w - a.word];
        if (!a.fetching) {
          added += operand;
          continue;
        }
        uint64_t old = 0;
        std::memcpy(&old, a.buf.data(), sizeof(old));
        if (a.atomic_read) {
          reads.push_back(old);
        } else {
          sums.emplace_back(old, operand);
        }
      }
      const uint64_t start = r.words_at_start[w];
      if (w >= kChainWords) {
        if (r.words[w] != start + added)
          fail(where + " holds " + std::to_string(r.words[w]) + ", not its start plus the " +
               "sums that succeeded (" + std::to_string(start + added) + ")");
        continue;
      }
      std::sort(sums.begin(), sums.end());
      std::vector<uint64_t> values{start};  // every value the word held, in order
      for (const auto& [old, operand] : sums) {
        if (old != values.back()) {
          fail(where + ": a fetching sum got " + std::to_string(old) + " where the word held " +
               std::to_string(values.back()) + " (a sum lost, doubled or not atomic)");
          return;
        }
        values.push_back(old + operand);
      }
      if (r.words[w] != values.back())
        fail(where + " holds " + std::to_string(r.words[w]) + ", not " +
             std::to_string(values.back()) + " (the last fetching sum's result)");
      for (uint64_t v : reads) {
        if (std::find(values.begin(), values.end(), v) == values.end())
          fail(where + ": an atomic read got " + std::to_string(v) + ", a value it never held");
      }
    }
  }
}

void ApiStorm::check_remote_access_counts() {
  for (int t = 0; t < kLive; ++t) {
    const auto valid = std::count_if(ops.begin(), ops.end(), [t](const Op& a) {
      const bool remote = a.kind == Op::kWrite || a.kind == Op::kRead || a.kind == Op::kAtomic;
      return remote && a.peer == t && a.expect_err == 0;
    });
    const auto want = static_cast<uint64_t>(valid);
    // A read is counted when its data is acknowledged, which may come after its
    // initiator's completion; a count past `want` would show in the 50 ms after.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (fi_cntr_read(remote_access[t]) < want && std::chrono::steady_clock::now() < deadline) {
    }
    const auto linger = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < linger) (void)fi_cntr_read(remote_access[t]);
    const uint64_t got = fi_cntr_read(remote_access[t]);
    if (got != want)
      fail("endpoint " + std::to_string(t) + " counted " + std::to_string(got) +
           " remote accesses, not the " + std::to_string(want) + " valid ones aimed at it");
  }
}

void ApiStorm::complete(Op& op, const void* buf, size_t len, size_t olen, uint64_t tag,
                        uint64_t flags, uint64_t data, std::optional<fi_addr_t> src, int err) {
  if (op.inject) fail("injected send " + std::to_string(op.id) + " completed");
  // A claim found posts its claiming receive from here, whose completion may be read
  // (nested) before this returns: `seen` says which completion this call handles.
  const int seen = ++op.completions;
  if (seen > op.expected_completions) {
    fail("op " + std::to_string(op.id) + " completed twice");
    return;
  }
  switch (op.kind) {
    case Op::kSend:
      if (err == FI_EHOSTUNREACH) ++tally.failed_to_dead;
      if (err != (op.peer == kDead ? FI_EHOSTUNREACH : 0))
        fail("send " + std::to_string(op.id) + " to ep " + std::to_string(op.peer) +
             " ended with '" + fi_strerror(err) + "'");
      break;
    case Op::kRecv:
      on_recv(op, len, olen, tag, flags, data, src, err);
      break;
    case Op::kMulti:
      on_multi(op, buf, len, olen, flags, data, src, err);
      break;
    case Op::kProbe:
      on_probe(op, len, olen, tag, flags, data, src, err);
      break;
    case Op::kAtomic:
      on_atomic(op, flags, err);
      break;
    default:
      on_rma(op, err);
      break;
  }
  if (seen == op.expected_completions) --pending[op.ep];
}

void ApiStorm::read_cq() {
  fi_cq_tagged_entry e[16];
  fi_addr_t src[16];
  const ssize_t n = fi_cq_readfrom(cq, e, 16, src);
  for (ssize_t i = 0; i < n; ++i) {
    if (!e[i].op_context && (e[i].flags & FI_REMOTE_WRITE)) {
      on_remote_write(e[i].len, e[i].data, src[i]);
      continue;
    }
    if (Op* op = op_of(e[i].op_context, e[i].flags, 0))
      complete(*op, e[i].buf, e[i].len, 0, e[i].tag, e[i].flags, e[i].data, src[i], 0);
  }
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq, &err, 0) != 1) {
      fail("fi_cq_readerr read nothing after -FI_EAVAIL");
      return;
    }
    if (Op* op = op_of(err.op_context, err.flags, err.err))
      complete(*op, err.buf, err.len, err.olen, err.tag, err.flags, err.data, std::nullopt,
               err.err);
  } else if (n < 0 && n != -FI_EAGAIN) {
    fail("fi_cq_readfrom returned " + std::to_string(n));
  }
}

bool ApiStorm::settled(bool receives_too) const {
  if (inject_errors < injected_to_dead) return false;
  for (const Op& op : ops) {
    const bool receive = op.kind == Op::kRecv || op.kind == Op::kMulti;
    if (!ended(op) && (receives_too || !receive)) return false;
    if (op.kind == Op::kSend && op.peer != kDead && !op.matched) return false;
    if (op.kind == Op::kWrite && op.with_data && op.expect_err == 0 && !op.remote_seen)
      return false;
  }
  return true;
}

std::string ApiStorm::describe(const Op& op) {
  return "op " + std::to_string(op.id) + ": kind " + std::to_string(op.kind) + ", ep " +
         std::to_string(op.ep) + "->" + std::to_string(op.peer) + ", " + std::to_string(op.size) +
         " B, tagged " + std::to_string(op.tagged) + ", inject " + std::to_string(op.inject) +
         ", data " + std::to_string(op.with_data) + ", completions " +
         std::to_string(op.completions);
}

std::string ApiStorm::unfinished() const {
  std::string s;
  int shown = 0;
  for (const Op& op : ops) {
    const bool unmatched = op.kind == Op::kSend && op.peer != kDead && !op.matched;
    if ((ended(op) && !unmatched) || shown++ == 8) continue;
    s += " (" + describe(op) + (unmatched ? ", unreceived)" : ")");
  }
  return s;
}

void ApiStorm::check_order() {
  // Every (receive, send it took) pair, in the order the receives were posted; a
  // multi-receive buffer gives one pair per message.
  std::vector<std::pair<const Op*, const Op*>> taken;
  for (const Op& r : ops) {
    if (r.kind == Op::kRecv && r.matched) taken.emplace_back(&r, r.matched);
    if (r.kind != Op::kMulti) continue;
    for (const Op::Part& p : r.multi_parts) taken.emplace_back(&r, &ops[p.send]);
  }
  for (size_t i = 0; i < taken.size(); ++i) {
    for (size_t j = i + 1; j < taken.size(); ++j) {
      const auto [a, x] = taken[i];
      const auto [b, y] = taken[j];
      // Two messages in one buffer: on_multi checked their order.
      if (a == b || a->ep != b->ep || x->ep != y->ep || x->id < y->id) continue;
      if (can_match(*a, *y) && can_match(*b, *x)) {
        fail("receives " + std::to_string(a->id) + " and " + std::to_string(b->id) +
             " took sends " + std::to_string(x->id) + " and " + std::to_string(y->id) +
             " out of order");
        return;
      }
    }
  }
}

}  // namespace spray_fi_test::storm
