// SES as the receiver of a sender that stops: what a send or RMA write received in part,
// or a send waiting for an earlier one of its sender's, becomes when that sender gives up
// (its MSG_ERR, ses_rx.cc's on_skip) or fails (a PDC to it goes unanswered) and sends no
// MSG_ERR at all. Such messages are listed as they arrive (held_messages_); their senders
// are probed once they stall (peers_we_wait_on), and when one fails what it left ends
// as its MSG_ERRs would have ended it, so nothing of a dead peer holds a receive, an rx
// slot or a promised tx slot for good.
#include <algorithm>

#include "transport/ses/ses.h"

namespace spray::ses {

void Ses::end_partial_send(uint32_t slot) {
  RxMessage& m = rx_[slot];
  if (m.matched) {
    complete_receive(m, Status::kPeerUnreachable, 0);
  } else if (m.claimed) {
    for (auto& c : claimed_) {
      if (c.second == slot) c.second = kNone;  // recv_claimed reports the loss
    }
  } else {
    unlink_unexpected(slot);
  }
  free_rx(slot);
}

void Ses::end_partial_write(uint32_t slot) {
  ended_writes_.remember(rx_[slot].peer, rx_[slot].msg_id);
  free_rx(slot);  // and the tx slot promised for its response
}

bool Ses::still_held(const ListedMessage& a) const {
  if (!rx_.in_use(a.slot)) return false;
  const RxMessage& m = rx_[a.slot];
  return m.peer == a.peer && m.msg_id == a.msg_id && !m.skip &&
         (m.awaiting_order || received_in_part(a.slot) || write_in_part(a.slot));
}

void Ses::list_held_message(uint32_t slot) {
  // Full means most entries are stale: the live ones are at most the rx slots.
  if (held_messages_.size() == held_messages_.capacity()) {
    std::erase_if(held_messages_, [this](const ListedMessage& a) { return !still_held(a); });
  }
  held_messages_.push_back({slot, rx_[slot].peer, rx_[slot].msg_id});
}

void Ses::stalled_senders(std::vector<PeerIndex>& out, Time now) {
  std::erase_if(held_messages_, [this](const ListedMessage& a) { return !still_held(a); });
  for (const ListedMessage& a : held_messages_) {
    if (stalled(a.slot, now) && std::find(out.begin(), out.end(), a.peer) == out.end()) {
      out.push_back(a.peer);
    }
  }
}

// A sender that failed (a PDC to it went unanswered, or it forgot ours) sends no MSG_ERR
// for what it left halfway, nor for a send of which nothing came. If it was alive after
// all and goes on with such a send, the rest is refused (the late copies in on_eager), so
// that it fails there too: both ends agree that the send failed, at the cost of the
// retries that tell its sender so.
void Ses::end_sends_of(std::span<const PeerIndex> peers, Time now, bool whatever_their_age) {
  // on_skip frees and may take rx slots, but lists nothing: the loop's list stays put.
  for (const ListedMessage& a : held_messages_) {
    if (!still_held(a) || !(whatever_their_age || stalled(a.slot, now)) ||
        std::find(peers.begin(), peers.end(), a.peer) == peers.end()) {
      continue;
    }
    if (write_in_part(a.slot)) {
      ++stats_.writes_abandoned;
      end_partial_write(a.slot);
    } else if (received_in_part(a.slot)) {
      ++stats_.receives_abandoned;
      (void)on_skip(a.peer, a.msg_id);
    }
  }
  for (PeerIndex peer : peers) pass_over_missing_ids(peer, now, whatever_their_age);
}

void Ses::pass_over_missing_ids(PeerIndex peer, Time now, bool whatever_their_age) {
  // The farthest stalled send of `peer` that waits for its turn, as a distance ahead of
  // the next id expected (ids are 15 bits; see behind_order).
  uint16_t reach = 0;
  bool found = false;
  for (const ListedMessage& a : held_messages_) {
    if (a.peer != peer || !still_held(a) || !rx_[a.slot].awaiting_order ||
        !(whatever_their_age || stalled(a.slot, now))) {
      continue;
    }
    reach = std::max(reach, static_cast<uint16_t>((a.msg_id - expect_seq_[peer]) & 0x7fff));
    found = true;
  }
  if (!found) return;
  const auto farthest = static_cast<uint16_t>((expect_seq_[peer] + reach) & 0x7fff);
  // The next id expected never names a message here (one that arrives is admitted and
  // the order moves past it), so each pass skips an id that never came and matches what
  // waited right behind it; at most `reach` passes.
  while (!behind_order(peer, farthest)) {
    ++stats_.missing_ids_passed_over;
    (void)on_skip(peer, expect_seq_[peer]);
  }
}

}  // namespace spray::ses
