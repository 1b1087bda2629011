// What the transport reports to its user when an operation ends, and the queue that
// holds those reports until the user polls them.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/base/status.h"
#include "transport/pds/pdc.h"

namespace spray::ses {

using pds::PeerIndex;
using UserContext = uint64_t;

enum class OpKind : uint8_t {
  kSend,
  kTaggedSend,
  kRecv,
  kTaggedRecv,
  kWrite,
  kRead,
  // The target side of a peer's operation on our registered memory. A write that
  // carried immediate data is always reported; with SesConfig::report_remote_access,
  // every write, read and atomic that succeeded is (none that was refused).
  kRemoteWrite,        // all its bytes placed
  kRemoteRead,         // all its bytes sent and acknowledged
  kRemoteAtomic,       // applied, returning nothing
  kRemoteFetchAtomic,  // applied, returning the old values (compare-and-swap, atomic read)
  kDatagramSend,
  kAtomic,       // an atomic that returns nothing
  kFetchAtomic,  // an atomic that returns the old values (compare-and-swap too)
};

// The target-side kinds: a peer's access to our registered memory, with no context of ours.
constexpr bool is_remote_access(OpKind op) {
  return op == OpKind::kRemoteWrite || op == OpKind::kRemoteRead || op == OpKind::kRemoteAtomic ||
         op == OpKind::kRemoteFetchAtomic;
}

struct Completion {
  UserContext context = 0;
  OpKind op = OpKind::kSend;
  Status status = Status::kOk;
  // Bytes placed (receive) or transferred (send, RMA); the remote atomics: bytes the
  // atomic changed (0 for an atomic read).
  uint64_t length = 0;
  uint64_t overflow = 0;  // truncated receive: the message's bytes that did not fit
  uint64_t tag = 0;       // tagged receive: the sender's tag
  uint64_t data = 0;      // immediate data, when has_data
  bool has_data = false;
  PeerIndex peer = pds::kNoPeer;  // receive: the source
  uint8_t* buffer = nullptr;      // receive: where its bytes start (a multi-receive part)
  // Multi-receive buffer: this is the buffer's last completion; it is the user's again.
  bool released = false;
  uint64_t memory_key = 0;  // the remote kinds: the key of the region the peer accessed
};

// A FIFO of completions. Grows by doubling when full, so a slow consumer never loses a
// completion; the steady state allocates nothing. The ring's size is a power of two so
// that wrapping is a mask, not a division (one push and one pop per message).
class CompletionQueue {
 public:
  explicit CompletionQueue(size_t initial = 1024)
      : ring_(std::bit_ceil(std::max<size_t>(initial, 1))) {}

  // Appends a fresh completion and returns it for the caller to fill. Built in its slot
  // rather than copied in: a Completion assembled on the stack and then copied was read
  // back before its byte-wide stores had landed, a stall on every message.
  Completion& emplace() {
    if (count_ == ring_.size()) grow();
    Completion& c = ring_[(head_ + count_) & mask()];
    c = {};
    ++count_;
    return c;
  }
  bool pop(Completion& out) {
    if (count_ == 0) return false;
    out = ring_[head_];
    head_ = (head_ + 1) & mask();
    --count_;
    return true;
  }
  size_t size() const { return count_; }

 private:
  size_t mask() const { return ring_.size() - 1; }
  void grow() {
    std::vector<Completion> bigger(ring_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & mask()];
    ring_.swap(bigger);
    head_ = 0;
  }

  std::vector<Completion> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace spray::ses
