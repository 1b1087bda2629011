#include "transport/ses/matching.h"

namespace spray::ses {

Status PostedReceives::post(const RecvSpec& r) {
  const auto slot = pool_.acquire();
  if (!slot) return Status::kAgain;
  pool_[*slot].spec = r;
  pool_[*slot].next = kNil;
  List& list = r.tagged ? tagged_ : untagged_;
  if (list.tail == kNil) {
    list.head = *slot;
  } else {
    pool_[list.tail].next = *slot;
  }
  list.tail = *slot;
  return Status::kOk;
}

template <class Pred>
std::optional<RecvSpec> PostedReceives::take_first(List& list, Pred&& pred) {
  uint32_t prev = kNil;
  for (uint32_t i = list.head; i != kNil; prev = i, i = pool_[i].next) {
    if (!pred(pool_[i].spec)) continue;
    const uint32_t following = pool_[i].next;
    if (prev == kNil) {
      list.head = following;
    } else {
      pool_[prev].next = following;
    }
    if (list.tail == i) list.tail = prev;
    RecvSpec spec = pool_[i].spec;
    pool_.release(i);
    return spec;
  }
  return std::nullopt;
}

std::optional<RecvSpec> PostedReceives::take_match(bool tagged, PeerIndex from, uint64_t tag) {
  return take_first(tagged ? tagged_ : untagged_,
                    [&](const RecvSpec& r) { return r.accepts(tagged, from, tag); });
}

std::optional<RecvSpec> PostedReceives::cancel(UserContext context) {
  auto by_context = [&](const RecvSpec& r) { return r.context == context; };
  if (auto r = take_first(untagged_, by_context)) return r;
  return take_first(tagged_, by_context);
}

}  // namespace spray::ses
