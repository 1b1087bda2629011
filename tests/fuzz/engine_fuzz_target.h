// The world fuzz_engine drives, shared with the seed writer and the seed test so that
// recorded conversations replay into exactly the engine they were recorded against.
//
// Three simulated hosts; host 0 is the target. It has receives posted (two untagged,
// two tagged matching any tag, 8 KiB each) and a 4 KiB region registered under key 42
// for remote reads and writes, so SES paths (sends, rendezvous, writes, reads,
// responses) are all reachable. It also sends two messages to host 1 from the start, one
// RUD and one ROD, so that what comes back to an initiator (ACKs, SACKs, NACKs,
// responses) is reachable too. Both are eager: a rendezvous would put host 0's buffer
// address on the wire, and a recording would not replay into another process. Once the
// RUD send has completed (host 1's ACK opened its PDC and nothing else is in flight on
// it), host 0 also sends an inject: a send nobody awaits, which goes without ACK-requested
// and whose ACK host 1 may hold, so that the held-ACK paths (a late ACK, a timeout that
// is no loss) are reachable from the initiator's side as well.
//
// The input plays host 1: the real host 1 is down, so nothing but the input reaches
// host 0. Conversations are recorded with a live host 1 (Host1::kLive), whose packets
// then replay in its place.
//
// Input format: a sequence of packets, each a 3-byte prefix then its bytes:
//   [length hi][length lo][meta] bytes...
// length is taken modulo kMaxPacketBytes + 1 and clipped to what is left; meta's bit 6
// makes the packet come from host 7 (unknown to everyone) instead of host 1, bits 0-1
// are the buffer flags (trimmed, ECN-marked) and the whole byte is the entropy value.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "nic_sim/cluster.h"

namespace spray::fuzz {

inline constexpr uint64_t kRegionKey = 42;
inline constexpr size_t kRegionBytes = 4096;
inline constexpr size_t kReceives = 4;  // recv[i]: context i, tagged when i is odd
// recv[kReceives], context kReceives: an untagged multi-receive buffer posted behind
// them, so that messages (forged ones too) also land back to back in one buffer.
inline constexpr ses::UserContext kMultiReceive = kReceives;
inline constexpr uint64_t kMultiMinFree = 256;  // bytes
inline constexpr size_t kReceiveBytes = 8192;
inline constexpr int kMaxPackets = 64;           // per input
inline constexpr size_t kMaxPacketBytes = 4096;  // the fabric's MTU
inline constexpr uint8_t kMetaUnknownHost = 0x40;
// Host 0's own sends to host 1 (both under the rendezvous threshold below).
inline constexpr ses::UserContext kRudSendContext = 100, kRodSendContext = 101;
inline constexpr size_t kRudSendBytes = 500, kRodSendBytes = 1000;
inline constexpr ses::UserContext kInjectContext = 102;
inline constexpr size_t kInjectBytes = 64;

enum class Host1 : uint8_t { kPlayedByInput, kLive };

struct EngineFuzzTarget {
  explicit EngineFuzzTarget(Host1 host1 = Host1::kPlayedByInput)
      : cluster(fabric_config(), engine_config()) {
    if (host1 == Host1::kPlayedByInput) cluster.fabric().set_host_up(1, false);
    region.assign(kRegionBytes, 0);
    (void)cluster.engine(0).register_memory({region.data(), region.size(), 0, kRegionKey,
                                             ses::access::kRemoteRead | ses::access::kRemoteWrite});
    for (size_t i = 0; i < kReceives; ++i) {
      recv[i].assign(kReceiveBytes, 0);
      (void)cluster.engine(0).post_recv(
          {recv[i].data(), recv[i].size(), uint64_t(i), i % 2 == 1, 0, ~0ULL});
    }
    recv[kReceives].assign(kReceiveBytes, 0);
    (void)cluster.engine(0).post_recv({.buffer = recv[kReceives].data(),
                                       .length = kReceiveBytes,
                                       .context = kMultiReceive,
                                       .multi = true,
                                       .multi_min_free = kMultiMinFree});
    outgoing.assign(kRudSendBytes + kRodSendBytes + kInjectBytes, 0x5a);
    (void)cluster.engine(0).send(1, outgoing.data(), kRudSendBytes, kRudSendContext);
    (void)cluster.engine(0).send(1, outgoing.data() + kRudSendBytes, kRodSendBytes, kRodSendContext,
                                 {.mode = pds::Mode::kRod});
    cluster.step();  // they leave before any input arrives, recorded or replayed alike
  }

  // Takes host 0's completions into host0_completions (they are read there, not polled
  // from the engine) and, once the RUD send has completed, posts the inject and lets it
  // leave at once, as a provider's post does. Runs after every step, in recordings and
  // replays alike, with the time of that step.
  void after_step(Time now) {
    ses::Completion c;
    while (cluster.engine(0).poll_completion(c)) {
      if (c.context == kRudSendContext && c.status == Status::kOk && !injected) {
        injected =
            cluster.engine(0).send(1, outgoing.data() + kRudSendBytes + kRodSendBytes, kInjectBytes,
                                   kInjectContext, {.completion_awaited = false}) == Status::kOk;
        cluster.engine(0).transmit(now);
      }
      host0_completions.push_back(c);
    }
  }

  static sim::FabricConfig fabric_config() {
    sim::FabricConfig f;
    f.hosts = 3;
    f.buffers = 512;
    f.nic_rx_ring = 256;
    return f;
  }
  // Small tables: cheap to build per input, and easy for the fuzzer to fill up. A low
  // rendezvous threshold (just over one packet) puts the rendezvous path within reach of
  // inputs of a few KiB. Remote accesses are reported (FI_RMA_EVENT), so that path is
  // fuzzed too; the reports change nothing on the wire.
  static engine::EngineConfig engine_config() {
    engine::EngineConfig e;
    e.max_peers = 16;
    e.pds.max_pdcs = 8;
    e.pds.window_packets = 64;
    e.ses.max_tx_messages = 64;
    e.ses.max_rx_messages = 64;
    e.ses.max_posted_receives = 16;
    e.ses.max_memory_regions = 8;
    e.ses.rendezvous_threshold_bytes = 4500;
    e.ses.report_remote_access = true;
    return e;
  }

  // Delivers the input's packets to host 0, one progress step each, then lets timers
  // and responses play out for 2 ms of virtual time.
  void feed(std::span<const uint8_t> input) {
    auto& nic = cluster.fabric().nic(0);
    for_each_packet(input, [&](std::span<const uint8_t> bytes, uint8_t meta) {
      dp::PacketBuf* b = cluster.fabric().pool().alloc();
      if (b == nullptr) return false;
      std::memcpy(b->data, bytes.data(), bytes.size());
      b->len = static_cast<uint32_t>(bytes.size());
      b->peer = dp::NetAddr::sim_host(meta & kMetaUnknownHost ? 7 : 1);
      b->flags = meta & 0x3;
      b->entropy = meta;
      if (!nic.deliver(b)) cluster.fabric().pool().release(b);
      cluster.step();
      after_step(cluster.now());
      return true;
    });
    cluster.run_until(
        [this] {
          after_step(cluster.now());
          return false;
        },
        Duration::milliseconds(2));
  }

  // Calls on_packet(bytes, meta) for each of the input's first kMaxPackets packets,
  // until it returns false.
  template <class OnPacket>
  static void for_each_packet(std::span<const uint8_t> input, OnPacket&& on_packet) {
    size_t at = 0;
    for (int packets = 0; at + 3 <= input.size() && packets < kMaxPackets; ++packets) {
      const size_t len = std::min<size_t>(
          (size_t{input[at]} << 8 | input[at + 1]) % (kMaxPacketBytes + 1), input.size() - at - 3);
      const uint8_t meta = input[at + 2];
      at += 3;
      if (!on_packet(input.subspan(at, len), meta)) return;
      at += len;
    }
  }

  sim::Cluster cluster;
  std::vector<uint8_t> region;
  std::vector<uint8_t> recv[kReceives + 1];
  std::vector<uint8_t> outgoing;                   // host 0's three sends, back to back
  std::vector<ses::Completion> host0_completions;  // in the order host 0 reported them
  bool injected = false;
};

// Appends one packet from host 1 (meta 0) in the input format; at most kMaxPacketBytes.
inline void append_packet(std::vector<uint8_t>& input, std::span<const uint8_t> packet) {
  input.push_back(static_cast<uint8_t>(packet.size() >> 8));
  input.push_back(static_cast<uint8_t>(packet.size()));
  input.push_back(0);
  input.insert(input.end(), packet.begin(), packet.end());
}

}  // namespace spray::fuzz
