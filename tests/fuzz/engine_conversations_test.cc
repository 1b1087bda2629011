// The fuzz_engine seeds are worth something only if they replay: each recorded
// conversation, fed into a fresh EngineFuzzTarget, must drive host 0 to the outcome the
// real conversation had (the message received with its bytes, the region written, the
// read answered) with no packet refused as malformed. When a wire or engine change
// breaks that, this fails, instead of the fuzzer silently starting from dead seeds.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "tests/fuzz/engine_conversations.h"
#include "tests/fuzz/engine_fuzz_target.h"

namespace spray::fuzz {
namespace {

const std::vector<Conversation>& conversations() {
  static const std::vector<Conversation> all = record_engine_conversations();
  return all;
}

bool holds_conversation_bytes(const std::vector<uint8_t>& buf, size_t at, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (buf[at + i] != conversation_byte(i)) return false;
  }
  return true;
}

const Conversation& named(const std::string& name) {
  for (const auto& c : conversations()) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no conversation " + name);
}

// Replays `name` into a fresh target and checks nothing was refused as malformed.
struct Replay {
  explicit Replay(const std::string& name) {
    target.feed(named(name).input);
    host0 = &target.cluster.engine(0);
    for (const ses::Completion& c : target.host0_completions) {
      if (ses::is_remote_access(c.op)) {
        remote.push_back(c);
      } else {
        got[c.context] = c;
      }
    }
    EXPECT_EQ(host0->stats().rx_malformed, 0u) << name;
  }
  EngineFuzzTarget target;
  sim::SimEngine* host0 = nullptr;
  std::map<ses::UserContext, ses::Completion> got;  // by context
  std::vector<ses::Completion> remote;              // host 1's accesses to the region
};

// Host 1 did exactly one access of kind `op` to the region, and it was reported so.
void expect_one_remote_access(const Replay& r, ses::OpKind op) {
  ASSERT_EQ(r.remote.size(), 1u);
  EXPECT_EQ(r.remote[0].op, op);
  EXPECT_EQ(r.remote[0].memory_key, kRegionKey);
  EXPECT_EQ(r.remote[0].peer, 1u);
  EXPECT_EQ(r.remote[0].status, Status::kOk);
}

// Receives: untagged ones are contexts 0 and 2, tagged ones 1 and 3, and the
// multi-receive buffer kMultiReceive.
void expect_received(Replay& r, ses::UserContext ctx, uint64_t len) {
  ASSERT_TRUE(r.got.contains(ctx));
  const ses::Completion& c = r.got[ctx];
  EXPECT_EQ(c.status, Status::kOk);
  EXPECT_EQ(c.length, len);
  EXPECT_EQ(c.peer, 1u);
  EXPECT_TRUE(holds_conversation_bytes(r.target.recv[ctx], 0, len));
}

TEST(EngineConversations, fit_in_a_fuzz_input_and_are_the_same_every_time) {
  const auto again = record_engine_conversations();
  ASSERT_EQ(again.size(), conversations().size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].input, conversations()[i].input) << again[i].name;
    EXPECT_LE(again[i].input.size(), 9100u) << again[i].name;  // the fuzz run's -max_len
    EXPECT_FALSE(again[i].input.empty()) << again[i].name;
  }
}

TEST(EngineConversations, every_one_completes_host0s_own_sends) {
  for (const auto& c : conversations()) {
    Replay r(c.name);
    for (ses::UserContext ctx : {kRudSendContext, kRodSendContext, kInjectContext}) {
      ASSERT_TRUE(r.got.contains(ctx)) << c.name << ": host 0's send " << ctx;
      EXPECT_EQ(r.got[ctx].status, Status::kOk) << c.name;
    }
  }
}

// Host 0's inject goes without ACK-requested when nothing else of host 0's is in flight
// on its PDC (as here: host 0 sends no read request and no response), so host 1 holds
// the ACK to a later step; the seeds then start the fuzzer from the held-ACK path.
TEST(EngineConversations, host0s_inject_has_its_ack_held) {
  for (const char* name : {"answers_to_host0", "send_rud", "send_then_close"}) {
    EXPECT_EQ(named(name).acks_held_by_host1, 1u) << name;
  }
}

TEST(EngineConversations, sends_replay_to_their_receives) {
  const struct {
    const char* name;
    uint64_t length;
  } sends[] = {{"send_rud", 200},
               {"send_two_packets", 4400},
               {"send_rendezvous", 5000},
               {"send_then_close", 100}};
  for (const auto& send : sends) {
    SCOPED_TRACE(send.name);
    Replay r(send.name);
    expect_received(r, 0, send.length);
  }
}

TEST(EngineConversations, tagged_rod_send_replays_with_its_tag) {
  Replay r("send_rod_tagged");
  expect_received(r, 1, 300);
  EXPECT_EQ(r.got[1].tag, 7u);
}

TEST(EngineConversations, immediate_data_replays) {
  Replay r("send_with_data");
  expect_received(r, 0, 64);
  EXPECT_TRUE(r.got[0].has_data);
  EXPECT_EQ(r.got[0].data, 0x1234u);
}

TEST(EngineConversations, rod_sends_replay_in_order) {
  Replay r("sends_rod_in_order");
  // Three sends: into the two untagged receives, then the multi-receive buffer behind
  // them, at its start.
  expect_received(r, 0, 100);
  expect_received(r, 2, 100);
  expect_received(r, kMultiReceive, 100);
  EXPECT_EQ(r.got[kMultiReceive].buffer, r.target.recv[kMultiReceive].data());
  EXPECT_FALSE(r.got[kMultiReceive].released);  // 8092 bytes left: still posted
}

TEST(EngineConversations, write_replays_into_the_region) {
  Replay r("write");
  EXPECT_TRUE(holds_conversation_bytes(r.target.region, 128, 256));
  EXPECT_EQ(r.target.region[127], 0);
  EXPECT_EQ(r.target.region[384], 0);
  expect_one_remote_access(r, ses::OpKind::kRemoteWrite);
  EXPECT_EQ(r.remote[0].length, 256u);
}

TEST(EngineConversations, atomics_replay_onto_the_region) {
  uint64_t words[2];
  {
    Replay r("atomic_fetch_add");
    std::memcpy(words, r.target.region.data() + 64, sizeof words);
    EXPECT_EQ(words[0], 5u);
    EXPECT_EQ(words[1], 6u);
    EXPECT_EQ(r.host0->ses().stats().atomics_applied, 1u);
    expect_one_remote_access(r, ses::OpKind::kRemoteFetchAtomic);
  }
  Replay r("atomic_compare_swap");
  std::memcpy(words, r.target.region.data() + 96, 8);
  EXPECT_EQ(words[0], 0x77u);
  EXPECT_EQ(r.host0->ses().stats().atomics_applied, 1u);
  expect_one_remote_access(r, ses::OpKind::kRemoteFetchAtomic);
}

TEST(EngineConversations, read_replays_to_a_response_and_its_acknowledgement) {
  Replay r("read");
  // Host 0 answered the read (a response went out) and took host 1's ACK for it.
  EXPECT_GE(r.host0->stats().tx_packets, 1u);
  EXPECT_GE(r.host0->stats().rx_packets, 2u);
  expect_one_remote_access(r, ses::OpKind::kRemoteRead);  // reported once acknowledged
}

}  // namespace
}  // namespace spray::fuzz
