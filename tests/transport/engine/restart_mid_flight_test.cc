// Hosts that restart while operations are in flight, to them and from them: sends of
// one packet, of several and by rendezvous, RMA writes and reads, among three hosts on a
// fabric that loses, duplicates, corrupts and reorders. peer_restart_test.cc restarts
// hosts only between whole exchanges of one-packet sends; here a restart may land
// anywhere in an operation, and a region registered under the same key by the
// successor must never take what was meant for its predecessor's.
//
// What each host's successive engines are called here: generations (0, 1, ... per host).
// The rules (checked as operations end and at the end of a run):
//   - An operation whose initiator is alive ends, OK or "peer unreachable", within 20 s
//     of virtual time. It may fail only when its target restarted after the initiator
//     last completed an operation to it OK, or while it was in flight.
//   - A send that completes OK was received, intact, by the generation it was posted to,
//     unless that generation died first: a send completes when its target has it (as
//     FI_TRANSMIT_COMPLETE promises), which may be before its turn to be matched comes.
//     A write that completes OK is in that generation's region, whole; a read that
//     completes OK returns that generation's bytes.
//   - Unless the initiator had completed nothing to that host since its own start: then
//     its first requests name no incarnation to check, and a successor of the target may
//     take them as a first contact (as a new process at that address would), whatever
//     the predecessor took of them and whatever their sender saw. Such a send is then
//     received by a later generation (where the test posts its receive again), a write
//     lands there, a read reads there.
//   - No byte lands where no operation sent it: a region's slot holds zeros or the bytes
//     of the write it was given to, and a successor's slot only an ambiguous write's.
//   - A receive whose sender died ends (OK and intact, or "peer unreachable") or can be
//     cancelled: none is held for good. No send is taken as unexpected unless ambiguous.
//   - After the last restart every host reaches every other both ways.
// 100 seeds of 60 steps run in CI (under a second); SPRAY_RESTART_SEEDS=FIRST:LAST runs
// others. Written on 2026-12-07, it found six holes, each mended in the same change
// (README's Known limits); seeds 1-2337 then passed. Seeds 2338-12000, run on 2026-12-08,
// found three more (mended: seeds 2357, 2676, 4822, 5949, 11552); 19 of them still fail,
// each a case of the first contact's ambiguity that the Known limits item describes.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "tests/support/engine_harness.h"

namespace spray {
namespace {

using test_support::CompletionWaiter;

class MidFlightRestarts {
 public:
  static constexpr uint32_t kHosts = 3;
  static constexpr uint64_t kKey = 0x5eed;
  static constexpr uint32_t kWriteSlots = 40;        // writes a host takes in one run
  static constexpr uint64_t kSlotBytes = 24 * 1024;  // the largest write fits
  static constexpr uint64_t kReadArea = kWriteSlots * kSlotBytes;
  static constexpr uint64_t kReadBytes = 16 * 1024;
  static constexpr uint64_t kRegionBytes = kReadArea + kReadBytes;
  static constexpr uint64_t kLate = uint64_t{1} << 60;  // context bit: a receive posted again

  explicit MidFlightRestarts(uint64_t seed)
      : seed_(seed), rng_(seed), cluster_(fabric(seed), engine_config()), waiter_(cluster_) {
    for (uint32_t h = 0; h < kHosts; ++h) new_region(h);
    // Every host completes an operation to every other first, so every later request
    // names the incarnation it is meant for (see "Unless" above).
    for (uint32_t from = 0; from < kHosts; ++from) {
      for (uint32_t to = 0; to < kHosts; ++to) {
        if (from != to) issue(from, to, Kind::kSend, 3000);
      }
    }
    settle();
  }

  void play(int steps) {
    for (int step = 0; step < steps && !::testing::Test::HasFatalFailure(); ++step) {
      const uint64_t draw = rng_();
      const auto host = static_cast<uint32_t>((draw >> 8) % kHosts);
      switch (draw % 8) {
        case 0:
          restart(host, static_cast<uint64_t>(step));
          break;
        case 1:  // around the 10 ms after which a hello goes
          run_for(Duration::microseconds(static_cast<int64_t>((draw >> 16) % 15000)));
          break;
        case 2:  // a few round trips: operations get under way
          run_for(Duration::microseconds(static_cast<int64_t>((draw >> 16) % 300)));
          break;
        case 3:
          settle();
          break;
        default:
          issue_batch(host, draw >> 16);
          break;
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
    settle();
    // The first round may fail sends to hosts restarted since their sender last heard
    // them; the second may not.
    for (int round = 0; round < 2 && !::testing::Test::HasFatalFailure(); ++round) {
      for (uint32_t from = 0; from < kHosts; ++from) {
        for (uint32_t to = 0; to < kHosts; ++to) {
          if (from != to) issue(from, to, Kind::kSend, 3000);
        }
      }
      settle();
    }
    for (uint32_t from = 0; from < kHosts; ++from) {
      for (uint32_t to = 0; to < kHosts; ++to) {
        EXPECT_FALSE(from != to && restarted_since_heard_[from][to])
            << "host " << from << " does not reach host " << to << " again";
      }
    }
    check_regions();
    uint64_t unexpected = 0;
    for (uint32_t h = 0; h < kHosts; ++h)
      unexpected += cluster_.engine(h).ses().stats().unexpected_messages;
    EXPECT_LE(unexpected + unexpected_of_the_dead_, ambiguous_sends_)
        << "a send was taken as unexpected that no rule lets a successor take";
  }

  uint32_t restarts() const { return restarts_; }

 private:
  enum class Kind { kSend, kWrite, kRead };

  struct Op {
    Kind kind = Kind::kSend;
    uint32_t from = 0, to = 0;
    uint32_t from_gen = 0, to_gen = 0;  // generations at issue
    bool ambiguous = false;             // `from` had completed nothing to `to` since its start
    bool may_fail = false;              // `to` restarted since `from` last heard it OK
    uint64_t ctx = 0;
    uint64_t length = 0;
    uint64_t offset = 0;           // write, read: where in the target's region
    std::vector<uint8_t> out;      // send, write: the bytes sent
    std::vector<uint8_t> in;       // send: the receive buffer; read: the destination
    std::vector<uint8_t> late_in;  // send: the receive posted again at a later generation
    bool late_posted = false;
    std::optional<ses::Completion> tx;  // the initiator's completion, once seen
    bool settled = false;
  };

  static sim::FabricConfig fabric(uint64_t seed) {
    sim::FabricConfig f = test_support::faulty_fabric(kHosts, seed);
    f.buffers = 4096;
    return f;
  }
  // Each restart makes a new engine: small tables.
  static engine::EngineConfig engine_config() { return test_support::small_engine_config(32); }

  // The bytes of region generation `gen` of `host` in its read area.
  static uint8_t read_byte(uint32_t host, uint32_t gen, uint64_t j) {
    return static_cast<uint8_t>(host * 73 + gen * 151 + j * 7 + 1);
  }
  static uint8_t write_byte(uint64_t ctx, uint64_t j) {
    return static_cast<uint8_t>(ctx * 131 + j * 17 + 3);
  }

  void new_region(uint32_t host) {
    auto& gens = regions_[host];
    gens.push_back(std::make_unique<std::vector<uint8_t>>(kRegionBytes, 0));
    std::vector<uint8_t>& r = *gens.back();
    const auto gen = static_cast<uint32_t>(gens.size() - 1);
    for (uint64_t j = 0; j < kReadBytes; ++j) r[kReadArea + j] = read_byte(host, gen, j);
    ASSERT_EQ(
        cluster_.engine(host).register_memory(
            {r.data(), r.size(), 0, kKey, ses::access::kRemoteRead | ses::access::kRemoteWrite}),
        Status::kOk);
  }
  uint32_t gen(uint32_t host) const { return static_cast<uint32_t>(regions_[host].size() - 1); }

  void restart(uint32_t host, uint64_t step) {
    waiter_.pending(host);  // what the old engine reported stays with the test
    unexpected_of_the_dead_ += cluster_.engine(host).ses().stats().unexpected_messages;
    cluster_.restart(host, seed_ * 1000 + step + 1);
    new_region(host);
    for (uint32_t other = 0; other < kHosts; ++other) {
      restarted_since_heard_[other][host] = true;
      restarted_since_heard_[host][other] = false;  // a new engine: nothing of it to fail
      heard_since_start_[host][other] = false;
    }
    ++restarts_;
  }

  void run_for(Duration d) {
    cluster_.run_until([] { return false; }, d);
  }

  void issue_batch(uint32_t from, uint64_t draw) {
    const auto to = static_cast<uint32_t>((from + 1 + draw % (kHosts - 1)) % kHosts);
    const int count = 1 + static_cast<int>((draw >> 4) % 3);
    for (int i = 0; i < count; ++i) {
      const uint64_t d = draw >> (8 + 6 * i);
      switch (d % 6) {
        case 0:
        case 1:
          issue(from, to, Kind::kSend, 3000);
          break;
        case 2:
          issue(from, to, Kind::kSend, 20000);
          break;
        case 3:
          issue(from, to, Kind::kSend, 100000);  // above the rendezvous threshold
          break;
        case 4:
          issue(from, to, Kind::kWrite, (d >> 3) % 2 ? 20000 : 700);
          break;
        default:
          issue(from, to, Kind::kRead, (d >> 3) % 2 ? 12000 : 500);
          break;
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  void issue(uint32_t from, uint32_t to, Kind kind, uint64_t length) {
    if (kind == Kind::kWrite && next_slot_[to] == kWriteSlots) kind = Kind::kRead;
    auto op = std::make_unique<Op>();
    op->kind = kind;
    op->from = from;
    op->to = to;
    op->from_gen = gen(from);
    op->to_gen = gen(to);
    op->ambiguous = !heard_since_start_[from][to];
    op->may_fail = restarted_since_heard_[from][to];
    op->ctx = next_ctx_++;
    op->length = length;
    engine::Engine<sim::SimNic>& e = cluster_.engine(from);
    switch (kind) {
      case Kind::kSend:
        op->out.resize(length);
        for (uint64_t j = 0; j < length; ++j) op->out[j] = write_byte(op->ctx, j);
        op->in.assign(length, 0);
        ASSERT_EQ(cluster_.engine(to).post_recv({.buffer = op->in.data(),
                                                 .length = length,
                                                 .context = op->ctx,
                                                 .tagged = true,
                                                 .tag = op->ctx,
                                                 .source = from}),
                  Status::kOk);
        ASSERT_EQ(e.send(to, op->out.data(), length, op->ctx, {.tagged = true, .tag = op->ctx}),
                  Status::kOk);
        if (op->ambiguous) ++ambiguous_sends_;
        break;
      case Kind::kWrite:
        op->offset = next_slot_[to]++ * kSlotBytes;
        op->out.resize(length);
        for (uint64_t j = 0; j < length; ++j) op->out[j] = write_byte(op->ctx, j);
        ASSERT_EQ(e.write(to, op->out.data(), length, op->offset, kKey, op->ctx), Status::kOk);
        break;
      case Kind::kRead:
        op->offset = kReadArea + (op->ctx * 97) % (kReadBytes - length);
        op->in.assign(length, 0);
        ASSERT_EQ(e.read(to, op->in.data(), length, op->offset, kKey, op->ctx), Status::kOk);
        break;
    }
    ops_.push_back(std::move(op));
  }

  // Ends every operation in flight and checks each by the rules above.
  void settle() {
    // A send whose receive went with its target's generation: posted again at the
    // current one, where a successor that took it as a first contact delivers it.
    for (auto& op : ops_) {
      if (op->settled || op->kind != Kind::kSend || op->to_gen == gen(op->to)) continue;
      op->late_in.assign(op->length, 0);
      op->late_posted = true;
      ASSERT_EQ(cluster_.engine(op->to).post_recv({.buffer = op->late_in.data(),
                                                   .length = op->length,
                                                   .context = op->ctx | kLate,
                                                   .tagged = true,
                                                   .tag = op->ctx,
                                                   .source = op->from}),
                Status::kOk);
    }
    for (auto& op : ops_) {
      if (op->settled) continue;
      if (op->from_gen == gen(op->from)) {
        settle_alive(*op);
      } else {
        settle_orphan(*op);
      }
      if (::testing::Test::HasFatalFailure()) return;
      op->settled = true;
    }
  }

  // An operation whose initiator is still the engine that issued it.
  void settle_alive(Op& op) {
    SCOPED_TRACE(::testing::Message() << describe(op));
    op.tx = waiter_.wait(op.from, op.ctx, Duration::seconds(20));
    ASSERT_TRUE(op.tx) << "never ended";
    const bool target_restarted = op.to_gen != gen(op.to);
    if (op.tx->status != Status::kOk) {
      EXPECT_EQ(op.tx->status, Status::kPeerUnreachable);
      EXPECT_TRUE(op.may_fail || target_restarted)
          << "failed, and its target had not restarted since its initiator last heard it";
      if (op.kind == Kind::kSend) {
        if (!target_restarted) {
          EXPECT_EQ(cluster_.engine(op.to).cancel_recv(op.ctx), Status::kOk)
              << "its target took a send that failed";
        }
        // A first request that names no incarnation may reach the target's successor
        // late (its SYN overtaken by the restart) after its PDC was established with the
        // predecessor: the successor takes it, and its ACKs name a PDC the sender does not
        // know, so the send fails there all the same. Delivered once, reported failed: the
        // ambiguity of a first contact, never a loss.
        if (op.late_posted) expect_no_late_copy(op);
      }
      return;
    }
    heard_since_start_[op.from][op.to] = true;
    if (!target_restarted) restarted_since_heard_[op.from][op.to] = false;
    switch (op.kind) {
      case Kind::kSend: {
        auto rx = waiter_.take(op.to, op.ctx);
        if (!rx && !target_restarted) rx = waiter_.wait(op.to, op.ctx);
        if (rx) {
          EXPECT_EQ(rx->status, Status::kOk);
          EXPECT_TRUE(op.in == op.out) << "received other bytes than were sent";
          if (op.late_posted) expect_no_late_copy(op);
          return;
        }
        ASSERT_TRUE(op.late_posted) << "completed OK, never received";
        // Its target died after taking it, before its turn to be matched came (a send
        // completes when its target has it, as FI_TRANSMIT_COMPLETE says, not when it
        // is matched), or a successor took it as a first contact.
        auto late = waiter_.take(op.to, op.ctx | kLate);
        if (!late) {
          EXPECT_EQ(cluster_.engine(op.to).cancel_recv(op.ctx | kLate), Status::kOk);
          late = waiter_.wait(op.to, op.ctx | kLate);
          ASSERT_TRUE(late);
          if (late->status == Status::kCanceled) return;
        }
        EXPECT_TRUE(op.ambiguous) << "a successor took a send meant for its predecessor";
        EXPECT_EQ(late->status, Status::kOk);
        EXPECT_TRUE(op.late_in == op.out) << "a successor received other bytes than were sent";
        return;
      }
      case Kind::kWrite: {
        bool found = false;
        for (uint32_t g = op.to_gen; g <= (op.ambiguous ? gen(op.to) : op.to_gen); ++g) {
          found = found || holds_write(op, g);
        }
        EXPECT_TRUE(found) << "completed OK, not in its target generation's region";
        return;
      }
      case Kind::kRead: {
        std::optional<uint32_t> served;
        for (uint32_t g = op.to_gen; g <= gen(op.to) && !served; ++g) {
          bool same = true;
          for (uint64_t j = 0; j < op.length && same; ++j) {
            same = op.in[j] == read_byte(op.to, g, op.offset - kReadArea + j);
          }
          if (same) served = g;
        }
        ASSERT_TRUE(served) << "read bytes no generation of its target holds";
        EXPECT_TRUE(*served == op.to_gen || op.ambiguous)
            << "read generation " << *served << "'s bytes";
        return;
      }
    }
  }

  // A send that a successor of its target's generation must not have taken, unless its
  // initiator had completed nothing to that host: its first requests name no
  // incarnation to refuse them by (a resend of one that the predecessor took, whose ACK
  // was lost, or one that overtook nothing and arrived after the restart).
  void expect_no_late_copy(const Op& op) {
    if (cluster_.engine(op.to).cancel_recv(op.ctx | kLate) == Status::kOk) return;
    auto late = waiter_.wait(op.to, op.ctx | kLate);
    ASSERT_TRUE(late);
    EXPECT_TRUE(op.ambiguous) << "a successor took a send its predecessor had received";
    EXPECT_EQ(late->status, Status::kOk);
    EXPECT_TRUE(op.late_in == op.out) << "a successor received other bytes than were sent";
  }

  // An operation whose initiator restarted: its own completion went with it. A send's
  // receive, where its target's generation still lives, must end or be cancellable.
  void settle_orphan(Op& op) {
    if (op.kind != Kind::kSend || op.to_gen != gen(op.to)) return;
    SCOPED_TRACE(::testing::Message() << describe(op) << ", its sender restarted");
    std::optional<ses::Completion> rx = waiter_.take(op.to, op.ctx);
    for (int tries = 0; !rx && tries < 20; ++tries) {
      if (cluster_.engine(op.to).cancel_recv(op.ctx) == Status::kOk) {
        rx = waiter_.wait(op.to, op.ctx);  // the cancellation's completion
        ASSERT_TRUE(rx);
        EXPECT_EQ(rx->status, Status::kCanceled);
        return;
      }
      rx = waiter_.wait(op.to, op.ctx, Duration::seconds(1));
    }
    ASSERT_TRUE(rx) << "its receive is held for good";
    if (rx->status == Status::kOk) {
      EXPECT_TRUE(op.in == op.out) << "received other bytes than were sent";
    } else {
      EXPECT_EQ(rx->status, Status::kPeerUnreachable);
    }
  }

  // Generation `g` of the target's region holds the whole of `op`'s write.
  bool holds_write(const Op& op, uint32_t g) const {
    const std::vector<uint8_t>& r = *regions_[op.to][g];
    return std::equal(op.out.begin(), op.out.end(), r.begin() + static_cast<ptrdiff_t>(op.offset));
  }

  // Every byte of every region generation's write slots is 0 or the byte the write given
  // that slot put there; a later generation than the write was meant for holds any of
  // it only if the write was ambiguous.
  void check_regions() {
    std::vector<const Op*> writes_to[kHosts];
    for (uint32_t h = 0; h < kHosts; ++h) writes_to[h].assign(kWriteSlots, nullptr);
    for (const auto& op : ops_) {
      if (op->kind == Kind::kWrite) writes_to[op->to][op->offset / kSlotBytes] = op.get();
    }
    for (uint32_t h = 0; h < kHosts; ++h) {
      for (uint32_t g = 0; g <= gen(h); ++g) {
        const std::vector<uint8_t>& r = *regions_[h][g];
        for (uint32_t slot = 0; slot < kWriteSlots; ++slot) {
          const Op* w = writes_to[h][slot];
          bool written = false;
          for (uint64_t j = 0; j < kSlotBytes; ++j) {
            const uint8_t b = r[slot * kSlotBytes + j];
            if (b == 0) continue;
            written = true;
            ASSERT_TRUE(w && j < w->length && b == write_byte(w->ctx, j))
                << "host " << h << " generation " << g << " slot " << slot << " byte " << j
                << " holds what no write sent there";
          }
          if (written) {
            EXPECT_TRUE(g == w->to_gen || (g > w->to_gen && w->ambiguous))
                << "host " << h << " generation " << g << " holds a write meant for generation "
                << w->to_gen;
          }
        }
        for (uint64_t j = 0; j < kReadBytes; ++j) {
          ASSERT_EQ(r[kReadArea + j], read_byte(h, g, j)) << "a write landed in the read area";
        }
      }
    }
  }

  static std::string describe(const Op& op) {
    const char* kinds[] = {"send", "write", "read"};
    return ::testing::PrintToString(kinds[static_cast<int>(op.kind)]) + " ctx " +
           std::to_string(op.ctx) + " of " + std::to_string(op.length) + " B from host " +
           std::to_string(op.from) + " (gen " + std::to_string(op.from_gen) + ") to host " +
           std::to_string(op.to) + " (gen " + std::to_string(op.to_gen) + ")";
  }

  uint64_t seed_;
  std::mt19937_64 rng_;
  sim::Cluster cluster_;
  CompletionWaiter waiter_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> regions_[kHosts];  // per generation
  std::vector<std::unique_ptr<Op>> ops_;
  uint64_t next_ctx_ = 1;
  uint32_t next_slot_[kHosts] = {};
  uint32_t restarts_ = 0;
  uint64_t ambiguous_sends_ = 0;
  uint64_t unexpected_of_the_dead_ = 0;  // unexpected_messages of engines that restarted
  // [from][to]: `to` restarted after `from` last completed an operation to it OK.
  bool restarted_since_heard_[kHosts][kHosts] = {};
  // [from][to]: `from` completed an operation to `to` OK since its own start.
  bool heard_since_start_[kHosts][kHosts] = {};
};

TEST(RestartsMidFlight, lose_nothing_that_completed_and_land_nothing_astray) {
  uint32_t restarts = 0;
  uint64_t first = 1, last = 100;
  if (const char* range = std::getenv("SPRAY_RESTART_SEEDS")) {
    ASSERT_EQ(std::sscanf(range, "%" SCNu64 ":%" SCNu64, &first, &last), 2)
        << "SPRAY_RESTART_SEEDS=FIRST:LAST";
  }
  for (uint64_t seed = first; seed <= last; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    MidFlightRestarts run(seed);
    if (HasFatalFailure()) return;
    run.play(60);
    if (HasFailure()) return;
    restarts += run.restarts();
  }
  EXPECT_GT(restarts, 4 * (last - first + 1)) << "too few restarts to mean much";
}

}  // namespace
}  // namespace spray
