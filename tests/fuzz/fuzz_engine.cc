// libFuzzer target: arbitrary packets into a live engine. The input is split into
// packets (2-byte length prefixes); each arrives at host 0 from host 1 or an unknown
// host, optionally flagged trimmed or ECN-marked. Host 0 has receives posted and a
// registered region, so SES paths (sends, writes, reads, responses) are reachable.
// The engine must never crash, leak, read out of bounds or write outside the region.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nic_sim/cluster.h"

namespace {

using namespace spray;

struct Target {
  Target() : cluster(config(), engine_config()) {
    region.assign(4096, 0);
    guard.assign(64, 0xab);
    (void)cluster.engine(0).register_memory({region.data(), region.size(), 0, 42,
                                             ses::access::kRemoteRead | ses::access::kRemoteWrite});
    for (int i = 0; i < 4; ++i) {
      recv[i].assign(8192, 0);
      (void)cluster.engine(0).post_recv(
          {recv[i].data(), recv[i].size(), uint64_t(i), i % 2 == 1, 0, ~0ULL});
    }
  }
  static sim::FabricConfig config() {
    sim::FabricConfig f;
    f.hosts = 3;
    f.buffers = 512;
    f.nic_rx_ring = 256;
    return f;
  }
  // Small tables: cheap to build per input, and easy for the fuzzer to fill up.
  static engine::EngineConfig engine_config() {
    engine::EngineConfig e;
    e.max_peers = 16;
    e.pds.max_pdcs = 8;
    e.pds.window_packets = 64;
    e.ses.max_tx_messages = 64;
    e.ses.max_rx_messages = 64;
    e.ses.max_posted_receives = 16;
    e.ses.max_memory_regions = 8;
    return e;
  }
  sim::Cluster cluster;
  std::vector<uint8_t> region, guard;
  std::vector<uint8_t> recv[4];
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Target t;
  auto& nic = t.cluster.fabric().nic(0);
  size_t at = 0;
  int packets = 0;
  while (at + 3 <= size && packets < 64) {
    const size_t len =
        std::min<size_t>((size_t{data[at]} << 8 | data[at + 1]) % 4097, size - at - 3);
    const uint8_t meta = data[at + 2];
    at += 3;
    dp::PacketBuf* b = t.cluster.fabric().pool().alloc();
    if (b == nullptr) break;
    std::memcpy(b->data, data + at, len);
    b->len = static_cast<uint32_t>(len);
    b->peer = dp::NetAddr::sim_host(meta & 0x40 ? 7 : 1);  // 7: a host nobody knows
    b->flags = meta & 0x3;
    b->entropy = meta;
    if (!nic.deliver(b)) t.cluster.fabric().pool().release(b);
    at += len;
    ++packets;
    t.cluster.step();
  }
  // Let timers and responses play out briefly.
  t.cluster.run_until([] { return false; }, Duration::milliseconds(2));
  for (uint8_t g : t.guard) {
    if (g != 0xab) std::abort();
  }
  return 0;
}
