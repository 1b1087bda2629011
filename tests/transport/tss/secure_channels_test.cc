// SecureChannels between endpoints on made-up addresses: what one seals only its
// addressee opens, once; a forger without the domain key, a recorded packet sent again,
// one redirected to another endpoint or claimed from another source, and packets of
// another domain or epoch are all refused and counted.
#include "transport/tss/secure_channels.h"

#include <gtest/gtest.h>

#include <vector>

#include "transport/wire/pds_header.h"

namespace spray::tss {
namespace {

constexpr uint32_t kUnknown = SecureChannels::kUnknownPeer;

dp::NetAddr udp_address(uint8_t host, uint16_t port) {
  dp::NetAddr a;
  a.family = dp::NetAddr::Family::kIpv4;
  a.ip = {10, 0, 0, host};
  a.port = port;
  return a;
}

TssConfig config(uint32_t source_id, uint8_t key_seed = 1) {
  TssConfig c;
  c.domain_index = 0x123456;
  for (size_t i = 0; i < c.domain_key.size(); ++i)
    c.domain_key[i] = static_cast<uint8_t>(key_seed + i);
  c.epoch = 7;
  c.source_id = source_id;
  return c;
}

// A packet as the engine builds it: room for the header, `plain` bytes of "PDS header and
// on", room for the tag.
struct Packet {
  std::vector<uint8_t> bytes;
  uint32_t plain = 0;
};

Packet plaintext(uint32_t plain, uint8_t fill) {
  Packet p;
  p.plain = plain;
  p.bytes.assign(SecureChannels::kOverheadBytes + plain, 0);
  for (uint32_t i = 0; i < plain; ++i)
    p.bytes[SecureChannels::kHeaderBytes + i] = static_cast<uint8_t>(fill + i);
  return p;
}

std::vector<uint8_t> sealed(SecureChannels& from, uint32_t peer, const dp::NetAddr& to,
                            uint32_t plain, uint8_t fill) {
  Packet p = plaintext(plain, fill);
  const uint32_t len = from.seal(peer, to, p.bytes, p.plain);
  EXPECT_EQ(len, p.bytes.size());
  return p.bytes;
}

bool carries(const std::vector<uint8_t>& opened, uint32_t plain, uint8_t fill) {
  for (uint32_t i = 0; i < plain; ++i) {
    if (opened[SecureChannels::kHeaderBytes + i] != static_cast<uint8_t>(fill + i)) return false;
  }
  return true;
}

class Channels : public ::testing::Test {
 protected:
  dp::NetAddr a_addr = udp_address(1, 4000), b_addr = udp_address(2, 4000),
              c_addr = udp_address(2, 4008);
  SecureChannels a{config(0xa1), a_addr};
  SecureChannels b{config(0xb2), b_addr};
  SecureChannels c{config(0xc3), c_addr};
};

TEST_F(Channels, what_a_seals_for_b_opens_at_b_intact_and_the_wire_shows_no_plaintext) {
  std::vector<uint8_t> pkt = sealed(a, 0, b_addr, 300, 0x40);
  EXPECT_FALSE(carries(pkt, 300, 0x40));
  // First packet from a: b does not know it yet (the engine learns it after opening).
  auto r = b.open(kUnknown, a_addr, pkt, false);
  ASSERT_EQ(r.result, OpenResult::kOpened);
  EXPECT_EQ(r.plain_bytes, 300u);
  EXPECT_TRUE(carries(pkt, 300, 0x40));
  b.settle(5);  // b's engine calls a peer 5
  for (uint8_t i = 0; i < 50; ++i) {
    pkt = sealed(a, 0, b_addr, 100u + i, i);
    r = b.open(5, a_addr, pkt, false);
    ASSERT_EQ(r.result, OpenResult::kOpened) << int{i};
    EXPECT_TRUE(carries(pkt, 100u + i, i));
  }
  EXPECT_EQ(a.stats().sealed, 51u);
  EXPECT_EQ(b.stats().opened, 51u);
}

TEST_F(Channels, a_packet_sent_again_is_refused_as_a_replay) {
  const std::vector<uint8_t> first = sealed(a, 0, b_addr, 64, 1);
  const std::vector<uint8_t> second = sealed(a, 0, b_addr, 64, 2);
  std::vector<uint8_t> copy = first;
  ASSERT_EQ(b.open(kUnknown, a_addr, copy, false).result, OpenResult::kOpened);
  b.settle(0);
  copy = second;
  ASSERT_EQ(b.open(0, a_addr, copy, false).result, OpenResult::kOpened);
  for (const auto& recorded : {first, second, first}) {
    copy = recorded;
    EXPECT_EQ(b.open(0, a_addr, copy, false).result, OpenResult::kDropped);
  }
  EXPECT_EQ(b.stats().rx_replayed, 3u);
}

TEST_F(Channels, a_packet_opens_only_at_its_addressee_and_only_from_its_source) {
  const std::vector<uint8_t> for_b = sealed(a, 0, b_addr, 64, 1);
  std::vector<uint8_t> copy = for_b;
  EXPECT_EQ(c.open(kUnknown, a_addr, copy, false).result, OpenResult::kDropped);  // redirected
  copy = for_b;
  EXPECT_EQ(b.open(kUnknown, c_addr, copy, false).result, OpenResult::kDropped);  // other source
  EXPECT_EQ(c.stats().rx_forged, 1u);
  EXPECT_EQ(b.stats().rx_forged, 1u);
  copy = for_b;
  EXPECT_EQ(b.open(kUnknown, a_addr, copy, false).result, OpenResult::kOpened);  // still fresh
}

TEST_F(Channels, an_altered_byte_anywhere_is_refused) {
  const std::vector<uint8_t> good = sealed(a, 0, b_addr, 200, 9);
  // Header bytes 4-15 (SSI, epoch, TSC) and everything after; bytes 0-3 name the domain.
  for (size_t at = 4; at < good.size(); at += 3) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x20;
    EXPECT_EQ(b.open(kUnknown, a_addr, bad, false).result, OpenResult::kDropped) << at;
  }
  std::vector<uint8_t> copy = good;
  EXPECT_EQ(b.open(kUnknown, a_addr, copy, false).result, OpenResult::kOpened);
}

TEST_F(Channels, another_domain_key_sdi_or_epoch_or_no_tss_at_all_is_refused) {
  SecureChannels outsider(config(0xa1, /*key_seed=*/99), a_addr);  // same SSI, other key
  std::vector<uint8_t> pkt = sealed(outsider, 0, b_addr, 64, 1);
  EXPECT_EQ(b.open(kUnknown, a_addr, pkt, false).result, OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_forged, 1u);

  for (auto change :
       {+[](TssConfig& cfg) { cfg.domain_index = 1; }, +[](TssConfig& cfg) { cfg.epoch = 8; }}) {
    TssConfig changed = config(0xa1);
    change(changed);
    SecureChannels other(changed, a_addr);
    pkt = sealed(other, 0, b_addr, 64, 1);
    EXPECT_EQ(b.open(kUnknown, a_addr, pkt, false).result, OpenResult::kDropped);
  }
  EXPECT_EQ(b.stats().rx_other_domain, 2u);

  std::vector<uint8_t> plain(100, 0);  // a PDS ACK, unsealed
  wire::PdsAck ack;
  ASSERT_GT(wire::encode(ack, plain), 0u);
  EXPECT_EQ(b.open(kUnknown, a_addr, plain, false).result, OpenResult::kDropped);
  std::vector<uint8_t> short_packet = sealed(a, 0, b_addr, 0, 0);
  short_packet.resize(SecureChannels::kOverheadBytes - 1);
  EXPECT_EQ(b.open(kUnknown, a_addr, short_packet, false).result, OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_not_secured, 2u);
  EXPECT_EQ(b.stats().opened, 0u);
}

TEST_F(Channels, a_restarted_source_starts_a_new_key_and_its_counters_from_zero) {
  for (int i = 0; i < 10; ++i) {
    std::vector<uint8_t> pkt = sealed(a, 0, b_addr, 64, 1);
    ASSERT_EQ(b.open(i == 0 ? kUnknown : 0, a_addr, pkt, false).result, OpenResult::kOpened);
    if (i == 0) b.settle(0);
  }
  SecureChannels restarted(config(0xa9), a_addr);  // same address, a new SSI
  std::vector<uint8_t> pkt = sealed(restarted, 0, b_addr, 64, 3);
  ASSERT_EQ(b.open(0, a_addr, pkt, false).result, OpenResult::kOpened);
  EXPECT_TRUE(carries(pkt, 64, 3));
}

TEST_F(Channels, a_trimmed_packet_from_a_known_source_yields_its_headers_unverified) {
  std::vector<uint8_t> first = sealed(a, 0, b_addr, 64, 1);
  ASSERT_EQ(b.open(kUnknown, a_addr, first, false).result, OpenResult::kOpened);
  b.settle(0);
  std::vector<uint8_t> trimmed = sealed(a, 0, b_addr, 4000, 7);
  trimmed.resize(SecureChannels::kHeaderBytes + 40);  // a switch kept the first 56 bytes
  auto r = b.open(0, a_addr, trimmed, true);
  ASSERT_EQ(r.result, OpenResult::kTrimmed);
  EXPECT_EQ(r.plain_bytes, 40u);
  EXPECT_TRUE(carries(trimmed, 40, 7));
  EXPECT_EQ(b.stats().rx_trimmed, 1u);
  // From a source b holds no key for, a trim is not worth a key derivation: dropped.
  std::vector<uint8_t> from_c = sealed(c, 0, b_addr, 4000, 7);
  from_c.resize(SecureChannels::kHeaderBytes + 40);
  EXPECT_EQ(b.open(kUnknown, c_addr, from_c, true).result, OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_trimmed_unknown, 1u);
}

TEST_F(Channels, an_unsettled_source_is_forgotten) {
  std::vector<uint8_t> pkt = sealed(a, 0, b_addr, 64, 1);
  ASSERT_EQ(b.open(kUnknown, a_addr, pkt, false).result, OpenResult::kOpened);
  b.settle(kUnknown);  // the engine did not take it (another job, or its table is full)
  // A trim from it now finds no key: nothing of it was kept.
  std::vector<uint8_t> trimmed = sealed(a, 0, b_addr, 4000, 7);
  trimmed.resize(SecureChannels::kHeaderBytes + 40);
  EXPECT_EQ(b.open(0, a_addr, trimmed, true).result, OpenResult::kDropped);
}

// A settle after a refused packet keeps nothing of it: the channel keeps its key and its
// replay window, so a recorded packet is still refused.
TEST_F(Channels, settling_after_a_refused_packet_keeps_the_channels_key_and_window) {
  const std::vector<uint8_t> first = sealed(a, 0, b_addr, 64, 1);
  std::vector<uint8_t> copy = first;
  ASSERT_EQ(b.open(kUnknown, a_addr, copy, false).result, OpenResult::kOpened);
  b.settle(0);
  std::vector<uint8_t> forged = sealed(a, 0, b_addr, 64, 2);
  forged[30] ^= 1;
  EXPECT_EQ(b.open(kUnknown, a_addr, forged, false).result, OpenResult::kDropped);
  b.settle(0);
  copy = first;
  EXPECT_EQ(b.open(0, a_addr, copy, false).result, OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_replayed, 1u);
}

TEST_F(Channels, a_buffer_too_small_for_header_and_tag_is_not_sealed) {
  Packet p = plaintext(100, 1);
  EXPECT_EQ(a.seal(0, b_addr, std::span(p.bytes).first(p.bytes.size() - 1), p.plain), 0u);
  EXPECT_EQ(a.stats().tx_failed, 1u);
}

}  // namespace
}  // namespace spray::tss
