#include "transport/ses/matching.h"

#include <algorithm>

namespace spray::ses {

Status PostedReceives::post(const RecvSpec& r) {
  const auto slot = pool_.acquire();
  if (!slot) return Status::kAgain;
  Node& node = pool_[*slot];
  node.spec = r;
  node.next = kNil;
  node.spec.multi_slot = RecvSpec::kNoMulti;
  if (r.multi) {
    const auto buffer = multi_.acquire();
    if (!buffer) {
      pool_.release(*slot);
      return Status::kAgain;
    }
    node.spec.multi_slot = *buffer;
  }
  List& list = r.tagged ? tagged_ : untagged_;
  if (list.tail == kNil) {
    list.head = *slot;
  } else {
    pool_[list.tail].next = *slot;
  }
  list.tail = *slot;
  return Status::kOk;
}

// The first node of `list` whose receive satisfies `pred`; `prev` is set to the node
// before it (kNil at the head).
template <class Pred>
std::optional<uint32_t> PostedReceives::find_first(const List& list, Pred&& pred,
                                                   uint32_t& prev) const {
  prev = kNil;
  for (uint32_t i = list.head; i != kNil; prev = i, i = pool_[i].next) {
    if (pred(pool_[i].spec)) return i;
  }
  return std::nullopt;
}

// Takes `node` out of `list` and frees it; returns its receive.
RecvSpec PostedReceives::unlink(List& list, uint32_t node, uint32_t prev) {
  const uint32_t following = pool_[node].next;
  if (prev == kNil) {
    list.head = following;
  } else {
    pool_[prev].next = following;
  }
  if (list.tail == node) list.tail = prev;
  RecvSpec spec = pool_[node].spec;
  pool_.release(node);
  return spec;
}

std::optional<RecvSpec> PostedReceives::take_match(bool tagged, PeerIndex from, uint64_t tag,
                                                   uint64_t length) {
  List& list = tagged ? tagged_ : untagged_;
  uint32_t prev = kNil;
  const auto node = find_first(
      list, [&](const RecvSpec& r) { return r.accepts(tagged, from, tag); }, prev);
  if (!node) return std::nullopt;
  const RecvSpec& whole = pool_[*node].spec;
  if (!whole.multi) return unlink(list, *node, prev);
  // Carve the next part. A message longer than what is left gets the rest (truncated).
  MultiBuffer& b = multi_[whole.multi_slot];
  RecvSpec part = whole;
  part.buffer = whole.buffer + b.used;
  part.length = std::min(length, whole.length - b.used);
  b.used += part.length;
  ++b.parts;
  const uint64_t left = whole.length - b.used;
  if (left == 0 || left < whole.multi_min_free) {
    b.queued = false;
    unlink(list, *node, prev);
  }
  return part;
}

std::optional<RecvSpec> PostedReceives::cancel(UserContext context) {
  auto by_context = [&](const RecvSpec& r) { return r.context == context; };
  for (List* list : {&untagged_, &tagged_}) {
    uint32_t prev = kNil;
    const auto node = find_first(*list, by_context, prev);
    if (!node) continue;
    RecvSpec spec = unlink(*list, *node, prev);
    if (spec.multi) {
      multi_[spec.multi_slot].queued = false;
      multi_[spec.multi_slot].canceled = true;
    }
    return spec;
  }
  return std::nullopt;
}

MultiRecvState PostedReceives::settle(uint32_t slot, bool part_done) {
  if (!multi_.in_use(slot)) return MultiRecvState::kHeld;
  MultiBuffer& b = multi_[slot];
  if (part_done && b.parts > 0) --b.parts;
  if (b.queued || b.parts > 0) return MultiRecvState::kHeld;
  const bool canceled = b.canceled;
  multi_.release(slot);
  return canceled ? MultiRecvState::kReleasedCanceled : MultiRecvState::kReleased;
}

}  // namespace spray::ses
