// libFuzzer target: UET TSS (transport/tss). Each input is [flags] bytes... and is used
// twice:
//   1. As a packet an attacker puts on the wire to endpoint b, claimed from endpoint a
//      (known to b or not, trimmed or not, by flag bits 0 and 1). It must be refused:
//      forging a tag that opens takes the domain key. Nothing may be read out of bounds.
//   2. As the plaintext a seals for b, with the key of association 0 or 1 (flag bit 2;
//      both endpoints hold both keys, as in the middle of a move to a new key): b must
//      open it to the same bytes, and must refuse the sealed packet with any one bit
//      flipped (the bit chosen by the flags).
// The endpoints live across inputs, so TSCs keep growing and b's replay window moves.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "transport/tss/secure_channels.h"

namespace {

using spray::tss::OpenResult;
using spray::tss::SecureChannels;

constexpr size_t kMaxPlain = 9000;

spray::dp::NetAddr address(uint8_t host) {
  spray::dp::NetAddr a;
  a.family = spray::dp::NetAddr::Family::kIpv4;
  a.ip = {192, 168, 0, host};
  a.port = 4793;
  return a;
}

spray::tss::Key key_of(uint8_t step) {
  spray::tss::Key k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(step * i);
  return k;
}

// Endpoint `source_id` of the domain, with its second key (association 1) installed.
SecureChannels* endpoint(uint32_t source_id, const spray::dp::NetAddr& at) {
  spray::tss::TssConfig c;
  c.domain_index = 7;
  c.domain_key = key_of(3);
  c.source_id = source_id;
  auto* e = new SecureChannels(c, at);  // lives for the process, as libFuzzer's inputs do
  e->install_key(true, key_of(5));
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const spray::dp::NetAddr a_addr = address(1), b_addr = address(2);
  static SecureChannels& a = *endpoint(0xaaaa, a_addr);
  static SecureChannels& b = *endpoint(0xbbbb, b_addr);
  static bool b_knows_a = false;
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::vector<uint8_t> bytes(data + 1, data + size);

  // 1. Forged.
  std::vector<uint8_t> forged = bytes;
  const bool known = (flags & 1) != 0 && b_knows_a;
  const auto r = b.open(known ? 0 : SecureChannels::kUnknownPeer, a_addr, forged, (flags & 2) != 0);
  if (!known) b.settle(SecureChannels::kUnknownPeer);
  if (r.result == OpenResult::kOpened) std::abort();             // a forged tag was accepted
  if (r.result == OpenResult::kTrimmed && !known) std::abort();  // no key for an unknown source

  // 2. Sealed and opened.
  a.seal_with((flags & 4) != 0);
  const size_t plain = std::min(bytes.size(), kMaxPlain);
  std::vector<uint8_t> packet(SecureChannels::kOverheadBytes + plain);
  std::copy_n(bytes.begin(), plain, packet.begin() + SecureChannels::kHeaderBytes);
  const uint32_t sealed = a.seal(0, b_addr, packet, static_cast<uint32_t>(plain));
  if (sealed != packet.size()) std::abort();
  std::vector<uint8_t> altered = packet;
  const size_t bit = (size_t{flags} * 2654435761u + plain) % (altered.size() * 8);
  altered[bit / 8] = static_cast<uint8_t>(altered[bit / 8] ^ (1u << (bit % 8)));
  // The altered copy first: it must not open, and must not spend the genuine one's TSC.
  const auto bad = b.open(b_knows_a ? 0 : SecureChannels::kUnknownPeer, a_addr, altered, false);
  if (!b_knows_a) b.settle(SecureChannels::kUnknownPeer);
  if (bad.result != OpenResult::kDropped) std::abort();
  const auto good = b.open(b_knows_a ? 0 : SecureChannels::kUnknownPeer, a_addr, packet, false);
  if (good.result != OpenResult::kOpened || good.plain_bytes != plain) std::abort();
  if (!std::equal(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(plain),
                  packet.begin() + SecureChannels::kHeaderBytes)) {
    std::abort();
  }
  if (!b_knows_a) b.settle(0);
  b_knows_a = true;
  return 0;
}
