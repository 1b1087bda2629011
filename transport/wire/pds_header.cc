#include "transport/wire/pds_header.h"

#include "transport/wire/in_place.h"

namespace spray::wire {
namespace {

constexpr uint8_t kMaxNextHeader = static_cast<uint8_t>(NextHeader::kSesSmallResponseWithData);
constexpr uint8_t kMaxCtrlType = static_cast<uint8_t>(CtrlType::kNegotiation);

uint16_t pack_syn(const SynInfo& s) {
  return static_cast<uint16_t>(((s.pdc_info & 0xf) << 12) | (s.psn_offset & kMaxSynPsnOffset));
}

SynInfo unpack_syn(uint16_t raw) {
  return SynInfo{static_cast<uint8_t>(raw >> 12), static_cast<uint16_t>(raw & kMaxSynPsnOffset)};
}

// Checks the prologue of a fixed-size header: enough bytes, the expected type, flags
// within `defined_flags`. Fills `p`.
DecodeError check_prologue(ConstByteSpan in, size_t need, Prologue& p, uint8_t defined_flags) {
  if (in.size() < kPrologueBytes) return DecodeError::kTruncated;
  p = Prologue::unpack(view<be16>(in).get());
  if (in.size() < need) return DecodeError::kTruncated;
  if ((p.flags & ~defined_flags) != 0) return DecodeError::kReservedBitsSet;
  return DecodeError::kOk;
}

bool is_request_type(PdsType t) {
  return t == PdsType::kRudRequest || t == PdsType::kRodRequest || t == PdsType::kRudCcRequest ||
         t == PdsType::kRodCcRequest;
}

}  // namespace

bool is_known_nack_code(uint8_t code) {
  return (code >= 0x01 && code <= 0x0b) || (code >= 0x0d && code <= 0x1a) || code >= 0xfd;
}

const char* to_string(NackCode code) {
  switch (code) {
    case NackCode::kTrimmed:
      return "TRIMMED";
    case NackCode::kTrimmedLastHop:
      return "TRIMMED_LASTHOP";
    case NackCode::kTrimmedAck:
      return "TRIMMED_ACK";
    case NackCode::kNoPdcAvailable:
      return "NO_PDC_AVAIL";
    case NackCode::kNoCccAvailable:
      return "NO_CCC_AVAIL";
    case NackCode::kNoBitmap:
      return "NO_BITMAP";
    case NackCode::kNoPacketBuffer:
      return "NO_PKT_BUF";
    case NackCode::kNoGtdDelAvailable:
      return "NO_GTD_DEL_AVAIL";
    case NackCode::kNoSesMessageAvailable:
      return "NO_SES_MSG_AVAIL";
    case NackCode::kNoResource:
      return "NO_RESOURCE";
    case NackCode::kPsnOutOfWindow:
      return "PSN_OOR_WINDOW";
    case NackCode::kRodOutOfOrder:
      return "ROD_OOO";
    case NackCode::kInvalidDpdcid:
      return "INV_DPDCID";
    case NackCode::kPdcHeaderMismatch:
      return "PDC_HDR_MISMATCH";
    case NackCode::kClosing:
      return "CLOSING";
    case NackCode::kClosingInError:
      return "CLOSING_IN_ERR";
    case NackCode::kPacketNotReceived:
      return "PKT_NOT_RCVD";
    case NackCode::kGtdResponseUnavailable:
      return "GTD_RESP_UNAVAIL";
    case NackCode::kAckWithData:
      return "ACK_WITH_DATA";
    case NackCode::kInvalidSyn:
      return "INVALID_SYN";
    case NackCode::kPdcModeMismatch:
      return "PDC_MODE_MISMATCH";
    case NackCode::kNewStartPsn:
      return "NEW_START_PSN";
    case NackCode::kReceivedSesProcessing:
      return "RCVD_SES_PROCG";
    case NackCode::kUnexpectedEvent:
      return "UNEXP_EVENT";
    case NackCode::kReceiverInferredLoss:
      return "RCVR_INFER_LOSS";
    case NackCode::kExperimentalNormal:
      return "EXPERIMENTAL_NORMAL";
    case NackCode::kExperimentalError:
      return "EXPERIMENTAL_ERROR";
    case NackCode::kExperimentalFatal:
      return "EXPERIMENTAL_FATAL";
  }
  return "?";
}

DecodeError decode_prologue(ConstByteSpan in, Prologue& out) {
  if (in.size() < kPrologueBytes) return DecodeError::kTruncated;
  out = Prologue::unpack(view<be16>(in).get());
  return DecodeError::kOk;
}

// --- RUD / ROD request -------------------------------------------------------------

size_t encoded_size(const PdsRequest& h) {
  return kRequestBytes + (h.has_cc_state ? kRequestCcStateBytes : 0);
}

size_t encode(const PdsRequest& h, ByteSpan out) {
  const size_t n = encoded_size(h);
  if (out.size() < n) return 0;
  const PdsType type = h.has_cc_state
                           ? (h.ordered ? PdsType::kRodCcRequest : PdsType::kRudCcRequest)
                           : (h.ordered ? PdsType::kRodRequest : PdsType::kRudRequest);
  auto& l = place<layout::Request>(out);
  l.prologue.set(Prologue{type, static_cast<uint8_t>(h.next), h.flags}.pack());
  l.clear_psn_offset.set(static_cast<uint16_t>(h.clear_psn_offset));
  l.psn.set(h.psn);
  l.spdcid.set(h.spdcid);
  l.dpdcid_or_syn.set(h.is_syn() ? pack_syn(h.syn) : h.dpdcid);
  if (h.has_cc_state) place<be32>(out, kRequestBytes).set(h.cc_state);
  return n;
}

DecodeError decode(ConstByteSpan in, PdsRequest& out, size_t* consumed) {
  Prologue p;
  if (in.size() < kPrologueBytes) return DecodeError::kTruncated;
  p = Prologue::unpack(view<be16>(in).get());
  if (!is_request_type(p.type)) return DecodeError::kWrongType;
  const bool cc = p.type == PdsType::kRudCcRequest || p.type == PdsType::kRodCcRequest;
  const size_t need = kRequestBytes + (cc ? kRequestCcStateBytes : 0);
  if (auto e = check_prologue(in, need, p, request_flags::kDefined); e != DecodeError::kOk) {
    return e;
  }
  if (p.next_or_ctrl > kMaxNextHeader) return DecodeError::kBadNextHeader;
  const auto& l = view<layout::Request>(in);
  out = PdsRequest{};
  out.ordered = p.type == PdsType::kRodRequest || p.type == PdsType::kRodCcRequest;
  out.next = static_cast<NextHeader>(p.next_or_ctrl);
  out.flags = p.flags;
  out.clear_psn_offset = static_cast<int16_t>(l.clear_psn_offset.get());
  out.psn = l.psn.get();
  out.spdcid = l.spdcid.get();
  if (out.is_syn()) {
    out.syn = unpack_syn(l.dpdcid_or_syn.get());
  } else {
    out.dpdcid = l.dpdcid_or_syn.get();
  }
  out.has_cc_state = cc;
  if (cc) out.cc_state = view<be32>(in, kRequestBytes).get();
  if (consumed) *consumed = need;
  return DecodeError::kOk;
}

// --- ACK / ACK_CC ------------------------------------------------------------------

size_t encoded_size(const PdsAck& h) {
  return h.has_cc ? kAckCcBytes : kAckBytes;
}

size_t encode(const PdsAck& h, ByteSpan out) {
  const size_t n = encoded_size(h);
  if (out.size() < n) return 0;
  auto& l = place<layout::Ack>(out);
  l.prologue.set(Prologue{h.has_cc ? PdsType::kAckCc : PdsType::kAck, 0, h.flags}.pack());
  l.ack_psn_offset.set(static_cast<uint16_t>(h.ack_psn_offset));
  l.cack_psn.set(h.cack_psn);
  l.spdcid.set(h.spdcid);
  l.dpdcid.set(h.dpdcid);
  if (h.has_cc) {
    auto& x = place<layout::AckCcExtension>(out, kAckBytes);
    x.cc_type_flags = static_cast<uint8_t>(((h.cc_type & 0xf) << 4) | (h.cc_flags & 0xf));
    x.mpr = h.mpr;
    x.sack_psn_offset.set(static_cast<uint16_t>(h.sack_psn_offset));
    x.sack_bitmap.set(h.sack_bitmap);
    x.cc_state.set(h.cc_state);
  }
  return n;
}

DecodeError decode(ConstByteSpan in, PdsAck& out, size_t* consumed) {
  if (in.size() < kPrologueBytes) return DecodeError::kTruncated;
  Prologue p = Prologue::unpack(view<be16>(in).get());
  if (p.type != PdsType::kAck && p.type != PdsType::kAckCc) return DecodeError::kWrongType;
  const bool cc = p.type == PdsType::kAckCc;
  const size_t need = cc ? kAckCcBytes : kAckBytes;
  if (auto e = check_prologue(in, need, p, ack_flags::kDefined); e != DecodeError::kOk) return e;
  if (p.next_or_ctrl > kMaxNextHeader) return DecodeError::kBadNextHeader;
  const auto& l = view<layout::Ack>(in);
  out = PdsAck{};
  out.flags = p.flags;
  out.ack_psn_offset = static_cast<int16_t>(l.ack_psn_offset.get());
  out.cack_psn = l.cack_psn.get();
  out.spdcid = l.spdcid.get();
  out.dpdcid = l.dpdcid.get();
  out.has_cc = cc;
  if (cc) {
    const auto& x = view<layout::AckCcExtension>(in, kAckBytes);
    out.cc_type = static_cast<uint8_t>(x.cc_type_flags >> 4);
    out.cc_flags = static_cast<uint8_t>(x.cc_type_flags & 0xf);
    out.mpr = x.mpr;
    out.sack_psn_offset = static_cast<int16_t>(x.sack_psn_offset.get());
    out.sack_bitmap = x.sack_bitmap.get();
    out.cc_state = x.cc_state.get();
  }
  if (consumed) *consumed = need;
  return DecodeError::kOk;
}

// --- NACK --------------------------------------------------------------------------

size_t encode(const PdsNack& h, ByteSpan out) {
  if (out.size() < kNackBytes) return 0;
  auto& l = place<layout::Nack>(out);
  l.prologue.set(Prologue{PdsType::kNack, 0, h.flags}.pack());
  l.code = static_cast<uint8_t>(h.code);
  l.vendor_code = h.vendor_code;
  l.psn.set(h.psn);
  l.spdcid.set(h.spdcid);
  l.dpdcid.set(h.dpdcid);
  l.payload.set(h.payload);
  return kNackBytes;
}

DecodeError decode(ConstByteSpan in, PdsNack& out, size_t* consumed) {
  Prologue p;
  if (auto e = check_prologue(in, kPrologueBytes, p, 0x7f); e != DecodeError::kOk) return e;
  if (p.type != PdsType::kNack) return DecodeError::kWrongType;
  if (auto e = check_prologue(in, kNackBytes, p, nack_flags::kDefined); e != DecodeError::kOk) {
    return e;
  }
  if (p.next_or_ctrl != 0) return DecodeError::kBadNextHeader;
  const auto& l = view<layout::Nack>(in);
  if (!is_known_nack_code(l.code)) return DecodeError::kBadNackCode;
  out = PdsNack{};
  out.code = static_cast<NackCode>(l.code);
  out.vendor_code = l.vendor_code;
  out.flags = p.flags;
  out.psn = l.psn.get();
  out.spdcid = l.spdcid.get();
  out.dpdcid = l.dpdcid.get();
  out.payload = l.payload.get();
  if (consumed) *consumed = kNackBytes;
  return DecodeError::kOk;
}

// --- CTRL --------------------------------------------------------------------------

size_t encode(const PdsCtrl& h, ByteSpan out) {
  if (out.size() < kCtrlBytes) return 0;
  auto& l = place<layout::Ctrl>(out);
  l.prologue.set(Prologue{PdsType::kCtrl, static_cast<uint8_t>(h.type), h.flags}.pack());
  l.probe_opaque.set(h.probe_opaque);
  l.psn.set(h.psn);
  l.spdcid.set(h.spdcid);
  l.dpdcid_or_syn.set((h.flags & ctrl_flags::kSyn) ? pack_syn(h.syn) : h.dpdcid);
  l.payload.set(h.payload);
  return kCtrlBytes;
}

DecodeError decode(ConstByteSpan in, PdsCtrl& out, size_t* consumed) {
  Prologue p;
  if (auto e = check_prologue(in, kPrologueBytes, p, 0x7f); e != DecodeError::kOk) return e;
  if (p.type != PdsType::kCtrl) return DecodeError::kWrongType;
  if (auto e = check_prologue(in, kCtrlBytes, p, ctrl_flags::kDefined); e != DecodeError::kOk) {
    return e;
  }
  if (p.next_or_ctrl > kMaxCtrlType) return DecodeError::kBadControlType;
  const auto& l = view<layout::Ctrl>(in);
  out = PdsCtrl{};
  out.type = static_cast<CtrlType>(p.next_or_ctrl);
  out.flags = p.flags;
  out.probe_opaque = l.probe_opaque.get();
  out.psn = l.psn.get();
  out.spdcid = l.spdcid.get();
  if (p.flags & ctrl_flags::kSyn) {
    out.syn = unpack_syn(l.dpdcid_or_syn.get());
  } else {
    out.dpdcid = l.dpdcid_or_syn.get();
  }
  out.payload = l.payload.get();
  if (consumed) *consumed = kCtrlBytes;
  return DecodeError::kOk;
}

// --- RUDI / UUD --------------------------------------------------------------------

size_t encode(const PdsRudi& h, ByteSpan out) {
  if (out.size() < kRudiBytes) return 0;
  auto& l = place<layout::Rudi>(out);
  const PdsType type = h.response ? PdsType::kRudiResponse : PdsType::kRudiRequest;
  l.prologue.set(Prologue{type, static_cast<uint8_t>(h.next), h.flags}.pack());
  l.reserved.set(0);
  l.packet_id.set(h.packet_id);
  return kRudiBytes;
}

DecodeError decode(ConstByteSpan in, PdsRudi& out, size_t* consumed) {
  Prologue p;
  if (auto e = check_prologue(in, kPrologueBytes, p, 0x7f); e != DecodeError::kOk) return e;
  if (p.type != PdsType::kRudiRequest && p.type != PdsType::kRudiResponse) {
    return DecodeError::kWrongType;
  }
  if (auto e = check_prologue(in, kRudiBytes, p, rudi_flags::kDefined); e != DecodeError::kOk) {
    return e;
  }
  if (p.next_or_ctrl > kMaxNextHeader) return DecodeError::kBadNextHeader;
  const auto& l = view<layout::Rudi>(in);
  if (l.reserved.get() != 0) return DecodeError::kReservedBitsSet;
  out = PdsRudi{};
  out.response = p.type == PdsType::kRudiResponse;
  out.next = static_cast<NextHeader>(p.next_or_ctrl);
  out.flags = p.flags;
  out.packet_id = l.packet_id.get();
  if (consumed) *consumed = kRudiBytes;
  return DecodeError::kOk;
}

size_t encode(const PdsUud& h, ByteSpan out) {
  if (out.size() < kUudBytes) return 0;
  auto& l = place<layout::Uud>(out);
  l.prologue.set(Prologue{PdsType::kUudRequest, static_cast<uint8_t>(h.next), 0}.pack());
  l.reserved.set(0);
  return kUudBytes;
}

DecodeError decode(ConstByteSpan in, PdsUud& out, size_t* consumed) {
  Prologue p;
  if (auto e = check_prologue(in, kPrologueBytes, p, 0x7f); e != DecodeError::kOk) return e;
  if (p.type != PdsType::kUudRequest) return DecodeError::kWrongType;
  if (auto e = check_prologue(in, kUudBytes, p, 0); e != DecodeError::kOk) return e;
  if (p.next_or_ctrl > kMaxNextHeader) return DecodeError::kBadNextHeader;
  if (view<layout::Uud>(in).reserved.get() != 0) return DecodeError::kReservedBitsSet;
  out = PdsUud{static_cast<NextHeader>(p.next_or_ctrl)};
  if (consumed) *consumed = kUudBytes;
  return DecodeError::kOk;
}

}  // namespace spray::wire
