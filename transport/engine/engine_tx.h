// Engine transmit path: control packets first (they unblock peers), then data from the
// PDCs that have window, then datagrams, then the ACKs an earlier step held back, in
// bursts. Included by engine.h.
#pragma once

#include <variant>

namespace spray::engine {

template <dp::Datapath D>
size_t Engine<D>::send_held_acks(Time now) {
  now_ = now;
  pds_.flush_acks(pds::Pds::AckFlush::kAll, now);
  const size_t sent = send_control();
  flush_tx();
  return sent;
}

// Also the end of every progress step (engine_rx.h).
template <dp::Datapath D>
size_t Engine<D>::transmit(Time now) {
  now_ = now;
  size_t sent = send_control();
  sent += send_data(now);
  sent += send_rudi(now);
  sent += send_datagrams();
  // Held ACKs (Pds::flush_acks) leave behind this step's packets, in the same burst (a
  // reply the application posted reaches the peer first), or alone once overdue.
  pds_.flush_acks(sent > 0 ? pds::Pds::AckFlush::kBehindPackets : pds::Pds::AckFlush::kOverdue,
                  now);
  // Those ACKs, NACKs raised while sending (e.g. none) and ACKs from failures.
  sent += send_control();
  flush_tx();
  return sent;
}

template <dp::Datapath D>
dp::PacketBuf* Engine<D>::tx_buffer() {
  // The previous buffer is filled by now: count its bytes, and hand the batch over once
  // it holds the datapath's flush size, so the peer starts on the first packets of a
  // large message while we build the rest (over shared memory, 64 packets of 16 KiB
  // would otherwise sit here for ~100 us).
  if (tx_count_ > 0) {
    const dp::PacketBuf& filled = *tx_batch_[tx_count_ - 1];
    if (counts_toward_flush(filled)) tx_bytes_ += filled.len + filled.payload_len;
  }
  if (tx_count_ == tx_batch_.size() || tx_bytes_ >= tx_flush_bytes()) flush_tx();
  dp::PacketBuf* buf = nullptr;
  if (dp_.alloc(&buf, 1) != 1) {
    ++stats_.tx_no_buffer;
    return nullptr;
  }
  if (tss_) {
    // Built behind room for the security header, leaving room for the tag; sealing
    // (seal_tx_batch) moves `data` back.
    buf->data += tss::SecureChannels::kHeaderBytes;
    buf->capacity -= tss::SecureChannels::kOverheadBytes;
  }
  tx_batch_[tx_count_++] = buf;
  return buf;
}

template <dp::Datapath D>
void Engine<D>::seal_tx_batch() {
  for (size_t i = 0; i < tx_count_; ++i) {
    dp::PacketBuf* buf = tx_batch_[i];
    buf->data -= tss::SecureChannels::kHeaderBytes;
    buf->capacity += tss::SecureChannels::kOverheadBytes;
    if (buf->len == 0) continue;  // nothing to send (see send_data)
    // The payload a gathering datapath would send from the sender's memory is encrypted
    // into the buffer instead: ciphertext cannot be gathered from plaintext.
    const std::span<const uint8_t> gathered(buf->payload, buf->payload_len);
    const PeerIndex peer = peers_.find(buf->peer).value_or(pds::kNoPeer);
    buf->len = peer == pds::kNoPeer
                   ? 0
                   : tss_->seal(peer, buf->peer, {buf->data, buf->capacity}, buf->len, gathered);
    buf->payload = nullptr;
    buf->payload_len = 0;
  }
}

template <dp::Datapath D>
void Engine<D>::flush_tx() {
  if (tx_count_ == 0) return;
  if (tss_) seal_tx_batch();
  stats_.tx_packets += tx_count_;
  dp_.tx_burst(tx_batch_.data(), tx_count_);
  tx_count_ = 0;
  tx_bytes_ = 0;
}

template <dp::Datapath D>
size_t Engine<D>::send_control() {
  auto& queue = pds_.control_out();
  size_t sent = 0;
  for (const pds::ControlPacket& c : queue) {
    dp::PacketBuf* buf = tx_buffer();
    if (buf == nullptr) break;  // control packets are loss-tolerant: ACKs come again
    const std::span<uint8_t> out(buf->data, buf->capacity);
    buf->len = static_cast<uint32_t>(
        std::visit([&](const auto& h) { return wire::encode(h, out); }, c.header));
    buf->peer = peers_.address(c.peer);
    // On the EV PDS chose (that of the packet it answers), else sprayed: the next EV in
    // turn, so one dead path cannot swallow every copy.
    buf->entropy = (c.entropy && !kHidesArrivalEntropy) ? *c.entropy : control_entropy_++;
    ++sent;
  }
  queue.clear();
  return sent;
}

template <dp::Datapath D>
size_t Engine<D>::send_data(Time now) {
  size_t budget = kBurst * 4;  // bounds one progress() so receiving is not starved
  size_t sent = 0;
  uint32_t pdc = 0;
  pds::TxPacket pkt;
  while (budget > 0 && pds_.pop_ready(pdc)) {
    while (budget > 0 && pds_.next_tx(pdc, now, pkt)) {
      dp::PacketBuf* buf = tx_buffer();
      if (buf == nullptr) {
        // No buffer: the packet counts as sent and lost; the RTO recovers it.
        budget = 0;
        break;
      }
      const std::span<uint8_t> out(buf->data, buf->capacity);
      size_t len = 0;
      if (pkt.is_ctrl) {
        len = wire::encode(pkt.ctrl, out);
      } else {
        const size_t pds_bytes = wire::encoded_size(pkt.request);
        wire::NextHeader next{};
        size_t ses_bytes = 0;
        if constexpr (kGathersPayload) {
          uint32_t payload = 0;
          ses_bytes = ses_.build_header(pkt.ref, out.subspan(pds_bytes), next, payload);
          if (pds_bytes + ses_bytes + payload > out.size()) {
            ses_bytes = 0;  // does not fit the MTU: sent empty, as build_packet would
          } else if (ses_bytes != 0 && payload > 0) {
            buf->payload = ses_.payload_source(pkt.ref);
            buf->payload_len = payload;
          }
        } else {
          ses_bytes = ses_.build_packet(pkt.ref, out.subspan(pds_bytes), next);
        }
        pkt.request.next = next;
        len = ses_bytes == 0 ? 0 : pds_bytes + ses_bytes;
        if (len != 0) wire::encode(pkt.request, out);
      }
      buf->len = static_cast<uint32_t>(len);
      buf->peer = peers_.address(pkt.peer);
      buf->entropy = pkt.entropy;
      --budget;
      ++sent;
    }
    if (budget == 0) pds_.mark_ready(pdc);
  }
  drain_reports(now);  // next_tx may have failed a PDC (retries exhausted)
  return sent;
}

template <dp::Datapath D>
size_t Engine<D>::send_datagrams() {
  size_t sent = 0;
  uint32_t message = 0;
  while (ses_.pop_datagram(message)) {
    dp::PacketBuf* buf = tx_buffer();
    if (buf == nullptr) {
      ses_.datagram_sent(message);  // best effort: a datagram without a buffer is lost
      continue;
    }
    const std::span<uint8_t> out(buf->data, buf->capacity);
    wire::NextHeader next{};
    const size_t ses_bytes = ses_.build_packet({message, 0}, out.subspan(wire::kUudBytes), next);
    wire::encode(wire::PdsUud{next}, out);
    buf->len = static_cast<uint32_t>(wire::kUudBytes + ses_bytes);
    buf->peer = peers_.address(ses_.message_peer(message));
    buf->entropy = static_cast<uint16_t>(message);
    ses_.datagram_sent(message);
    ++sent;
  }
  return sent;
}

}  // namespace spray::engine
