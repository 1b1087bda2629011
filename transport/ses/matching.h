// Posted receives and the rules that match an incoming message to one.
//
// Two FIFO lists, untagged and tagged, in the order the user posted. A message matches
// the first receive in its list whose source is "any" or the sender, and, for tagged
// receives, whose tag agrees with the message's tag on every bit not in `ignore`.
// Receives live in a fixed pool linked by index; nothing allocates after construction.
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

  bool accepts(bool msg_tagged, PeerIndex from, uint64_t msg_tag) const {
    if (tagged != msg_tagged) return false;
    if (source != pds::kNoPeer && source != from) return false;
    return !tagged || ((tag ^ msg_tag) & ~ignore) == 0;
  }
};

class PostedReceives {
 public:
  explicit PostedReceives(uint32_t capacity) : pool_(capacity) {}

  // kAgain when the pool is full.
  Status post(const RecvSpec& r);
  // Removes and returns the first receive that accepts the message.
  std::optional<RecvSpec> take_match(bool tagged, PeerIndex from, uint64_t tag);
  // Removes the receive posted with `context`, if still posted.
  std::optional<RecvSpec> cancel(UserContext context);
  uint32_t size() const { return pool_.used(); }

 private:
  struct Node {
    RecvSpec spec;
    uint32_t next = kNil;
  };
  struct List {
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };
  static constexpr uint32_t kNil = 0xffffffff;

  template <class Pred>
  std::optional<RecvSpec> take_first(List& list, Pred&& pred);

  SlotPool<Node> pool_;
  List untagged_;
  List tagged_;
};

}  // namespace spray::ses
