// SecureChannels re-keying: a domain moving from one key to another while packets flow.
// Packets sealed under either association open while both keys are installed, and
// interleave freely; a receiver without the new key refuses its packets; a retired key's
// packets are refused; a key installed again never repeats an IV; the sealing key cannot
// be retired; and a replay stays a replay across the move.
#include <gtest/gtest.h>

#include <vector>

#include "transport/tss/secure_channels.h"
#include "transport/wire/tss_header.h"

namespace spray::tss::rekeying {
namespace {

constexpr uint32_t kUnknown = SecureChannels::kUnknownPeer;

dp::NetAddr address(uint8_t host) {
  dp::NetAddr a;
  a.family = dp::NetAddr::Family::kIpv4;
  a.ip = {10, 0, 0, host};
  a.port = 4000;
  return a;
}

Key key_of(uint8_t seed) {
  Key k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed * 7 + i);
  return k;
}

TssConfig config(uint32_t source_id) {
  TssConfig c;
  c.domain_index = 42;
  c.domain_key = key_of(1);  // association 0, sealing
  c.source_id = source_id;
  return c;
}

// A sealed packet of `plain` bytes of `fill` from `from` to `to` (peer index 0).
std::vector<uint8_t> sealed(SecureChannels& from, const dp::NetAddr& to, uint8_t fill) {
  std::vector<uint8_t> p(SecureChannels::kOverheadBytes + 64, fill);
  EXPECT_EQ(from.seal(0, to, p, 64), p.size());
  return p;
}

wire::TssHeader header_of(const std::vector<uint8_t>& packet) {
  wire::TssHeader h;
  EXPECT_EQ(wire::decode(packet, h), wire::DecodeError::kOk);
  return h;
}

OpenResult open_at(SecureChannels& at, const dp::NetAddr& from, std::vector<uint8_t> packet) {
  return at.open(0, from, packet, false).result;
}

struct Rekeying : ::testing::Test {
  dp::NetAddr a_addr = address(1), b_addr = address(2);
  SecureChannels a{config(0xa), a_addr};
  SecureChannels b{config(0xb), b_addr};
  void SetUp() override {
    // b knows a as peer 0 from a first packet, as an engine would after settle().
    std::vector<uint8_t> first = sealed(a, b_addr, 1);
    ASSERT_EQ(b.open(kUnknown, a_addr, first, false).result, OpenResult::kOpened);
    b.settle(0);
  }
};

TEST_F(Rekeying, a_domain_moves_to_a_new_key_without_a_refused_packet) {
  // 1. Both install the new key under association 1: a still seals with the old one.
  a.install_key(true, key_of(2));
  b.install_key(true, key_of(2));
  std::vector<uint8_t> old_key = sealed(a, b_addr, 2);
  const std::vector<uint8_t> late = sealed(a, b_addr, 3);  // delayed past the retirement
  EXPECT_FALSE(header_of(old_key).association);
  // 2. a seals with the new key; packets of both keys, interleaved, all open at b.
  ASSERT_TRUE(a.seal_with(true));
  std::vector<uint8_t> new_key = sealed(a, b_addr, 3);
  EXPECT_TRUE(header_of(new_key).association);
  EXPECT_EQ(open_at(b, a_addr, new_key), OpenResult::kOpened);
  EXPECT_EQ(open_at(b, a_addr, old_key), OpenResult::kOpened);  // in flight before the move
  for (uint8_t i = 0; i < 20; ++i) {
    EXPECT_EQ(open_at(b, a_addr, sealed(a, b_addr, i)), OpenResult::kOpened) << int{i};
  }
  // 3. b seals with the new key too, and both retire the old one: a's old-key packets
  // still on their way are refused, new ones open.
  ASSERT_TRUE(b.seal_with(true));
  ASSERT_TRUE(b.retire_key(false));
  ASSERT_TRUE(a.retire_key(false));
  EXPECT_EQ(open_at(b, a_addr, late), OpenResult::kDropped);
  EXPECT_EQ(open_at(b, a_addr, sealed(a, b_addr, 9)), OpenResult::kOpened);
  EXPECT_EQ(b.stats().opened, 1u + 22u + 1u);
  EXPECT_EQ(b.stats().opened_an1, 22u);
  EXPECT_EQ(a.stats().sealed_an1, 22u);
  EXPECT_EQ(b.stats().rx_other_domain, 1u);  // the late old-key packet
  EXPECT_EQ(b.stats().rx_forged + b.stats().rx_replayed, 0u);
}

TEST_F(Rekeying, a_receiver_without_the_new_key_refuses_it_until_it_installs_it) {
  a.install_key(true, key_of(2));
  ASSERT_TRUE(a.seal_with(true));
  const std::vector<uint8_t> packet = sealed(a, b_addr, 5);
  EXPECT_EQ(open_at(b, a_addr, packet), OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_other_domain, 1u);
  b.install_key(true, key_of(3));  // the wrong new key: forged
  EXPECT_EQ(open_at(b, a_addr, packet), OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_forged, 1u);
  b.install_key(true, key_of(2));
  EXPECT_EQ(open_at(b, a_addr, packet), OpenResult::kOpened);
}

TEST_F(Rekeying, the_sealing_key_cannot_be_retired_nor_a_missing_one_seal) {
  EXPECT_FALSE(a.seal_with(true));  // no key under association 1 yet
  EXPECT_FALSE(a.retire_key(false));
  EXPECT_TRUE(a.has_key(false));
  EXPECT_FALSE(a.sealing_association());
  EXPECT_EQ(open_at(b, a_addr, sealed(a, b_addr, 1)), OpenResult::kOpened);
}

// IVs never repeat under one key: a key installed again under its association (the
// same key, or back after another) continues that association's counter.
TEST_F(Rekeying, counters_run_on_across_keys_so_no_iv_repeats) {
  const uint64_t before = header_of(sealed(a, b_addr, 1)).tsc;
  a.install_key(false, key_of(4));  // another key under the sealing association
  const uint64_t after_new_key = header_of(sealed(a, b_addr, 1)).tsc;
  a.install_key(false, key_of(1));  // and the first key again
  const uint64_t after_old_again = header_of(sealed(a, b_addr, 1)).tsc;
  EXPECT_GT(after_new_key, before);
  EXPECT_GT(after_old_again, after_new_key);
  // The receiver, with the first key all along, opens what a seals with it now.
  std::vector<uint8_t> p = sealed(a, b_addr, 2);
  EXPECT_EQ(b.open(0, a_addr, p, false).result, OpenResult::kOpened);
}

// A key retired and installed again later: what was recorded under it before does not
// open again (the window outlives the key), while the sender goes on under it.
TEST_F(Rekeying, a_packet_recorded_under_a_key_does_not_open_when_the_key_comes_back) {
  a.install_key(true, key_of(2));
  b.install_key(true, key_of(2));
  ASSERT_TRUE(a.seal_with(true));
  const std::vector<uint8_t> recorded = sealed(a, b_addr, 1);
  EXPECT_EQ(open_at(b, a_addr, recorded), OpenResult::kOpened);
  ASSERT_TRUE(b.retire_key(true));
  EXPECT_EQ(open_at(b, a_addr, recorded), OpenResult::kDropped);  // no key for it now
  b.install_key(true, key_of(2));
  EXPECT_EQ(open_at(b, a_addr, recorded), OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_replayed, 1u);
  EXPECT_EQ(open_at(b, a_addr, sealed(a, b_addr, 2)), OpenResult::kOpened);
}

TEST_F(Rekeying, a_replay_stays_a_replay_while_both_keys_are_installed) {
  a.install_key(true, key_of(2));
  b.install_key(true, key_of(2));
  const std::vector<uint8_t> old_key = sealed(a, b_addr, 1);
  ASSERT_TRUE(a.seal_with(true));
  const std::vector<uint8_t> new_key = sealed(a, b_addr, 2);
  EXPECT_EQ(open_at(b, a_addr, old_key), OpenResult::kOpened);
  EXPECT_EQ(open_at(b, a_addr, new_key), OpenResult::kOpened);
  EXPECT_EQ(open_at(b, a_addr, old_key), OpenResult::kDropped);
  EXPECT_EQ(open_at(b, a_addr, new_key), OpenResult::kDropped);
  EXPECT_EQ(b.stats().rx_replayed, 2u);
}

}  // namespace
}  // namespace spray::tss::rekeying
