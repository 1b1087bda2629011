// Peer incarnations: telling a peer that restarted at the same address from the one
// before it.
//
// SES keeps per peer address the next send id to give it (send_seq_) and the next to
// match from it (expect_seq_), what it left here half-received or waiting for its turn,
// and the MSG_ERRs owed to it. A process that restarts at the same address (a fixed UDP
// port; DPDK's default is 4800) starts all of that again from nothing while its peers go
// on with the old: they refused its new send ids as late copies of old ones, and it held
// theirs for good, waiting for ids its predecessor had taken, while their sends completed
// OK at their end.
//
// So each engine draws an incarnation when it starts (16 random bits, never 0 nor
// 0xffff), and every request it sends carries it in the high half of the SES standard
// header's `initiator` field, with the receiver's incarnation as the sender knows it (0:
// not yet) in the low half. (UET leaves the field's use to the implementation; Spray had
// sent 0.) A receiver, before PDS sees the packet (check_incarnation, called by the
// engine):
//   - learns a sender's incarnation from its first request;
//   - takes a request that names another incarnation than the one it knows for a restart
//     (kRestarted): the engine has PDS fail every PDC with the peer (Pds::forget_peer),
//     then on_peer_restarted ends what the old incarnation left, fails what waited on it,
//     and starts both orders again from 0; then the packet goes on as the new one's;
//   - drops late packets of the incarnation before (kRetired);
//   - refuses a request meant for an earlier incarnation of its own (kStaleView), and
//     learns nothing from it, with a NACK (UNEXP_EVENT, vendor code
//     wire::kStaleIncarnation) whose payload carries the request's sender's incarnation
//     and its own. That sender handles it as our restart: the refused message fails
//     (kPeerUnreachable), as everything in flight to our predecessor does, and what it
//     sends from then on is taken. A NACK that names another incarnation of the sender
//     is ignored: it refused a request of the sender's predecessor, which arrived late
//     (the NACK goes to an address, and a new engine there reuses its predecessor's PDC
//     ids, so PDS alone would take it for one of its own).
// A sender that does not know our incarnation cannot name it. So a receiver that hears
// from such a sender over a PDC sends it a hello (a NO_OP request, whose incarnation
// words are its message) SesConfig::hello_after (10 ms) later, unless the sender has
// learned ours by then from a request of ours (send_hellos). Until it has, the sender
// says in the low half whether a request of its has been acknowledged at our address
// (PeerIncarnations::kAcknowledgedUnknown; 0 while none has): a receiver that has never
// heard of it and reads that over a PDC is not the engine that acknowledged it but a
// successor, which lacks the order state the sender holds, and refuses the request as
// one meant for a predecessor (kStaleView, with the NACK). So a restart of ours within
// those 10 ms is seen too. If our successor speaks to the sender first, the sender
// learns its incarnation from a request that does not name the sender: it cannot tell
// a successor from the engine it knew whose first request crossed its own, and must not
// fail operations on a guess. So it asks: until we name it, its requests go on saying
// kAcknowledgedUnknown (PeerIncarnations::unvouched). The engine that acknowledged them
// knows the sender and takes them; a successor refuses them as above, and the sender,
// whose view of our incarnation is right and only its order to us stale, fails the
// PDCs it opened to our predecessor and what it sent on them, and starts its order to
// us again (Ses::on_peer_lost_our_order); our order to it, which it took from our
// first request on, goes on.
// A request whose high half is 0 names no incarnation (one built by hand: fuzzers, wire
// tests) and is taken as from the incarnation known.
//
// What it costs: 7 bytes of state a peer, one load and compare a request (the field is
// read in place, not decoded), and a hello to a peer that only sends to us. What it does
// not cover: a restart that draws its predecessor's number (1 in 65534); a late packet of
// an incarnation two restarts back (taken for a third restart); forged packets, which can
// end a peer's operations this way as they can by other ones unless TSS seals them.
#include <algorithm>
#include <random>

#include "transport/ses/ses.h"

namespace spray::ses {

uint16_t PeerIncarnations::draw() {
  std::random_device source;
  return draw_from(source);
}

SenderIncarnation Ses::check_incarnation(PeerIndex peer, wire::NextHeader next,
                                         std::span<const uint8_t> bytes, bool over_pdc, Time now,
                                         uint16_t& incarnation) {
  incarnation = 0;
  if (next != wire::NextHeader::kSesStandardRequest || peer >= cfg_.max_peers) {
    return SenderIncarnation::kCurrent;
  }
  const std::optional<uint32_t> words = wire::peek_initiator(bytes);
  if (!words) return SenderIncarnation::kCurrent;  // too short: SES drops it as malformed
  const SenderIncarnation said = incarnations_.check(peer, *words, over_pdc, now, incarnation);
  if (said == SenderIncarnation::kRetired) ++stats_.requests_of_a_retired_incarnation;
  if (said == SenderIncarnation::kStaleView) ++stats_.requests_to_an_earlier_incarnation;
  return said;
}

void Ses::on_peer_restarted(PeerIndex peer, uint16_t incarnation, Time now) {
  now_ = now;
  ++stats_.peers_restarted;
  // The new incarnation first: what ends below of the old one's rendezvous sends then
  // reads nothing from the new one and answers it nothing (advertiser_gone).
  incarnations_.restarted(peer, incarnation);
  // What PDS reported as it failed the old incarnation's PDCs (Pds::forget_peer): our
  // messages on them fail, and so does what waited on the peer. Taken here, before the
  // orders start again, and without sending the MSG_ERRs the failures queue: one for an
  // old id would skip that id in the new incarnation's order.
  apply_pds_reports(now);
  const PeerIndex restarted[] = {peer};
  end_sends_of(restarted, now, true);  // nothing more of them comes, however recent
  start_send_order_again(peer);
  ended_writes_.forget_peer(peer);
  // What the old incarnation sent whole still stands (its sender saw it delivered) and
  // is matched as any message; only its id, which the new incarnation uses afresh, no
  // longer finds it.
  for (uint32_t i = 0; i < rx_.capacity(); ++i) {
    if (!rx_.in_use(i) || rx_[i].peer != peer) continue;
    const auto key = id_key(peer, rx_[i].msg_id);
    if (auto found = rx_by_id_.find(key); found && *found == i) rx_by_id_.erase(key);
  }
  expect_seq_[peer] = 0;
}

void Ses::on_peer_lost_our_order(PeerIndex peer, Time now) {
  now_ = now;
  ++stats_.peers_restarted;
  apply_pds_reports(now);  // our sends on the failed PDCs fail
  start_send_order_again(peer);
  incarnations_.lost_our_order(peer);
}

void Ses::start_send_order_again(PeerIndex peer) {
  std::erase_if(skips_, [peer](const Skip& k) { return k.peer == peer; });
  find_next_skip_due();
  send_seq_[peer] = 0;
}

std::optional<Status> Ses::start_no_op(TxKind kind, PeerIndex peer, Time now, uint64_t word) {
  const uint32_t slot = new_tx(kind, peer, 0);
  if (slot == kNone) return std::nullopt;
  TxMessage& m = tx_[slot];
  m.msg_id = next_rma_id(peer);  // unordered, like an RMA id
  m.remote_addr = word;          // its buffer_offset
  m.run.packet_count = 1;
  m.run.packet_bytes = static_cast<uint32_t>(16 + wire::kSesStandardBytes);
  return start(slot, pds::Mode::kRud, now);  // start marks the peer told
}

void Ses::send_hellos(Time now) {
  incarnations_.send_due(now, [&](PeerIndex peer) {
    // Within the user's share, as a MSG_ERR goes: a hello answers nothing, and it must
    // not take the slots kept for answers.
    if (tx_committed() + 1 >= user_tx_limit_) return false;
    const std::optional<Status> started = start_no_op(TxKind::kHello, peer, now);
    if (!started) return false;
    if (*started == Status::kOk) {
      ++stats_.hellos_sent;
    } else {
      incarnations_.hello_failed(peer);  // owed again at its next request
    }
    return true;
  });
}

void Ses::probe_peers(std::span<const PeerIndex> peers, Time now,
                      std::vector<PeerIndex>& unprobed) {
  unprobed.clear();
  for (PeerIndex peer : peers) {
    if (probing_[peer]) continue;  // the one in flight asks already
    // Any free slot, the share kept for answers too: a probe holds it for a round trip,
    // and a table full of sends waiting on a restarted peer is when one is needed most.
    // It names the send id we wait for from the peer next, in case its sender has ended
    // that one and more already (answer_order_query).
    const std::optional<Status> started =
        tx_room_for(1) ? start_no_op(TxKind::kProbe, peer, now, kNoOpWaitsFor | expect_seq_[peer])
                       : std::nullopt;
    if (started == Status::kOk) {
      probing_[peer] = 1;
      ++probes_in_flight_;
      ++stats_.probes_sent;
    } else {
      unprobed.push_back(peer);
    }
  }
}

}  // namespace spray::ses
