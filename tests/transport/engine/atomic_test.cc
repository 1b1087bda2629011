// Atomics between engines on the simulated fabric: operands travel, old values come
// back, compare-and-swap values ride in the extension header, every element is applied
// exactly once however the fabric loses, duplicates, corrupts or reorders packets, and
// each bad request fails at its initiator with the target's reason and leaves the
// target's memory as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "tests/support/engine_harness.h"
#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;
using wire::AmoDatatype;
using wire::AmoOpcode;

constexpr uint64_t kKey = 5;
constexpr uint64_t kReadOnlyKey = 6;
constexpr uint64_t kWriteOnlyKey = 7;

// Host 0 is the target: one region readable and writable (kKey), one only readable, one
// only writable, over the same 4 KiB.
class Atomics : public ::testing::Test {
 protected:
  explicit Atomics(sim::FabricConfig fabric = {},
                   const std::function<void(uint32_t, engine::EngineConfig&)>& per_host = {})
      : cluster(fabric, engine::EngineConfig{}, per_host), waiter(cluster) {
    memory.assign(512, 0);  // uint64 words: 8-byte aligned
    auto* bytes = reinterpret_cast<uint8_t*>(memory.data());
    const uint64_t size = memory.size() * sizeof(uint64_t);
    EXPECT_EQ(cluster.engine(0).register_memory(
                  {bytes, size, 0, kKey, ses::access::kRemoteRead | ses::access::kRemoteWrite}),
              Status::kOk);
    EXPECT_EQ(
        cluster.engine(0).register_memory({bytes, size, 0, kReadOnlyKey, ses::access::kRemoteRead}),
        Status::kOk);
    EXPECT_EQ(cluster.engine(0).register_memory(
                  {bytes, size, 0, kWriteOnlyKey, ses::access::kRemoteWrite}),
              Status::kOk);
  }

  // Posts `spec` from host 1 to host 0 and returns how it completed.
  Status run(const ses::AtomicSpec& spec, uint64_t offset, uint64_t key = kKey,
             pds::Mode mode = pds::Mode::kRud) {
    const uint64_t ctx = next_context++;
    const Status posted = cluster.engine(1).atomic(0, spec, offset, key, ctx, mode);
    if (posted != Status::kOk) return posted;
    const auto c = waiter.wait(1, ctx);
    EXPECT_TRUE(c.has_value()) << "no completion";
    if (!c) return Status::kProtocolError;
    EXPECT_EQ(c->op, spec.result ? ses::OpKind::kFetchAtomic : ses::OpKind::kAtomic);
    return c->status;
  }

  uint8_t* at(uint64_t offset) { return reinterpret_cast<uint8_t*>(memory.data()) + offset; }

  sim::Cluster cluster;
  CompletionWaiter waiter;
  std::vector<uint64_t> memory;  // host 0's
  uint64_t next_context = 1;
};

TEST_F(Atomics, a_fetching_sum_adds_each_operand_and_returns_the_old_values) {
  const uint32_t before[3] = {1, 2, 0xffffffff};
  std::memcpy(at(64), before, sizeof before);
  const uint32_t operands[3] = {10, 20, 2};
  uint32_t old[3] = {};
  ses::AtomicSpec s{AmoOpcode::kSum, AmoDatatype::kUint32, 3, operands, nullptr, old};
  ASSERT_EQ(run(s, 64), Status::kOk);
  uint32_t after[3];
  std::memcpy(after, at(64), sizeof after);
  EXPECT_EQ(std::vector<uint32_t>(after, after + 3), (std::vector<uint32_t>{11, 22, 1}));
  EXPECT_EQ(std::vector<uint32_t>(old, old + 3), (std::vector<uint32_t>{1, 2, 0xffffffff}));
  EXPECT_EQ(cluster.engine(0).ses().stats().atomics_applied, 1u);
}

TEST_F(Atomics, a_non_fetching_operation_of_many_elements_lands_whole_over_rod_too) {
  std::vector<int16_t> operands(300);
  std::iota(operands.begin(), operands.end(), -150);
  for (pds::Mode mode : {pds::Mode::kRud, pds::Mode::kRod}) {
    std::memset(at(0), 0, 600);
    ses::AtomicSpec s{AmoOpcode::kMin, AmoDatatype::kInt16, 300, operands.data(), nullptr, nullptr};
    ASSERT_EQ(run(s, 0, kKey, mode), Status::kOk);
    std::vector<int16_t> after(300);
    std::memcpy(after.data(), at(0), 600);
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i], std::min<int16_t>(0, operands[i])) << i;
    }
  }
}

TEST_F(Atomics, compare_and_swap_carries_its_values_in_the_header_and_swaps_only_on_a_match) {
  double value = 2.5;
  std::memcpy(at(8), &value, sizeof value);
  const double swap = 9.75, wrong = 1.0, right = 2.5;
  double old = 0;
  ses::AtomicSpec miss{AmoOpcode::kCompareSwap, AmoDatatype::kDouble, 1, &swap, &wrong, &old};
  ASSERT_EQ(run(miss, 8), Status::kOk);
  EXPECT_EQ(old, 2.5);
  std::memcpy(&value, at(8), sizeof value);
  EXPECT_EQ(value, 2.5);
  ses::AtomicSpec hit{AmoOpcode::kCompareSwap, AmoDatatype::kDouble, 1, &swap, &right, &old};
  ASSERT_EQ(run(hit, 8), Status::kOk);
  std::memcpy(&value, at(8), sizeof value);
  EXPECT_EQ(value, 9.75);

  // Masked swap of a byte: the mask's bits from the swap value.
  *at(3) = 0xf0;
  const uint8_t bits = 0x3c, mask = 0x0f;
  uint8_t old_byte = 0;
  ses::AtomicSpec masked{AmoOpcode::kMaskedSwap, AmoDatatype::kUint8, 1, &bits, &mask, &old_byte};
  ASSERT_EQ(run(masked, 3), Status::kOk);
  EXPECT_EQ(old_byte, 0xf0);
  EXPECT_EQ(*at(3), 0xfc);
}

TEST_F(Atomics, read_fetches_without_operands_and_write_replaces) {
  memory[2] = 0x1122334455667788ULL;
  uint64_t got = 0;
  ses::AtomicSpec read{AmoOpcode::kRead, AmoDatatype::kUint64, 1, nullptr, nullptr, &got};
  ASSERT_EQ(run(read, 16), Status::kOk);
  EXPECT_EQ(got, 0x1122334455667788ULL);
  const float f = -3.5f;
  ses::AtomicSpec write{AmoOpcode::kWrite, AmoDatatype::kFloat, 1, &f, nullptr, nullptr};
  ASSERT_EQ(run(write, 20), Status::kOk);
  float now = 0;
  std::memcpy(&now, at(20), sizeof now);
  EXPECT_EQ(now, -3.5f);
}

TEST_F(Atomics, each_bad_request_fails_with_the_targets_reason_and_changes_nothing) {
  for (size_t i = 0; i < memory.size(); ++i) memory[i] = 1000 + i;
  const std::vector<uint64_t> before = memory;
  const uint64_t one = 1;
  uint64_t old = 0;
  ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, nullptr};
  ses::AtomicSpec fetch_add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, &old};
  ses::AtomicSpec read{AmoOpcode::kRead, AmoDatatype::kUint64, 1, nullptr, nullptr, &old};
  EXPECT_EQ(run(add, 0, 999), Status::kBadKey);
  EXPECT_EQ(run(add, 4096), Status::kOutOfBounds);  // one past the region
  EXPECT_EQ(run(add, 4095), Status::kOutOfBounds);  // straddles its end
  EXPECT_EQ(run(add, 0, kReadOnlyKey), Status::kAccessDenied);
  EXPECT_EQ(run(fetch_add, 0, kWriteOnlyKey), Status::kAccessDenied);  // fetching reads too
  EXPECT_EQ(run(read, 0, kWriteOnlyKey), Status::kAccessDenied);
  EXPECT_EQ(run(add, 4), Status::kUnaligned);
  EXPECT_EQ(old, 0u);
  EXPECT_EQ(memory, before);
  EXPECT_EQ(cluster.engine(0).ses().stats().atomic_errors, 7u);
  EXPECT_EQ(cluster.engine(0).ses().stats().atomics_applied, 0u);
  // What the initiator can judge itself fails at once, with nothing sent.
  const double d = 1;
  ses::AtomicSpec bitwise_double{
      AmoOpcode::kBitwiseOr, AmoDatatype::kDouble, 1, &d, nullptr, nullptr};
  EXPECT_EQ(cluster.engine(1).atomic(0, bitwise_double, 0, kKey, 1), Status::kInvalidArgument);
  ses::AtomicSpec unfetched_swap{
      AmoOpcode::kCompareSwap, AmoDatatype::kUint64, 1, &one, &one, nullptr};
  EXPECT_EQ(cluster.engine(1).atomic(0, unfetched_swap, 0, kKey, 1), Status::kInvalidArgument);
  uint64_t two_old[2];
  const uint64_t two[2] = {1, 1};
  ses::AtomicSpec two_swaps{AmoOpcode::kCompareSwap, AmoDatatype::kUint64, 2, two, two, two_old};
  EXPECT_EQ(cluster.engine(1).atomic(0, two_swaps, 0, kKey, 1), Status::kInvalidArgument);
  ses::AtomicSpec none{AmoOpcode::kSum, AmoDatatype::kUint64, 0, &one, nullptr, nullptr};
  EXPECT_EQ(cluster.engine(1).atomic(0, none, 0, kKey, 1), Status::kInvalidArgument);
  const uint32_t too_many = cluster.engine(1).max_atomic_bytes() / 8 + 1;
  std::vector<uint64_t> big(too_many, 1);
  ses::AtomicSpec too_long{AmoOpcode::kSum, AmoDatatype::kUint64, too_many, big.data(), nullptr,
                           nullptr};
  EXPECT_EQ(cluster.engine(1).atomic(0, too_long, 0, kKey, 1), Status::kTooLong);
  EXPECT_EQ(cluster.engine(1).atomic(7, add, 0, kKey, 1), Status::kInvalidArgument);  // no peer
  EXPECT_EQ(memory, before);
}

// A SYN request from host 1 on PDC `pdc` carrying `ses` (its SES header and payload).
std::vector<uint8_t> forged_request(uint16_t pdc, const std::vector<uint8_t>& ses) {
  std::vector<uint8_t> pkt(64);
  wire::PdsRequest h;
  h.flags = wire::request_flags::kSyn | wire::request_flags::kAckRequested;
  h.psn = 1;
  h.spdcid = pdc;
  const size_t n = wire::encode(h, pkt);
  pkt.resize(n);
  pkt.insert(pkt.end(), ses.begin(), ses.end());
  return pkt;
}

// A FETCH_ATOMIC standard header for `length` bytes at offset 0 of the region, then `ext`.
std::vector<uint8_t> atomic_ses(uint32_t length, const std::vector<uint8_t>& ext) {
  std::vector<uint8_t> ses(wire::kSesStandardBytes);
  wire::SesStandardRequest s;
  s.common.opcode = wire::SesOpcode::kFetchAtomic;
  s.common.flags = wire::ses_flags::kStartOfMessage | wire::ses_flags::kEndOfMessage;
  s.common.message_id = 0x8001;
  s.match_bits = kKey;
  s.request_length = length;
  EXPECT_EQ(wire::encode(s, ses), wire::kSesStandardBytes);
  ses.insert(ses.end(), ext.begin(), ext.end());
  return ses;
}

// Requests no Spray initiator sends, as another implementation or a forger might: one
// the target understands but does not apply is answered with UET's reason; one whose
// headers contradict themselves is dropped as malformed. Neither touches memory.
TEST_F(Atomics, forged_requests_are_refused_with_a_reason_or_dropped_and_change_nothing) {
  for (size_t i = 0; i < memory.size(); ++i) memory[i] = 7 * i;
  const std::vector<uint64_t> before = memory;
  // A 128-bit sum: well formed, a type we do not apply (AMO_UNSUPPORTED_DT).
  std::vector<uint8_t> ext(wire::kAtomicExtensionBytes + 16, 1);  // one 16-byte operand
  ext[0] = 0x02;                                                  // SUM
  ext[1] = 0x08;                                                  // INT128
  ext[2] = ext[3] = 0;
  // A sum announcing 16 bytes of uint64 but carrying 8: malformed.
  std::vector<uint8_t> short_payload = {0x02, 0x07, 0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0};
  // A compare-and-swap of a uint64 whose compare value has high bits: malformed.
  std::vector<uint8_t> wide(wire::kAtomicCompareSwapExtensionBytes, 0);
  wide[0] = 0x0d;
  wide[1] = 0x07;
  wide[4 + 7] = 1;  // compare_high = 1
  const uint64_t answers = cluster.engine(0).stats().tx_packets;
  const uint64_t malformed = cluster.engine(0).ses().stats().malformed_packets;
  test_support::inject(cluster, 1, 0, forged_request(31, atomic_ses(16, ext)));
  test_support::inject(cluster, 1, 0, forged_request(32, atomic_ses(16, short_payload)));
  test_support::inject(cluster, 1, 0, forged_request(33, atomic_ses(8, wide)));
  cluster.run_until([] { return false; }, Duration::microseconds(200));
  EXPECT_EQ(memory, before);
  EXPECT_EQ(cluster.engine(0).ses().stats().atomics_applied, 0u);
  EXPECT_EQ(cluster.engine(0).ses().stats().atomic_errors, 1u);  // the 128-bit one, answered
  EXPECT_EQ(cluster.engine(0).ses().stats().malformed_packets, malformed + 2);
  EXPECT_GT(cluster.engine(0).stats().tx_packets, answers);
  // Valid atomics still work.
  const uint64_t one = 1;
  uint64_t old = 0;
  ses::AtomicSpec add{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one, nullptr, &old};
  EXPECT_EQ(run(add, 8), Status::kOk);
  EXPECT_EQ(old, 7u);
  EXPECT_EQ(memory[1], 8u);
}

// Hosts 1-3 each fetch-and-add 1 to one counter at host 0, many times at once, over a
// fabric that loses, duplicates, corrupts and reorders. Exactly once means: the counter
// ends at the number of operations, and the old values they fetched are 0, 1, ... each
// exactly once.
class AtomicsOnABadFabric : public Atomics {
 protected:
  static sim::FabricConfig bad_fabric() { return test_support::faulty_fabric(4, 42); }
  AtomicsOnABadFabric() : Atomics(bad_fabric()) {}
  explicit AtomicsOnABadFabric(uint32_t target_table)
      : Atomics(bad_fabric(), [target_table](uint32_t host, engine::EngineConfig& c) {
          if (host == 0) c.ses.max_tx_messages = c.ses.max_rx_messages = target_table;
        }) {}

  // Hosts 1-3 post kPerHost fetch-and-adds of 1 each at host 0's word 16 at once, wait
  // for them all, and check each was applied exactly once.
  void fetch_and_add_from_three_hosts() {
    constexpr uint32_t kPerHost = 300;
    const uint64_t one = 1;
    std::vector<std::vector<uint64_t>> fetched(4, std::vector<uint64_t>(kPerHost, ~0ULL));
    for (uint32_t host = 1; host <= 3; ++host) {
      for (uint32_t i = 0; i < kPerHost; ++i) {
        ses::AtomicSpec s{AmoOpcode::kSum, AmoDatatype::kUint64, 1, &one,
                          nullptr,         &fetched[host][i]};
        ASSERT_EQ(cluster.engine(host).atomic(0, s, 128, kKey, 1000 + i), Status::kOk);
      }
    }
    for (uint32_t host = 1; host <= 3; ++host) {
      for (uint32_t i = 0; i < kPerHost; ++i) {
        const auto c = waiter.wait(host, 1000 + i, Duration::seconds(20));
        ASSERT_TRUE(c.has_value()) << "host " << host << " op " << i;
        ASSERT_EQ(c->status, Status::kOk);
      }
    }
    EXPECT_EQ(memory[16], 3u * kPerHost);
    std::vector<uint64_t> all;
    for (uint32_t host = 1; host <= 3; ++host) {
      all.insert(all.end(), fetched[host].begin(), fetched[host].end());
    }
    std::sort(all.begin(), all.end());
    std::vector<uint64_t> expected(3 * kPerHost);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(all, expected);
    EXPECT_EQ(cluster.engine(0).ses().stats().atomics_applied, 3u * kPerHost);
  }
};

// The same with host 0's message tables 8 slots deep: most answers find no tx slot and
// wait for one in an rx slot, and requests that find neither are refused (PDS NACKs them
// and their senders retry), all without applying one twice or losing one.
class AtomicsAtATargetWithSmallTables : public AtomicsOnABadFabric {
 protected:
  AtomicsAtATargetWithSmallTables() : AtomicsOnABadFabric(8) {}
};

TEST_F(AtomicsOnABadFabric, fetch_and_add_applies_each_operation_exactly_once) {
  fetch_and_add_from_three_hosts();
  const auto& stats = cluster.fabric().stats();
  EXPECT_GT(stats.lost, 0u);
  EXPECT_GT(stats.duplicated, 0u);
  EXPECT_GT(stats.reordered, 0u);
}

TEST_F(AtomicsAtATargetWithSmallTables, answers_wait_for_slots_and_nothing_applies_twice) {
  fetch_and_add_from_three_hosts();
}

}  // namespace
}  // namespace spray
