#include "tests/fuzz/engine_conversations.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/fuzz/engine_fuzz_target.h"

namespace spray::fuzz {
namespace {

using sim::SimEngine;

constexpr pds::PeerIndex kTarget = 0;  // host 0, as host 1 knows it
// Contexts of host 1's receives for host 0's sends; its own operations use smaller ones.
constexpr ses::UserContext kHost1Receives = 1000;

// Starts host 1's operations; returns how many completions host 1 will report.
using Start = std::function<int(SimEngine& host1, std::vector<uint8_t>& local)>;
// Runs on host 1 once everything has completed, again on every step until it returns
// true (a close waits for an idle PDC).
using Finish = std::function<bool(SimEngine& host1)>;

void must(Status s, const char* what) {
  if (s != Status::kOk) throw std::runtime_error(std::string("host 1 could not start a ") + what);
}

void send(SimEngine& e, std::vector<uint8_t>& local, size_t bytes, ses::UserContext ctx,
          const ses::SendSpec& spec = {}) {
  const size_t at = local.size();
  if (at + bytes > local.capacity()) throw std::runtime_error("host 1's buffer is too small");
  for (size_t i = 0; i < bytes; ++i) local.push_back(conversation_byte(i));
  must(e.send(kTarget, local.data() + at, bytes, ctx, spec), "send");
}

Conversation record(std::string name, const Start& start, const Finish& finish = {}) {
  EngineFuzzTarget t(Host1::kLive);
  SimEngine& host1 = t.cluster.engine(1);
  // Receives for host 0's three sends (the inject among them).
  constexpr size_t kHost0Sends = 3;
  std::vector<uint8_t> inbox(kHost0Sends * kReceiveBytes);
  for (size_t i = 0; i < kHost0Sends; ++i) {
    must(host1.post_recv({inbox.data() + i * kReceiveBytes, kReceiveBytes, kHost1Receives + i}),
         "receive");
  }
  // Host 1's memory for its operations. Static, so that the addresses a rendezvous puts
  // on the wire are the same in every recording this process makes.
  static std::vector<uint8_t> local;
  local.clear();
  local.reserve(64 * 1024);  // operations hold pointers into it: it never grows past this
  const int operations = start(host1, local);

  sim::Fabric& fabric = t.cluster.fabric();
  sim::SimNic& nic0 = fabric.nic(0);
  Conversation out{std::move(name), {}};
  int packets = 0, completed = 0;
  size_t host0_sends = 0, host0_seen = 0;  // host0_seen: of t.host0_completions
  Time now{}, quiet_until{};
  const Time limit = Time{} + Duration::milliseconds(50);
  auto all_done = [&] { return completed == operations && host0_sends == kHost0Sends; };
  // Once everything is done (and `finish` has run), 1 ms more: acknowledgements that
  // follow the last completion (of a read response, of a close) belong to it too.
  bool finished = false;
  while (now < limit && (!finished || now < quiet_until)) {
    fabric.advance_to(now);
    dp::PacketBuf* bufs[256];
    const size_t n = nic0.rx_burst(bufs, 256);
    for (size_t i = 0; i < n; ++i) {  // recorded, then handed back in the same order
      if (bufs[i]->peer == dp::NetAddr::sim_host(1)) {
        if (bufs[i]->len > kMaxPacketBytes) throw std::runtime_error("a packet beyond the MTU");
        append_packet(out.input, {bufs[i]->data, bufs[i]->len});
        ++packets;
      }
      if (!nic0.deliver(bufs[i])) throw std::runtime_error("host 0's ring overflowed");
    }
    size_t work = 0;
    for (uint32_t h = 0; h < t.cluster.hosts(); ++h) work += t.cluster.engine(h).progress(now);
    ses::Completion c;
    while (host1.poll_completion(c)) {
      if (c.status != Status::kOk) throw std::runtime_error(out.name + ": an operation failed");
      if (c.context < kHost1Receives) ++completed;
    }
    t.after_step(now);  // host 0's completions, and its inject once the RUD send is done
    for (; host0_seen < t.host0_completions.size(); ++host0_seen) {
      const ses::Completion& sent = t.host0_completions[host0_seen];
      if (sent.context != kRudSendContext && sent.context != kRodSendContext &&
          sent.context != kInjectContext) {
        continue;
      }
      if (sent.status != Status::kOk) throw std::runtime_error(out.name + ": host 0's send failed");
      ++host0_sends;
    }
    if (all_done() && !finished && (!finish || finish(host1))) {
      finished = true;
      quiet_until = now + Duration::milliseconds(1);
    }
    now = work > 0 ? now + Duration::microseconds(1)
                   : std::clamp(fabric.next_event(), now + Duration::microseconds(1),
                                now + Duration::microseconds(50));
  }
  if (!finished) throw std::runtime_error(out.name + ": did not complete");
  out.acks_held_by_host1 = host1.pds().stats().acks_held;
  if (packets > kMaxPackets) throw std::runtime_error(out.name + ": too many packets");
  return out;
}

}  // namespace

std::vector<Conversation> record_engine_conversations() {
  const ses::SendSpec rod{.mode = pds::Mode::kRod};
  std::vector<Conversation> all;
  // Only the answers to host 0's own two sends; every other conversation has them too.
  all.push_back(record("answers_to_host0", [](SimEngine&, auto&) { return 0; }));
  all.push_back(record("send_rud", [](SimEngine& e, auto& local) {
    send(e, local, 200, 1);
    return 1;
  }));
  all.push_back(record("send_rod_tagged", [](SimEngine& e, auto& local) {
    send(e, local, 300, 1, {.tagged = true, .tag = 7, .mode = pds::Mode::kRod});
    return 1;
  }));
  all.push_back(record("send_with_data", [](SimEngine& e, auto& local) {
    send(e, local, 64, 1, {.has_data = true, .data = 0x1234});
    return 1;
  }));
  all.push_back(record("send_two_packets", [](SimEngine& e, auto& local) {
    send(e, local, 4400, 1);
    return 1;
  }));
  all.push_back(record("send_rendezvous", [](SimEngine& e, auto& local) {
    send(e, local, 5000, 1);
    return 1;
  }));
  all.push_back(record("sends_rod_in_order", [&](SimEngine& e, auto& local) {
    for (ses::UserContext ctx = 1; ctx <= 3; ++ctx) send(e, local, 100, ctx, rod);
    return 3;
  }));
  all.push_back(record("write", [](SimEngine& e, auto& local) {
    for (size_t i = 0; i < 256; ++i) local.push_back(conversation_byte(i));
    must(e.write(kTarget, local.data(), 256, 128, kRegionKey, 1), "write");
    return 1;
  }));
  all.push_back(record("read", [](SimEngine& e, auto& local) {
    local.resize(256);
    must(e.read(kTarget, local.data(), 256, 512, kRegionKey, 1), "read");
    return 1;
  }));
  // Atomics on the region: a fetching sum of two uint64 at 64 (operands 5 and 6), and a
  // compare-and-swap at 96 (0 to 0x77, its values in the extension header).
  all.push_back(record("atomic_fetch_add", [](SimEngine& e, auto& local) {
    local.assign(32, 0);
    const uint64_t operands[2] = {5, 6};
    std::memcpy(local.data(), operands, sizeof operands);
    const ses::AtomicSpec spec{
        wire::AmoOpcode::kSum, wire::AmoDatatype::kUint64, 2, local.data(), nullptr,
        local.data() + 16};
    must(e.atomic(kTarget, spec, 64, kRegionKey, 1), "atomic");
    return 1;
  }));
  all.push_back(record("atomic_compare_swap", [](SimEngine& e, auto& local) {
    local.assign(24, 0);
    const uint64_t swap = 0x77, compare = 0;
    std::memcpy(local.data(), &swap, 8);
    std::memcpy(local.data() + 8, &compare, 8);
    const ses::AtomicSpec spec{wire::AmoOpcode::kCompareSwap,
                               wire::AmoDatatype::kUint64,
                               1,
                               local.data(),
                               local.data() + 8,
                               local.data() + 16};
    must(e.atomic(kTarget, spec, 96, kRegionKey, 1), "atomic");
    return 1;
  }));
  all.push_back(record(
      "send_then_close",
      [](SimEngine& e, auto& local) {
        send(e, local, 100, 1);
        return 1;
      },
      [](SimEngine& e) {
        const Status s = e.close(kTarget);
        if (s != Status::kAgain) must(s, "close");
        return s == Status::kOk;
      }));
  return all;
}

}  // namespace spray::fuzz
