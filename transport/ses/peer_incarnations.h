// PeerIncarnations: this engine's incarnation, its peers' as it knows them, and which
// peers are owed a hello. The bookkeeping half of telling a peer that restarted at the
// same address from the one before it; why, and what SES does on a restart, is in
// ses_incarnation.cc.
//
// Per peer: its incarnation (0: not known yet), the one before its last restart (its
// late packets are dropped), where its hello stands, whether it has acknowledged a
// request of ours and whether it may lack what it acknowledged, 7 bytes in all. check()
// runs on every request, before PDS: a few compares, and an append when a hello
// becomes owed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "transport/base/time.h"
#include "transport/pds/pds.h"

namespace spray::ses {

// What the incarnation words of a peer's request say about it (PeerIncarnations::check).
enum class SenderIncarnation : uint8_t {
  kCurrent,    // the incarnation we know (or learn now, or none given), talking to ours
  kRestarted,  // a new incarnation at the peer's address: the one before is gone
  kRetired,    // a late packet of the incarnation before the peer's last restart
  kStaleView,  // it talks to an incarnation of ours before this one: it must learn ours
};

class PeerIncarnations {
 public:
  // The low half of a request's incarnation words when its sender does not know the
  // receiver's incarnation but has had a request acknowledged at the receiver's address
  // (0 when it has not). A receiver that has never heard of the sender then knows that a
  // predecessor of its own took that request: the sender holds order state with it that
  // the receiver lacks. Never drawn as an incarnation.
  static constexpr uint16_t kAcknowledgedUnknown = 0xffff;

  // `ours` is never 0 (0 on the wire means "none given") nor kAcknowledgedUnknown: see
  // draw().
  PeerIncarnations(uint32_t max_peers, uint16_t ours, Duration hello_after)
      : ours_(ours),
        hello_after_(hello_after),
        known_(max_peers, 0),
        retired_(max_peers, 0),
        hello_(max_peers, Hello::kNone),
        acknowledged_(max_peers, 0),
        unvouched_(max_peers, 0) {}

  // A random incarnation, never 0 nor kAcknowledgedUnknown.
  static uint16_t draw();
  // The first of the low 16 bits of source()'s draws that may be an incarnation.
  template <class Source>
  static uint16_t draw_from(Source&& source) {
    for (;;) {
      const auto drawn = static_cast<uint16_t>(source());
      if (drawn != 0 && drawn != kAcknowledgedUnknown) return drawn;
    }
  }

  uint16_t ours() const { return ours_; }
  // `peer`'s incarnation as we know it; 0 until it has sent us a request or told us.
  uint16_t of(pds::PeerIndex peer) const { return known_[peer]; }
  // The standard header's `initiator` field towards `peer`: ours in the high 16 bits,
  // the peer's as we know it in the low 16 (not known yet, or known but unvouched:
  // kAcknowledgedUnknown once the peer has acknowledged a request of ours, else 0).
  uint32_t words_to(pds::PeerIndex peer) const {
    uint16_t view = known_[peer];
    if (acknowledged_[peer] && (view == 0 || unvouched_[peer])) view = kAcknowledgedUnknown;
    return (uint32_t{ours_} << 16) | view;
  }
  // Whether `peer` may lack the order state that an engine at its address acknowledged:
  // we learned its incarnation from a request that did not name ours, after requests of
  // ours had been acknowledged there. Either that request left before the peer heard
  // from us (it crossed ours), or the peer is a successor of the engine that
  // acknowledged them, which restarted before we learned its incarnation and spoke to us
  // first. Our requests say kAcknowledgedUnknown until the peer names us: the engine
  // that acknowledged them takes them, a successor refuses them (kStaleView), and we
  // start our order with it again (Ses::on_peer_lost_our_order).
  bool unvouched(pds::PeerIndex peer) const { return unvouched_[peer] != 0; }
  // `peer` acknowledged a request of ours over a PDC: whoever it is, it has our
  // incarnation (it read the request's words before taking it).
  void acknowledged_by(pds::PeerIndex peer) { acknowledged_[peer] = 1; }

  // What the `initiator` words of a request from `peer` say. Learns the peer's
  // incarnation at first contact, and for a request `over_pdc` that does not name ours
  // owes the peer a hello, due hello_after from `now`. A request meant for an earlier
  // incarnation of ours teaches nothing (its sender may be gone too): one that names it,
  // and, over a PDC, one from a peer we have never heard of that says an engine at our
  // address acknowledged it before (kAcknowledgedUnknown). Over UUD and RUDI, which keep
  // no order, the latter is taken but teaches nothing either, so that the peer's next
  // request over a PDC is still refused. Those words from an incarnation of the peer
  // other than the one we know mark a late packet (kRetired). On kRestarted and
  // kStaleView, `incarnation` is the sender's.
  SenderIncarnation check(pds::PeerIndex peer, uint32_t words, bool over_pdc, Time now,
                          uint16_t& incarnation) {
    incarnation = 0;
    const auto sender = static_cast<uint16_t>(words >> 16);
    auto seen = static_cast<uint16_t>(words & 0xffff);
    if (sender == 0) return SenderIncarnation::kCurrent;  // built by hand: names none
    uint16_t& known = known_[peer];
    if (seen == kAcknowledgedUnknown) {
      // An engine at our address acknowledged a request of the sender's, and the sender
      // has not learned its incarnation.
      if (known == 0 && !over_pdc) return SenderIncarnation::kCurrent;
      if (known == 0) {  // never heard of it: that engine was a predecessor of ours
        incarnation = sender;
        return SenderIncarnation::kStaleView;
      }
      // We know another incarnation of the peer, so this one is older: a newer one had
      // nothing acknowledged at our address before we learned it from its first request
      // (while we run, no other engine there acknowledges anything). A late packet.
      if (sender != known) return SenderIncarnation::kRetired;
      seen = 0;  // it was us: it has not learned ours yet
    }
    if (seen != 0 && seen != ours_) {
      incarnation = sender;
      return SenderIncarnation::kStaleView;
    }
    if (sender != known) {
      if (known != 0 && sender == retired_[peer]) return SenderIncarnation::kRetired;
      if (known != 0) {
        incarnation = sender;
        return SenderIncarnation::kRestarted;
      }
      known = sender;  // first contact
      if (seen != ours_ && acknowledged_[peer]) unvouched_[peer] = 1;
    }
    if (seen == ours_) {
      hello_[peer] = Hello::kTold;
      unvouched_[peer] = 0;  // it learned ours from a request of ours that it took
    } else if (over_pdc && hello_[peer] == Hello::kNone) {
      hello_[peer] = Hello::kOwed;
      owed_.push_back({peer, now + hello_after_});
      next_due_ = std::min(next_due_, owed_.front().due);
    }
    return SenderIncarnation::kCurrent;
  }

  // `peer` restarted as `incarnation` (0: not known yet): the one we knew is retired,
  // and its hello starts over, as does what it has acknowledged.
  void restarted(pds::PeerIndex peer, uint16_t incarnation) {
    retired_[peer] = known_[peer];
    known_[peer] = incarnation;
    hello_[peer] = Hello::kNone;  // an entry in owed_ for it is stale now
    acknowledged_[peer] = 0;
    unvouched_[peer] = 0;
  }
  // `peer`, whose incarnation we know, refused a request of ours as meant for its
  // predecessor: our order with it starts again, and nothing of it is acknowledged.
  void lost_our_order(pds::PeerIndex peer) {
    acknowledged_[peer] = 0;
    unvouched_[peer] = 0;
  }
  // A request of ours is on its way to `peer`: it carries our incarnation, so the peer
  // learns it without a hello.
  void will_learn_us(pds::PeerIndex peer) {
    if (hello_[peer] == Hello::kOwed) hello_[peer] = Hello::kTold;
  }
  // The hello to `peer` failed: owed again at its next request that does not name us.
  void hello_failed(pds::PeerIndex peer) { hello_[peer] = Hello::kNone; }

  // Whether a hello may be due: the caller looks only then (per packet, one compare).
  bool hellos_due(Time now) const { return next_due_ <= now; }
  // Calls send(peer) for each peer whose hello is due and still owed; send returns false
  // when it has no room now, and that hello stays owed (looked at again hello_after
  // later, not at every packet). A sent hello marks the peer told through
  // will_learn_us, as any request of ours does; send calls hello_failed if it could not
  // start it.
  template <class Send>
  void send_due(Time now, Send&& send) {
    size_t kept = 0;
    for (const Owed& owed : owed_) {
      if (hello_[owed.peer] != Hello::kOwed) continue;  // it learned ours meanwhile
      if (owed.due > now || !send(owed.peer)) owed_[kept++] = owed;
    }
    owed_.resize(kept);
    next_due_ = Time{INT64_MAX};
    for (const Owed& owed : owed_) next_due_ = std::min(next_due_, owed.due);
    if (next_due_ <= now) next_due_ = now + hello_after_;
  }

 private:
  enum class Hello : uint8_t {
    kNone,  // not needed so far
    kOwed,  // it sent us a request without knowing our incarnation: in owed_
    kTold,  // it knows ours (it named it, or a request or hello of ours went to it);
            // kNone again when one of us restarts or the hello fails
  };
  // A peer owed a hello, and when it is due. Oldest first; an entry whose peer is no
  // longer kOwed is stale.
  struct Owed {
    pds::PeerIndex peer;
    Time due;
  };

  uint16_t ours_;
  Duration hello_after_;
  std::vector<uint16_t> known_;
  std::vector<uint16_t> retired_;
  std::vector<Hello> hello_;
  std::vector<uint8_t> acknowledged_;  // 1: it acknowledged a request of ours over a PDC
  std::vector<uint8_t> unvouched_;     // 1: it may lack that order state (unvouched())
  std::vector<Owed> owed_;
  Time next_due_{INT64_MAX};  // the earliest due in owed_ (INT64_MAX when none)
};

}  // namespace spray::ses
