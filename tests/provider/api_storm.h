// The provider API storm (api_storm_test.cc says what it does and checks): the model of
// the operations it posts (Op, Region) and the fixture, whose random calls are in
// api_storm_calls.cc and whose oracle, which checks every completion against the model,
// is in api_storm_oracle.cc.
#pragma once

#include <rdma/fi_atomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <deque>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test::storm {

constexpr int kLive = 3;                 // live endpoints: eps[0..2]
constexpr int kDead = kLive;             // eps index of the endpoint closed at the start
constexpr size_t kSteps = 1500;          // random calls per seed
constexpr size_t kMaxPendingPerEp = 48;  // sends or receives outstanding at one endpoint
constexpr int kClasses = 4;              // tag classes a receive may select
constexpr int kTagClassShift = 40;       // tag = class << 40 | send id
constexpr uint64_t kIdMask = (uint64_t{1} << kTagClassShift) - 1;
constexpr size_t kSlots = 8;              // RMA slots per endpoint region
constexpr size_t kSlotBytes = 64 * 1024;  // bytes per RMA slot
constexpr size_t kSizes[] = {0, 1, 7, 8, 64, 1000, 1024, 1025, 4000, 8192, 9000, 65536, 200000};
// Atomics: each endpoint serves kWords 64-bit words of its own (a region apart from the
// RMA slots). Words [0, kChainWords) take only fetching sums and atomic reads, so the old
// values fetched on one word must chain (see check_atomic_words); the others take
// non-fetching sums of 1 to kMaxAtomicCount elements (and injected ones), so each must
// end at its start plus every sum that succeeded.
constexpr size_t kWords = 8;
constexpr size_t kChainWords = 4;
constexpr size_t kMaxAtomicCount = 3;

// Byte `i` of send `id`'s payload. Bytes 0-7 are the id itself (little-endian): an
// untagged message without CQ data names its send that way.
inline uint8_t payload_byte(uint64_t id, size_t i) {
  if (i < 8) return static_cast<uint8_t>(id >> (8 * i));
  return static_cast<uint8_t>(id * 131 + i * 7 + (i >> 9));
}

inline std::vector<uint8_t> payload(uint64_t id, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = payload_byte(id, i);
  return v;
}

constexpr uint8_t kUntouched = 0xa5;  // fill of receive and read buffers

// One posted operation and what the oracle knows of it. Its context is `ctx`; ops live
// in a deque, so the address the provider holds stays valid.
struct Op {
  fi_context2 ctx{};
  enum Kind { kSend, kRecv, kMulti, kProbe, kWrite, kRead, kAtomic } kind = kSend;
  uint64_t id = 0;  // index in the storm's ops: the send id carried in tag or data
  int ep = 0;       // the endpoint that posted it
  int peer = -1;    // send, RMA: the target endpoint; receive: the directed source or -1
  bool tagged = false;
  bool inject = false;     // no completion expected
  bool with_data = false;  // send, write: carries id as remote CQ data
  uint64_t tag = 0;        // send: its tag; receive: the tag it selects
  uint64_t ignore = 0;     // receive: the ignore mask
  size_t size = 0;         // send, RMA: bytes; receive: buffer bytes
  // Multi-receive (kMulti): the parts messages took so far, as completed (not in buffer
  // order: a rendezvous may finish after an eager message carved behind it).
  struct Part {
    size_t offset = 0, len = 0;
    int from = 0;       // the sending endpoint
    uint64_t send = 0;  // the send's id
  };
  std::vector<Part> multi_parts;
  std::vector<uint8_t> buf;  // send payload, receive or read buffer
  // RMA: the target slot and byte offset in it; the error a bad one must fail with.
  size_t slot = 0, offset = 0;
  int expect_err = 0;
  // Atomic (kAtomic): FI_SUM on `count` uint64 words from `word` on (operands in
  // `operands`), fetching the old values into `buf` (8 bytes each and one byte more that
  // must stay untouched); or, with `atomic_read`, FI_ATOMIC_READ of one word.
  size_t word = 0, count = 0;
  bool fetching = false, atomic_read = false;
  std::vector<uint64_t> operands;
  bool cancel_requested = false;
  // Probe (a tagged receive with FI_PEEK): alone, with FI_DISCARD or with FI_CLAIM; a
  // claim found is followed by an FI_CLAIM receive of the same context, which may discard.
  uint64_t probe_flags = 0;
  bool claim_discards = false;
  int completions = 0;
  // A probe whose claim found a message: 2. A multi-receive: unknown (INT_MAX) until the
  // completion that releases its buffer.
  int expected_completions = 1;
  bool remote_seen = false;  // write with data: the target's completion arrived
  // Send <-> receive, or the probe that claimed or discarded it; a send taken by a
  // multi-receive names it (the multi-receive names none: it takes many).
  Op* matched = nullptr;
};

// A region of kSlots slots an endpoint serves for RMA, with what each byte must hold.
struct Region {
  std::vector<uint8_t> bytes, expected;
  fid_mr* mr = nullptr;
  std::vector<int> readers, writers;  // per slot: RMA ops in flight on it
  // The atomics' words (kWords), their values at the start, and their own registration.
  std::vector<uint64_t> words, words_at_start;
  fid_mr* words_mr = nullptr;
};

struct ApiStorm : Fabric {
  std::mt19937_64 rng;
  std::deque<Op> ops;
  Region regions[kLive];
  size_t pending[kLive] = {};         // per endpoint: its sends and receives not yet completed
  size_t min_multi_recv[kLive] = {};  // per endpoint: FI_OPT_MIN_MULTI_RECV, bytes
  size_t inject_size = 0;
  int misuse_marker = 0;  // the context of calls that must fail at once
  // Injected sends to the closed endpoint, and the error completions (no context: an
  // inject names none) that reported them failed; errors are reported even for injects.
  size_t injected_to_dead = 0, inject_errors = 0;
  // What the storm went through, printed per seed so a reader sees it exercised each path.
  struct Tally {
    size_t received = 0, truncated = 0, canceled = 0, into_multi = 0, peeked = 0, claimed = 0,
           discarded = 0, rma_done = 0, rma_refused = 0, remote_writes = 0, failed_to_dead = 0,
           misuses = 0, atomics_done = 0, atomics_refused = 0,
           in_pieces = 0;  // sends, receives and RMA posted with a buffer of several iovecs
  } tally;
  // Per live endpoint: its FI_REMOTE_READ | FI_REMOTE_WRITE counter (FI_RMA_EVENT), which
  // must end at the number of valid RMA and atomic operations that aimed at it.
  fid_cntr* remote_access[kLive] = {};
  std::string failure;   // the first oracle violation, with the seed's context
  int port_holder = -1;  // holds the closed endpoint's UDP port (see SetUp)

  void SetUp() override;
  void TearDown() override;

  size_t pick(size_t n) { return static_cast<size_t>(rng() % n); }
  bool chance(int percent) { return pick(100) < static_cast<size_t>(percent); }
  void fail(const std::string& what) {
    if (failure.empty()) failure = what;
  }
  Op& new_op(Op::Kind kind, int ep);
  // `size` bytes at `base` cut at random into 1-4 consecutive iovecs (some may be empty),
  // for the v and msg forms; one in four calls gets several (counted in tally.in_pieces).
  std::vector<iovec> pieces(uint8_t* base, size_t size);
  uint64_t remote_addr(int target, size_t slot, size_t offset) const;

  // Posts with `post`, reading the CQ while the provider says EAGAIN (its queues are
  // full). Returns false, forgetting the op, if it stays full for a second.
  template <typename Post>
  bool post_op(Post&& post) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
      const ssize_t rc = post();
      if (rc == 0) return true;
      if (rc != -FI_EAGAIN) {
        fail("a valid call returned " + std::string(fi_strerror(static_cast<int>(-rc))));
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      read_cq();
    }
  }

  // Posts the op last added to `ops` with `post` (see post_op): then it is pending at its
  // endpoint; if it could not be posted it is forgotten.
  template <typename Post>
  void submit(Post&& post) {
    if (!post_op(post)) {
      ops.pop_back();
      return;
    }
    ++pending[ops.back().ep];
  }

  // The random calls. Each picks its endpoints and sizes; one that finds its endpoint
  // with kMaxPendingPerEp operations outstanding does nothing.
  void post_send();

  void post_recv(int at, bool catch_all, bool tagged);

  // An untagged FI_MULTI_RECV buffer of 4 KiB to 300 KiB, from one source or any.
  void post_multi();

  // A receive (multi or not) still posted, as far as the oracle knows.
  bool receive_waiting(const Op& r) const;

  void cancel_some_recv();

  // Selects messages as a receive would: by tag class or any tag, from one source or any.
  void pick_criteria(Op& r, bool catch_all);

  // fi_trecvmsg of `r`'s selection, context and buffer (none: a peek or a discard).
  ssize_t trecvmsg(Op& r, bool with_buffer, uint64_t flags);

  void post_probe();

  void post_rma();

  // A fetching sum or atomic read on a chain word, or a sum (perhaps injected) over sum
  // words; one in five of the non-injected aims at the closed endpoint, a wrong key, past
  // the end of the words or at a misaligned address, and must fail so.
  void post_atomic();

  // A valid RMA op's claim on its slot ends (with it, or when it could not be posted).
  void release_slot(const Op& a);

  // Calls the provider must refuse at once, posting nothing.
  void misuse();

  // Whether receive `r` may take send `s` (endpoint, tagged-ness, source, tag).
  static bool can_match(const Op& r, const Op& s);

  // The op a completion's context names; nullptr (and a failure, unless it is an
  // injected send's error) when it names none.
  Op* op_of(void* ctx, uint64_t flags, int err);

  // The send a receive completion names: by tag, by CQ data, else by the id in the
  // payload's first bytes, at `at`.
  Op* send_of(const Op& r, const uint8_t* at, uint64_t tag, uint64_t flags, uint64_t data);

  // The send whose message receive `r` (named `who`) got, now taken by it: the message
  // came from an endpoint of the AV, names a send `r` could match, from that send's
  // endpoint, and no receive took that send before. nullptr when it names no send.
  Op* take_send(Op& r, const std::string& who, const uint8_t* at, uint64_t tag, uint64_t flags,
                uint64_t data, std::optional<fi_addr_t> src);

  void on_recv(Op& r, size_t len, size_t olen, uint64_t tag, uint64_t flags, uint64_t data,
               std::optional<fi_addr_t> src, int err);

  // A multi-receive's completions: each message lands at `at` (which the completion
  // names) in a part of the buffer no other message took; messages from one sender take
  // parts in their send order; and the last completion releases the buffer with
  // FI_MULTI_RECV. Then the parts tile the buffer's start with no gap, and fewer than the
  // endpoint's FI_OPT_MIN_MULTI_RECV bytes remain, unless a cancel released it (its
  // FI_ECANCELED entry comes after the message completions). Bytes past a message are not
  // checked: the next one may be there.
  void on_multi(Op& m, const void* at, size_t len, size_t olen, uint64_t flags, uint64_t data,
                std::optional<fi_addr_t> src, int err);

  // A message `s` placed at the start of `buffer`, which had `room` bytes for it: length,
  // truncation and overflow, CQ data, every byte and, with `tail_untouched`, nothing past
  // the message written up to the buffer's end (a receive's buffer holds one byte more).
  void check_delivery(const std::string& pair, std::span<const uint8_t> buffer, size_t room,
                      bool tail_untouched, const Op& s, size_t len, size_t olen, uint64_t flags,
                      uint64_t data, int err);

  // A probe's completions: the peek's (found or FI_ENOMSG), then for a claim found the
  // claiming receive's.
  void on_probe(Op& p, size_t len, size_t olen, uint64_t tag, uint64_t flags, uint64_t data,
                std::optional<fi_addr_t> src, int err);

  // The target's completion of a write with data: no context, FI_REMOTE_WRITE, the data.
  void on_remote_write(size_t len, uint64_t data, fi_addr_t src);

  void on_rma(Op& a, int err);

  void on_atomic(Op& a, uint64_t flags, int err);

  // At the end, per target word: the old values the fetching sums on a chain word got,
  // put in order, step from its start by each one's operand to the value it holds (so
  // each was applied exactly once, none lost, none doubled), and every atomic read got
  // one of those values; a sum word holds its start plus every sum that succeeded.
  void check_atomic_words();

  // At the end: each endpoint's remote-access counter counted every valid read, write and
  // atomic aimed at it once (none refused, none twice, however packets were lost).
  void check_remote_access_counts();

  // One completion (a CQ entry or error entry) of `op`, checked by its kind's on_*.
  void complete(Op& op, const void* buf, size_t len, size_t olen, uint64_t tag, uint64_t flags,
                uint64_t data, std::optional<fi_addr_t> src, int err);

  // One batch of completions, successes and errors.
  void read_cq();

  bool ended(const Op& op) const { return op.inject || op.completions == op.expected_completions; }
  // Every send received (or failed towards the dead endpoint, injects too) and every op but the
  // receives ended; with `receives_too`, the receives as well.
  bool settled(bool receives_too) const;

  // Runs the provider until `done` or the deadline; false on the deadline.
  template <typename Done>
  bool run_until(Done&& done, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      read_cq();
    }
    return true;
  }

  // For failure messages: one op, and the first ops that have not ended.
  static std::string describe(const Op& op);
  std::string unfinished() const;

  // Every message still unreceived gets a catch-all receive of its kind at its target.
  void catch_everything();

  // FI_ORDER_SAS: of two receives at one endpoint that both could take either of two
  // sends from one source, the one posted first took the one sent first; a multi-receive
  // buffer keeps its place in line while it takes message after message. Probes are left
  // out (a claim takes its message out of turn, by design).
  void check_order();

  // The whole test for one seed: kSteps random calls, then every message caught, the
  // provider run until all has ended, and the end checks. Sets `failure` if any failed.
  void storm(uint64_t seed);
};

}  // namespace spray_fi_test::storm
