// Engine RUDI path: idempotent writes without a PDC. Included by engine.h.
#pragma once

namespace spray::engine {

// Builds one RUDI request (PDS RUDI header + the SES packet) into a fresh buffer.
template <dp::Datapath D>
bool Engine<D>::put_rudi_packet(const pds::RudiRetransmit& r, bool retransmit) {
  dp::PacketBuf* buf = tx_buffer();
  if (buf == nullptr) return false;
  const std::span<uint8_t> out(buf->data, buf->capacity);
  wire::NextHeader next{};
  const size_t ses_bytes = ses_.build_packet(r.ref, out.subspan(wire::kRudiBytes), next);
  wire::PdsRudi h;
  h.next = next;
  h.flags = retransmit ? wire::rudi_flags::kRetransmit : uint8_t{0};
  h.packet_id = r.packet_id;
  wire::encode(h, out);
  // Nothing to carry (its message has ended): sent empty, as send_data does.
  buf->len = ses_bytes == 0 ? 0 : static_cast<uint32_t>(wire::kRudiBytes + ses_bytes);
  buf->peer = peers_.address(r.peer);
  buf->entropy = r.entropy();
  return true;
}

template <dp::Datapath D>
size_t Engine<D>::send_rudi(Time now) {
  size_t sent = 0;
  for (const pds::RudiRetransmit& r : rudi_retransmits_) sent += put_rudi_packet(r, true);
  rudi_retransmits_.clear();
  pds::RudiRetransmit next;
  while (sent < kBurst * 4 && ses_.peek_rudi(next.ref, next.peer)) {
    if (!rudi_.track(next.peer, next.ref, now, next.packet_id)) break;  // window full
    ses_.advance_rudi();
    sent += put_rudi_packet(next, false);  // without a buffer it is lost; the timer resends
  }
  for (const RudiReply& reply : rudi_replies_) {
    dp::PacketBuf* buf = tx_buffer();
    if (buf == nullptr) break;  // the initiator retransmits and we answer again
    const std::span<uint8_t> out(buf->data, buf->capacity);
    buf->peer = peers_.address(reply.peer);
    buf->entropy = reply.entropy;
    ++sent;
    if (reply.trimmed) {
      wire::PdsNack n;
      n.code = wire::NackCode::kTrimmed;
      n.flags = wire::nack_flags::kRudi;
      n.psn = reply.packet_id;
      buf->len = static_cast<uint32_t>(wire::encode(n, out));
      continue;
    }
    wire::PdsRudi h;
    h.response = true;
    h.next = wire::NextHeader::kSesResponse;
    h.packet_id = reply.packet_id;
    wire::encode(h, out);
    wire::SesResponse r;
    r.common.opcode = wire::SesResponseOpcode::kResponse;
    r.common.return_code = reply.rc;
    r.common.message_id = reply.msg_id;
    r.common.job_id = cfg_.ses.job_id;
    buf->len =
        static_cast<uint32_t>(wire::kRudiBytes + wire::encode(r, out.subspan(wire::kRudiBytes)));
  }
  rudi_replies_.clear();
  return sent;
}

template <dp::Datapath D>
void Engine<D>::handle_rudi(PeerIndex peer, const wire::PdsRudi& h, std::span<const uint8_t> ses,
                            const dp::PacketBuf& buf, Time now) {
  (void)now;
  if (!h.response && (buf.flags & dp::PacketBuf::kTrimmed)) {
    // Never execute a trimmed write: its payload is gone. Ask for it again.
    rudi_replies_.push_back({peer, h.packet_id, wire::ReturnCode::kNull, 0, true, buf.entropy});
    return;
  }
  if (!h.response) {
    wire::ReturnCode rc{};
    uint16_t msg_id = 0;
    if (ses_.on_rudi_request(peer, h.next, ses, rc, msg_id) == ses::RxResult::kAccepted) {
      rudi_replies_.push_back({peer, h.packet_id, rc, msg_id, false, buf.entropy});
    } else {
      ++stats_.rx_malformed;
    }
    return;
  }
  wire::SesResponse r;
  pds::PacketRef ref;
  if (h.next != wire::NextHeader::kSesResponse || wire::decode(ses, r) != wire::DecodeError::kOk) {
    ++stats_.rx_malformed;
    return;
  }
  if (rudi_.on_response(peer, h.packet_id, ref)) ses_.on_rudi_response(ref, r.common.return_code);
}

}  // namespace spray::engine
