// The ids of RMA writes that a target ended in part because their initiator failed
// (Ses::end_sends_of), so that a late packet of one, should the initiator have been alive
// after all, is refused and not taken for a new write, which would never be whole nor
// answered: the initiator's write then fails instead of waiting for good. RMA ids are
// unordered, so unlike a send's, an ended write's id cannot be told by its place in the
// sender's order; it is remembered instead.
//
// An id is forgotten when the write's MSG_ERR comes (its initiator has given up on it, so
// nothing more of it comes) or, oldest first, when kRemembered newer ones have ended. A
// fixed array, so remembering allocates nothing; looked through only when a write starts
// while some are remembered, which is rare (a peer failed).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "transport/pds/pds.h"

namespace spray::ses {

class EndedWriteIds {
 public:
  static constexpr size_t kRemembered = 64;

  void remember(pds::PeerIndex peer, uint16_t id) {
    Entry& e = ids_[next_];
    if (!is_write_id(e.second)) ++count_;  // a free entry; else the oldest goes
    e = {peer, id};
    next_ = (next_ + 1) % kRemembered;
  }
  bool contains(pds::PeerIndex peer, uint16_t id) const {
    return count_ > 0 && std::find(ids_.begin(), ids_.end(), Entry{peer, id}) != ids_.end();
  }
  void forget(pds::PeerIndex peer, uint16_t id) {
    if (count_ == 0) return;
    for (Entry& e : ids_) {
      if (e == Entry{peer, id}) {
        e = {};
        --count_;
      }
    }
  }
  // Every id of `peer`'s: it restarted, and its new incarnation's ids are new writes.
  void forget_peer(pds::PeerIndex peer) {
    if (count_ == 0) return;
    for (Entry& e : ids_) {
      if (is_write_id(e.second) && e.first == peer) {
        e = {};
        --count_;
      }
    }
  }
  size_t size() const { return count_; }

 private:
  using Entry = std::pair<pds::PeerIndex, uint16_t>;
  // RMA ids are 0x8000-0xffff: an entry whose id is below is free (as all start).
  static bool is_write_id(uint16_t id) { return (id & 0x8000) != 0; }
  std::array<Entry, kRemembered> ids_{};
  size_t next_ = 0;   // where the next id goes, over the oldest
  size_t count_ = 0;  // entries in use
};

}  // namespace spray::ses
