// libFuzzer target: spray-fabric's door (FabricRelay::take) and the relay header a
// FabricDatapath decodes, on any datagram a local process could send. Each input is a
// run of datagrams: a length byte, a byte choosing the sender (one of three addresses),
// then that many bytes. Invariants checked:
//   - nothing reads outside a datagram (ASan) or hits undefined behaviour (UBSan);
//   - every datagram is either taken or refused with a counted reason (new destinations
//     at odd ports are refused by the check);
//   - what the fabric delivers goes to a host it gave out, with a header that decodes and
//     names another such host, and never more bytes than were taken;
//   - a header that decodes re-encodes to the same bytes (flags and address included).
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nic_sim/fabric_relay.h"

namespace {

using namespace spray;

dp::NetAddr sender(uint8_t which) {
  dp::NetAddr a;
  a.family = dp::NetAddr::Family::kIpv4;
  a.ip = {127, 0, 0, 1};
  a.port = static_cast<uint16_t>(5000 + 8 * (which % 3));
  return a;
}

bool known_host(const sim::FabricRelay& relay, const dp::NetAddr& a) {
  for (uint32_t h = 0; h < relay.hosts_in_use(); ++h) {
    if (relay.address_of(h) == a) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sim::FabricConfig c;
  c.hosts = 4;
  c.paths = 4;
  c.mtu_bytes = 256;
  c.buffers = 64;
  c.nic_rx_ring = 64;
  c.faults.duplicate = 0.2;
  c.faults.trim = 0.2;
  sim::FabricRelay relay(c);
  relay.check_new_destinations([](const dp::NetAddr& a) { return a.port % 2 == 0; });
  Time now{};
  uint64_t datagrams = 0;
  size_t longest = 0;
  for (size_t at = 0; at + 2 <= size;) {
    const size_t len = std::min<size_t>(data[at], size - at - 2);
    const dp::NetAddr from = sender(data[at + 1]);
    const uint8_t* bytes = data + at + 2;
    at += 2 + len;
    ++datagrams;
    dp::RelayHeader h;
    if (dp::decode_relay_header(bytes, len, h)) {
      std::array<uint8_t, dp::kRelayHeaderBytes> again{};
      dp::encode_relay_header(h, again.data());
      dp::RelayHeader h2;
      if (!dp::decode_relay_header(again.data(), again.size(), h2) || h2.other != h.other ||
          h2.entropy != h.entropy || h2.flags != h.flags)
        std::abort();
    }
    // Copied so ASan sees the datagram's true end.
    const std::vector<uint8_t> datagram(bytes, bytes + len);
    if (relay.take(datagram, from, now)) longest = std::max(longest, len - dp::kRelayHeaderBytes);
    now += Duration::microseconds(3);
  }
  const sim::RelayStats& s = relay.stats();
  if (s.taken + s.refused() != datagrams) std::abort();
  std::array<sim::FabricRelay::Outgoing, 8> out;
  for (;;) {
    const size_t n = relay.collect(now + Duration::milliseconds(10), out);
    for (size_t i = 0; i < n; ++i) {
      dp::RelayHeader h;
      if (!known_host(relay, out[i].to) ||
          !dp::decode_relay_header(out[i].header.data(), out[i].header.size(), h) ||
          !known_host(relay, h.other) || out[i].packet->len > longest)
        std::abort();
    }
    relay.release({out.data(), n});
    if (n < out.size()) break;
  }
  return 0;
}
