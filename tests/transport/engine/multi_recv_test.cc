// Multi-receive buffers (RecvSpec::multi) at the engine, over the emulated fabric with and
// without faults. Two hosts send a stream of untagged messages each, eager and
// rendezvous, to a third that keeps two multi-receive buffers posted and posts a fresh
// one whenever one is released. Checked: every message lands exactly once and intact,
// in a part of a buffer no other message took; a sender's messages take parts in its
// send order (buffer after buffer, offset after offset); each buffer is released by
// exactly one completion, its last, when its parts tile its start and fewer than
// multi_min_free bytes remain.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "nic_sim/cluster.h"
#include "transport/base/rng.h"

namespace spray {
namespace {

constexpr uint32_t kTarget = 0;
constexpr uint32_t kSenders[] = {1, 2};
constexpr size_t kMessagesPerSender = 150;
constexpr uint64_t kLargestMessage = 100 * 1024;  // above the 64 KiB rendezvous threshold
constexpr uint64_t kBufferBytes = 1 << 20;
constexpr uint64_t kMinFree = kLargestMessage;  // so no message is ever truncated
constexpr size_t kBuffersPosted = 2;

uint8_t byte_of(uint64_t id, uint64_t offset) {
  return static_cast<uint8_t>((id * 151) ^ (offset * 13) ^ (offset >> 8));
}

struct Part {
  uint64_t offset = 0, length = 0;
  uint64_t id = 0;  // the message: sender << 32 | its index
};

struct Buffer {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kBufferBytes);
  std::vector<Part> parts;
  int releases = 0;
  size_t completions_after_release = 0;
};

struct MultiRecvRun {
  explicit MultiRecvRun(const sim::FaultConfig& faults, uint64_t seed)
      : cluster(fabric(faults, seed), engine::EngineConfig{}), rng(seed) {
    for (uint32_t s : kSenders) {
      for (size_t i = 0; i < kMessagesPerSender; ++i) {
        const bool large = rng.below(10) == 0;
        const uint64_t bytes =
            large ? 64 * 1024 + 1 + rng.below(kLargestMessage - 64 * 1024) : rng.below(9000);
        const uint64_t id = uint64_t{s} << 32 | i;
        std::vector<uint8_t> m(bytes);
        for (uint64_t b = 0; b < bytes; ++b) m[b] = byte_of(id, b);
        outbox[s].push_back(std::move(m));
      }
    }
    while (posted < kBuffersPosted) post_buffer();
  }

  static sim::FabricConfig fabric(const sim::FaultConfig& faults, uint64_t seed) {
    sim::FabricConfig f;
    f.hosts = 3;
    f.faults = faults;
    f.seed = seed;
    return f;
  }

  void post_buffer() {
    buffers.emplace_back();
    Buffer& b = buffers.back();
    const ses::RecvSpec r{.buffer = b.bytes.data(),
                          .length = b.bytes.size(),
                          .context = buffers.size() - 1,
                          .multi = true,
                          .multi_min_free = kMinFree};
    ASSERT_EQ(cluster.engine(kTarget).post_recv(r), Status::kOk);
    ++posted;
  }

  // Sends what the engines take, then reads every completion. True when all is done.
  bool pump() {
    for (uint32_t s : kSenders) {
      while (next[s] < kMessagesPerSender) {
        const auto& m = outbox[s][next[s]];
        ses::SendSpec spec;
        spec.has_data = true;
        spec.data = uint64_t{s} << 32 | next[s];
        const Status st = cluster.engine(s).send(kTarget, m.data(), m.size(), next[s], spec);
        if (st == Status::kAgain) break;
        EXPECT_EQ(st, Status::kOk);
        ++next[s];
      }
      ses::Completion c;
      while (cluster.engine(s).poll_completion(c)) {
        EXPECT_EQ(c.status, Status::kOk) << "send " << c.context << " of host " << s;
        ++sent;
      }
    }
    ses::Completion c;
    while (cluster.engine(kTarget).poll_completion(c)) on_receive(c);
    return sent == 2 * kMessagesPerSender && received == 2 * kMessagesPerSender;
  }

  void on_receive(const ses::Completion& c) {
    ASSERT_LT(c.context, buffers.size());
    Buffer& b = buffers[c.context];
    if (b.releases > 0) ++b.completions_after_release;
    ASSERT_EQ(c.status, Status::kOk) << "buffer " << c.context;
    ASSERT_TRUE(c.has_data);
    const uint64_t id = c.data;
    const auto sender = static_cast<uint32_t>(id >> 32);
    const auto index = static_cast<size_t>(id & 0xffffffff);
    ASSERT_TRUE(sender == kSenders[0] || sender == kSenders[1]);
    ASSERT_LT(index, kMessagesPerSender);
    EXPECT_EQ(c.peer, sender);
    EXPECT_EQ(++times_received[id], 1) << "message " << id;
    const auto& want = outbox[sender][index];
    ASSERT_GE(c.buffer, b.bytes.data());
    const auto offset = static_cast<uint64_t>(c.buffer - b.bytes.data());
    ASSERT_LE(offset + c.length, b.bytes.size());
    EXPECT_EQ(c.length, want.size()) << "message " << id;
    EXPECT_TRUE(std::equal(want.begin(), want.end(), c.buffer)) << "message " << id;
    for (const Part& p : b.parts) {
      EXPECT_FALSE(offset < p.offset + p.length && p.offset < offset + c.length)
          << "message " << id << " lands on message " << p.id;
    }
    b.parts.push_back({offset, c.length, id});
    where[id] = {c.context, offset};
    // In its sender's order: its part lies after that of the message sent before it (in
    // a later buffer, or further on in the same one) and before that of the next.
    if (index > 0 && where.contains(id - 1)) expect_in_order(id - 1, id);
    if (index + 1 < kMessagesPerSender && where.contains(id + 1)) expect_in_order(id, id + 1);
    ++received;
    if (c.released) release(b);
  }

  void expect_in_order(uint64_t first, uint64_t second) {
    const auto [first_buffer, first_offset] = where[first];
    const auto [second_buffer, second_offset] = where[second];
    const uint64_t first_length =
        outbox[static_cast<uint32_t>(first >> 32)][first & 0xffffffff].size();
    const bool after =
        first_buffer < second_buffer ||
        (first_buffer == second_buffer && first_offset + first_length <= second_offset);
    EXPECT_TRUE(after) << "message " << second << " took its part before message " << first;
  }

  void release(Buffer& b) {
    ++b.releases;
    std::vector<Part> parts = b.parts;
    std::sort(parts.begin(), parts.end(), [](const Part& x, const Part& y) {
      return std::pair(x.offset, x.length) < std::pair(y.offset, y.length);
    });
    uint64_t used = 0;
    for (const Part& p : parts) {
      EXPECT_EQ(p.offset, used) << "a gap before message " << p.id;
      used = p.offset + p.length;
    }
    EXPECT_LT(b.bytes.size() - used, kMinFree) << "released with room left";
    --posted;
    while (posted < kBuffersPosted) post_buffer();
  }

  sim::Cluster cluster;
  Rng rng;
  std::map<uint32_t, std::vector<std::vector<uint8_t>>> outbox;
  std::map<uint32_t, size_t> next;
  std::deque<Buffer> buffers;  // by context; a deque keeps their bytes in place
  size_t posted = 0;           // buffers posted and not yet released
  size_t sent = 0, received = 0;
  std::map<uint64_t, int> times_received;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> where;  // message: buffer, offset
};

struct MultiRecvCase {
  std::string name;
  sim::FaultConfig faults;
};

class MultiRecvChaos : public ::testing::TestWithParam<MultiRecvCase> {};

TEST_P(MultiRecvChaos, every_message_lands_once_in_order_and_each_buffer_is_released_once) {
  for (uint64_t seed : {1u, 2u}) {
    SCOPED_TRACE(GetParam().name + " seed=" + std::to_string(seed));
    MultiRecvRun run(GetParam().faults, seed);
    const bool done = run.cluster.run_until([&] { return run.pump(); }, Duration::seconds(30));
    ASSERT_TRUE(done) << run.sent << " sends and " << run.received << " receives completed";
    size_t released = 0;
    for (size_t i = 0; i < run.buffers.size(); ++i) {
      const Buffer& b = run.buffers[i];
      EXPECT_LE(b.releases, 1) << "buffer " << i;
      EXPECT_EQ(b.completions_after_release, 0u) << "buffer " << i;
      released += static_cast<size_t>(b.releases);
    }
    EXPECT_GT(released, 2u);  // the stream filled several buffers
    const auto& fabric = run.cluster.fabric().stats();
    const sim::FaultConfig& faults = GetParam().faults;  // the faults really struck
    if (faults.loss > 0) {
      EXPECT_GT(fabric.lost, 0u);
    }
    if (faults.duplicate > 0) {
      EXPECT_GT(fabric.duplicated, 0u);
    }
    if (faults.trim > 0) {
      EXPECT_GT(fabric.trimmed, 0u);
    }
    // The two still posted are canceled: released at once, nothing landing in them.
    for (size_t i = 0; i < run.buffers.size(); ++i) {
      if (run.buffers[i].releases > 0) continue;
      ASSERT_EQ(run.cluster.engine(kTarget).cancel_recv(i), Status::kOk);
      ses::Completion c;
      ASSERT_TRUE(run.cluster.engine(kTarget).poll_completion(c));
      EXPECT_EQ(c.status, Status::kCanceled);
      EXPECT_EQ(c.context, i);
      EXPECT_TRUE(c.released);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, MultiRecvChaos,
    ::testing::Values(
        MultiRecvCase{"clean", {}}, MultiRecvCase{"reorder", {.reorder = 0.3}},
        MultiRecvCase{
            "everything",
            {.loss = 0.02, .duplicate = 0.02, .corrupt = 0.02, .reorder = 0.1, .trim = 0.02}}),
    [](const auto& test_info) { return test_info.param.name; });

}  // namespace
}  // namespace spray
