// Posted receives and the rules that match an incoming message to one.
//
// Two FIFO lists, untagged and tagged, in the order the user posted. A message matches
// the first receive in its list whose source is "any" or the sender, and, for tagged
// receives, whose tag agrees with the message's tag on every bit not in `ignore`.
// Receives live in a fixed pool linked by index; nothing allocates after construction.
//
// A multi-receive buffer (RecvSpec::multi, libfabric's FI_MULTI_RECV) takes message after
// message, packed back to back in the order they match, and keeps its place in the queue
// while at least multi_min_free bytes remain. Each match carves the next part of it: the
// RecvSpec take_match returns describes that part, and each part completes on its own.
// The buffer is released when it no longer sits in the queue (full, or canceled) and the
// last of its parts has completed (settle).
#pragma once

#include <cstdint>
#include <optional>

#include "transport/base/slot_pool.h"
#include "transport/base/status.h"
#include "transport/ses/completion.h"

namespace spray::ses {

struct RecvSpec {
  uint8_t* buffer = nullptr;
  uint64_t length = 0;
  UserContext context = 0;
  bool tagged = false;
  uint64_t tag = 0;
  uint64_t ignore = 0;              // tag bits that do not take part in matching
  PeerIndex source = pds::kNoPeer;  // kNoPeer: any source
  bool discard = false;             // drop the message's data and report no completion
  bool multi = false;               // a multi-receive buffer (see above); untagged only
  uint64_t multi_min_free = 0;      // it leaves the queue when fewer bytes than this remain
  // Set by PostedReceives on a part carved from a multi-receive buffer: that buffer's
  // index for settle(). kNoMulti on ordinary receives.
  uint32_t multi_slot = kNoMulti;
  static constexpr uint32_t kNoMulti = 0xffffffff;

  bool accepts(bool msg_tagged, PeerIndex from, uint64_t msg_tag) const {
    if (tagged != msg_tagged) return false;
    if (source != pds::kNoPeer && source != from) return false;
    return !tagged || ((tag ^ msg_tag) & ~ignore) == 0;
  }
};

// What became of a multi-receive buffer when one of its parts completed or it was
// canceled (PostedReceives::settle).
enum class MultiRecvState : uint8_t {
  kHeld,              // still queued, or parts of it still landing
  kReleased,          // left the queue full and its last part is done
  kReleasedCanceled,  // canceled, and its last part (if any) is done
};

class PostedReceives {
 public:
  // Room for `capacity` posted receives, and as many multi-receive buffers (queued, or
  // out of the queue with parts still landing).
  explicit PostedReceives(uint32_t capacity) : pool_(capacity), multi_(capacity) {}

  // kAgain when the pool is full.
  Status post(const RecvSpec& r);
  // The first receive that accepts a message of `length` bytes. An ordinary receive is
  // removed from the queue; a multi-receive buffer gives its next part (at most `length`
  // bytes of it) and stays queued while multi_min_free bytes remain.
  std::optional<RecvSpec> take_match(bool tagged, PeerIndex from, uint64_t tag, uint64_t length);
  // Removes the receive posted with `context`, if still posted. A multi-receive buffer's
  // release then waits for settle(slot, false) and its parts.
  std::optional<RecvSpec> cancel(UserContext context);
  // A part of multi-receive buffer `slot` completed (part_done), or the buffer was just
  // canceled (!part_done). Says whether the buffer is now released; once released, the
  // slot is free.
  MultiRecvState settle(uint32_t slot, bool part_done);
  // Whether multi-receive buffer `slot` still sits in the queue.
  bool queued(uint32_t slot) const { return multi_.in_use(slot) && multi_[slot].queued; }
  uint32_t size() const { return pool_.used(); }

 private:
  struct Node {
    RecvSpec spec;
    uint32_t next = kNil;
  };
  // A multi-receive buffer: `used` of its bytes carved out so far, `parts` carved parts
  // not yet completed. It lives until it left the queue and parts is 0.
  struct MultiBuffer {
    uint64_t used = 0;
    uint32_t parts = 0;
    bool queued = true;
    bool canceled = false;
  };
  struct List {
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };
  static constexpr uint32_t kNil = 0xffffffff;

  template <class Pred>
  std::optional<uint32_t> find_first(const List& list, Pred&& pred, uint32_t& prev) const;
  RecvSpec unlink(List& list, uint32_t node, uint32_t prev);

  SlotPool<Node> pool_;
  SlotPool<MultiBuffer> multi_;
  List untagged_;
  List tagged_;
};

}  // namespace spray::ses
