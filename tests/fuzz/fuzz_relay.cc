// libFuzzer target: spray-fabric's door (FabricRelay::take) and the relay header a
// FabricDatapath decodes, on any datagram a local process could send, with processes
// coming and going on a fabric of fewer hosts than addresses. Each input is a run of
// datagrams: a length byte, a control byte, then that many bytes. The control byte's
// low three bits choose the sender (one of six addresses), bit 3 collects what the
// fabric has delivered so far, and the high four bits how far time moves on after it
// (3 us plus 16 us a step, so hosts go idle and are reclaimed). Invariants checked:
//   - nothing reads outside a datagram (ASan) or hits undefined behaviour (UBSan);
//   - every datagram is either taken or refused with a counted reason (new destinations
//     at odd ports are refused by the check);
//   - what the fabric delivers goes to a host it gave out, with a header that decodes
//     and names another such host, never more bytes than were taken, and from and to
//     two addresses a datagram that was taken went between: a reclaimed host never
//     delivers to its newcomer, or in its name, what its old address sent or was sent;
//   - a header that decodes re-encodes to the same bytes (flags and address included).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "nic_sim/fabric_relay.h"

namespace {

using namespace spray;

dp::NetAddr sender(uint8_t which) {
  dp::NetAddr a;
  a.family = dp::NetAddr::Family::kIpv4;
  a.ip = {127, 0, 0, 1};
  a.port = static_cast<uint16_t>(5000 + 8 * (which % 6));
  return a;
}

bool known_host(const sim::FabricRelay& relay, const dp::NetAddr& a) {
  for (uint32_t h = 0; h < relay.hosts_in_use(); ++h) {
    if (relay.address_of(h) == a) return true;
  }
  return false;
}

using Exchange = std::pair<dp::NetAddr, dp::NetAddr>;  // (from, to) of a taken datagram

// Collects everything delivered by `now` and checks it against what was taken.
void collect_and_check(sim::FabricRelay& relay, Time now, size_t longest,
                       const std::vector<Exchange>& taken) {
  std::array<sim::FabricRelay::Outgoing, 8> out;
  for (;;) {
    const size_t n = relay.collect(now, out);
    for (size_t i = 0; i < n; ++i) {
      dp::RelayHeader h;
      if (!known_host(relay, out[i].to) ||
          !dp::decode_relay_header(out[i].header.data(), out[i].header.size(), h) ||
          !known_host(relay, h.other) || out[i].packet->len > longest)
        std::abort();
      if (std::find(taken.begin(), taken.end(), Exchange{h.other, out[i].to}) == taken.end())
        std::abort();  // between two addresses that never exchanged a datagram
    }
    relay.release({out.data(), n});
    if (n < out.size()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sim::FabricConfig c;
  c.hosts = 4;
  c.paths = 4;
  c.mtu_bytes = 256;
  c.buffers = 64;
  c.nic_rx_ring = 64;
  c.host_link.capacity_bytes = c.path_link.capacity_bytes = 4096;  // packets leave in ~30 us
  c.faults.duplicate = 0.2;
  c.faults.trim = 0.2;
  sim::FabricRelay relay(c, Duration::microseconds(50));
  relay.check_new_destinations([](const dp::NetAddr& a) { return a.port % 2 == 0; });
  Time now{};
  uint64_t datagrams = 0;
  size_t longest = 0;
  std::vector<Exchange> taken;
  for (size_t at = 0; at + 2 <= size;) {
    const size_t len = std::min<size_t>(data[at], size - at - 2);
    const uint8_t control = data[at + 1];
    const dp::NetAddr from = sender(control & 0x07);
    const uint8_t* bytes = data + at + 2;
    at += 2 + len;
    ++datagrams;
    dp::RelayHeader h;
    const bool decodes = dp::decode_relay_header(bytes, len, h);
    if (decodes) {
      std::array<uint8_t, dp::kRelayHeaderBytes> again{};
      dp::encode_relay_header(h, again.data());
      dp::RelayHeader h2;
      if (!dp::decode_relay_header(again.data(), again.size(), h2) || h2.other != h.other ||
          h2.entropy != h.entropy || h2.flags != h.flags)
        std::abort();
    }
    // Copied so ASan sees the datagram's true end.
    const std::vector<uint8_t> datagram(bytes, bytes + len);
    if (relay.take(datagram, from, now)) {
      if (!decodes) std::abort();
      longest = std::max(longest, len - dp::kRelayHeaderBytes);
      taken.emplace_back(from, h.other);
    }
    if (control & 0x08) collect_and_check(relay, now, longest, taken);
    now += Duration::microseconds(3 + 16 * (control >> 4));
  }
  const sim::RelayStats& s = relay.stats();
  if (s.taken + s.refused() != datagrams) std::abort();
  collect_and_check(relay, now + Duration::milliseconds(10), longest, taken);
  return 0;
}
