// libFuzzer target: the shared-memory datapath against a peer that writes anything into
// the memory the two share. Two endpoints of this process, `a` and `b`, exchange packets
// while the input also overwrites 32-bit words of either region's control part (header,
// inbox slots and their descriptor rings, lent flags), as a broken or hostile process
// of the same user could (shm_layout.h: such a process can corrupt what crosses, and we
// still must not read or write outside the regions). Invariants checked on each input:
//   - nothing reads or writes outside memory it owns or mapped (ASan, or a fault: every
//     received byte is read) and nothing is undefined (UBSan);
//   - a received packet is no longer than its sender's MTU and names a's or b's address
//     as its source (the region mapped, never what a slot claims). The two MTUs differ
//     (256 and 320 bytes), as endpoints of a job may, so a takes packets longer than
//     its own MTU;
//   - every call returns.
//
// Input: a sequence of operations, each an opcode byte and its arguments (missing bytes
// read as zero):
//   0/1  a sends to b / b sends to a: count (1..8), then a length byte per packet
//        (0..255 spread over 1..the sender's MTU)
//   2/3  b / a receives up to count (1..8) and holds what arrived
//   4    the oldest half of what is held is freed
//   5/6  a 32-bit word of b's / a's control part: offset (2 bytes) and value (4 bytes)
//   7    a offers a rendezvous key (1 byte) and b copies 64 bytes of this process's
//        memory under a key (1 byte)
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/mapped_shm_region.h"
#include "transport/datapath/shm/shm_datapath.h"

namespace {

using namespace spray::dp;

// Bytes of the input, read in order; zeros once it runs out.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t word(int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | byte();
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// Small regions (the geometry is the peer's to choose), so that rings fill and buffers
// run out within a few operations.
constexpr uint32_t kMtuA = 256, kMtuB = 320;
ShmConfig small_config(uint32_t mtu_bytes) {
  ShmConfig c;
  c.buffers = 8;
  c.inbox_slots = 2;
  c.ring_entries = 4;
  c.rx_views = 8;
  c.mtu_bytes = mtu_bytes;
  return c;
}

// The writable control part of the region of the endpoint at `addr` (everything before
// its packet buffers), for the "hostile peer" to write into.
struct ControlPart {
  spray::test::MappedRegion region;
  uint64_t bytes;  // of the control part, whole 32-bit words; 0 if the region is not mapped
  explicit ControlPart(const NetAddr& addr)
      : region(addr), bytes(region.base ? region.layout.buffers_offset & ~uint64_t{3} : 0) {}
  void poke(uint32_t offset, uint32_t value) {
    if (bytes == 0) return;
    auto* word = reinterpret_cast<std::atomic<uint32_t>*>(region.base + (offset * 4u) % bytes);
    word->store(value, std::memory_order_relaxed);
  }
};

struct Endpoint {
  std::unique_ptr<ShmDatapath> dp;
  std::vector<PacketBuf*> held;  // received, not yet freed
};

void send(Endpoint& from, const Endpoint& to, Input& in) {
  PacketBuf* bufs[8];
  const size_t want = 1 + in.byte() % 8;
  const size_t got = from.dp->alloc(bufs, want);
  for (size_t i = 0; i < got; ++i) {
    const uint32_t len = 1 + in.byte() * (from.dp->mtu() - 1) / 255;
    std::memset(bufs[i]->data, static_cast<int>(len), len);
    bufs[i]->len = len;
    bufs[i]->peer = to.dp->local_address();
    bufs[i]->entropy = static_cast<uint16_t>(i);
  }
  from.dp->tx_burst(bufs, got);
}

void receive(Endpoint& at, const NetAddr& a, const NetAddr& b, Input& in) {
  const auto mtu_of = [&](const NetAddr& sender) { return sender == a ? kMtuA : kMtuB; };
  PacketBuf* bufs[8];
  const size_t want = 1 + in.byte() % 8;
  const size_t got = at.dp->rx_burst(bufs, want);
  if (got > want) std::abort();
  for (size_t i = 0; i < got; ++i) {
    const PacketBuf* p = bufs[i];
    if (!(p->peer == a || p->peer == b) || p->len > mtu_of(p->peer)) {
      std::fprintf(stderr, "len %u peer %s a %s b %s\n", p->len, p->peer.to_string().c_str(),
                   a.to_string().c_str(), b.to_string().c_str());
      std::abort();
    }
    volatile uint8_t sum = 0;
    for (uint32_t k = 0; k < p->len; ++k) sum = static_cast<uint8_t>(sum + p->data[k]);
    at.held.push_back(bufs[i]);
  }
}

void free_oldest_half(Endpoint& e) {
  const size_t n = (e.held.size() + 1) / 2;
  if (n == 0) return;
  e.dp->free(e.held.data(), n);
  e.held.erase(e.held.begin(), e.held.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string error;
  Endpoint a{ShmDatapath::open(small_config(kMtuA), error), {}};
  Endpoint b{ShmDatapath::open(small_config(kMtuB), error), {}};
  if (!a.dp || !b.dp) std::abort();  // /dev/shm must work where this runs
  const NetAddr addr_a = a.dp->local_address(), addr_b = b.dp->local_address();
  ControlPart control_a(addr_a), control_b(addr_b);
  if (control_a.bytes == 0 || control_b.bytes == 0) std::abort();
  std::vector<uint8_t> memory(64, 0x5a), copy(64);
  Input in(data, size);
  while (!in.done()) {
    const int op = in.byte() % 8;
    switch (op) {
      case 0:
        send(a, b, in);
        break;
      case 1:
        send(b, a, in);
        break;
      case 2:
        receive(b, addr_a, addr_b, in);
        break;
      case 3:
        receive(a, addr_a, addr_b, in);
        break;
      case 4:
        free_oldest_half(a);
        free_oldest_half(b);
        break;
      case 5:
      case 6: {
        ControlPart& target = op == 5 ? control_b : control_a;
        const uint32_t offset = in.word(2);
        target.poke(offset, in.word(4));
        break;
      }
      case 7: {
        a.dp->offer_for_reading(in.byte());
        (void)b.dp->read_peer_memory(addr_a, in.byte(), reinterpret_cast<uint64_t>(memory.data()),
                                     copy.data(), copy.size());
        break;
      }
    }
  }
  // What is held points into the regions the endpoints map: freed before they close.
  b.dp->free(b.held.data(), b.held.size());
  a.dp->free(a.held.data(), a.held.size());
  return 0;
}
