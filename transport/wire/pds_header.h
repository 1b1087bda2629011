// UET 1.0 Packet Delivery Sublayer (PDS) headers: encoders and decoders.
//
// Every PDS header begins with a 2-byte prologue: type (5 bits) | next header or
// control type (4 bits) | flags (7 bits, meaning per type). The host-order structs
// below are what the rest of Spray uses; the wire structs in `layout` fix byte order,
// size and offsets. Decoders validate every length and field and return a reason.
//
// If you add a PDS type: add its layout with a static_assert on its size, a host
// struct, encode/decode/encoded_size, a golden test in tests/transport/wire, and a
// case in the fuzz target tests/fuzz/fuzz_wire.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/decode_error.h"
#include "transport/wire/endian.h"

namespace spray::wire {

enum class PdsType : uint8_t {
  kTss = 0x01,
  kRudRequest = 0x02,
  kRodRequest = 0x03,
  kRudiRequest = 0x04,
  kRudiResponse = 0x05,
  kUudRequest = 0x06,
  kAck = 0x07,
  kAckCc = 0x08,
  kAckCcx = 0x09,
  kNack = 0x0a,
  kCtrl = 0x0b,
  kNackCcx = 0x0c,
  kRudCcRequest = 0x0d,
  kRodCcRequest = 0x0e,
};

enum class NextHeader : uint8_t {
  kNone = 0,
  kSesSmallRequest = 1,
  kSesMediumRequest = 2,
  kSesStandardRequest = 3,
  kSesResponse = 4,
  kSesResponseWithData = 5,
  kSesSmallResponseWithData = 6,
};

enum class CtrlType : uint8_t {
  kNop = 0,
  kAckRequest = 1,
  kClear = 2,
  kClearRequest = 3,
  kClose = 4,
  kCloseRequest = 5,
  kProbe = 6,
  kCredit = 7,
  kCreditRequest = 8,
  kNegotiation = 9,
};

enum class NackCode : uint8_t {
  kTrimmed = 0x01,
  kTrimmedLastHop = 0x02,
  kTrimmedAck = 0x03,
  kNoPdcAvailable = 0x04,
  kNoCccAvailable = 0x05,
  kNoBitmap = 0x06,
  kNoPacketBuffer = 0x07,
  kNoGtdDelAvailable = 0x08,
  kNoSesMessageAvailable = 0x09,
  kNoResource = 0x0a,
  kPsnOutOfWindow = 0x0b,
  kRodOutOfOrder = 0x0d,
  kInvalidDpdcid = 0x0e,
  kPdcHeaderMismatch = 0x0f,
  kClosing = 0x10,
  kClosingInError = 0x11,
  kPacketNotReceived = 0x12,
  kGtdResponseUnavailable = 0x13,
  kAckWithData = 0x14,
  kInvalidSyn = 0x15,
  kPdcModeMismatch = 0x16,
  kNewStartPsn = 0x17,
  kReceivedSesProcessing = 0x18,
  kUnexpectedEvent = 0x19,
  kReceiverInferredLoss = 0x1a,
  kExperimentalNormal = 0xfd,
  kExperimentalError = 0xfe,
  kExperimentalFatal = 0xff,
};

bool is_known_nack_code(uint8_t code);
// UET's name of a NACK code (INV_DPDCID, NO_PDC_AVAIL, ...), for logs.
const char* to_string(NackCode code);

// Header sizes in bytes (UET 1.0).
inline constexpr size_t kPrologueBytes = 2;
inline constexpr size_t kRequestBytes = 12;
inline constexpr size_t kRequestCcStateBytes = 4;
inline constexpr size_t kAckBytes = 12;
inline constexpr size_t kAckCcBytes = 32;
inline constexpr size_t kNackBytes = 16;
inline constexpr size_t kCtrlBytes = 16;
inline constexpr size_t kRudiBytes = 8;
inline constexpr size_t kUudBytes = 4;

// Flag bits of the prologue, per type.
namespace request_flags {
inline constexpr uint8_t kRetransmit = 0x10;
inline constexpr uint8_t kAckRequested = 0x08;
inline constexpr uint8_t kSyn = 0x04;
inline constexpr uint8_t kDefined = kRetransmit | kAckRequested | kSyn;
}  // namespace request_flags
namespace ack_flags {
inline constexpr uint8_t kExpectedPsn = 0x40;
inline constexpr uint8_t kEcnMarked = 0x20;
inline constexpr uint8_t kRetransmit = 0x10;
inline constexpr uint8_t kProbeReply = 0x08;
inline constexpr uint8_t kRequestClose = 0x04;
inline constexpr uint8_t kRequestClear = 0x02;
inline constexpr uint8_t kDefined = 0x7e;
}  // namespace ack_flags
// Spray's vendor_code on an INVALID_DPDCID NACK for a PDC that failed here lately: its
// receive state, kept a while, says whether the NACKed PSN was delivered (pds_orphan.cc).
// kNoWord (0) from a peer that kept none.
enum class ForgottenPsn : uint8_t { kNoWord = 0, kNeverDelivered = 1, kDelivered = 2 };
// Spray's vendor_code on an UNEXP_EVENT NACK refusing a request that was meant for an
// incarnation of the refusing engine before this one (it restarted); the payload holds
// the refused request's sender's incarnation (high 16 bits) and the refusing engine's
// now (low 16) (transport/ses/ses_incarnation.cc).
inline constexpr uint8_t kStaleIncarnation = 0x01;

namespace nack_flags {
inline constexpr uint8_t kEcnMarked = 0x20;
inline constexpr uint8_t kRetransmit = 0x10;
inline constexpr uint8_t kRudi = 0x08;
inline constexpr uint8_t kDefined = 0x38;
}  // namespace nack_flags
namespace ctrl_flags {
inline constexpr uint8_t kRod = 0x20;
inline constexpr uint8_t kRetransmit = 0x10;
inline constexpr uint8_t kAckRequested = 0x08;
inline constexpr uint8_t kSyn = 0x04;
inline constexpr uint8_t kDefined = 0x3c;
}  // namespace ctrl_flags
namespace rudi_flags {
inline constexpr uint8_t kEcnMarked = 0x20;
inline constexpr uint8_t kRetransmit = 0x10;
inline constexpr uint8_t kDefined = 0x30;
}  // namespace rudi_flags

struct Prologue {
  PdsType type{};
  uint8_t next_or_ctrl = 0;  // NextHeader for requests, CtrlType for CTRL (4 bits)
  uint8_t flags = 0;         // 7 bits

  // Inline, so that callers keep the fields in registers: out of line, the three bytes
  // were returned through the stack as byte stores read back by one wider load, which
  // cannot be forwarded from the stores and stalled every received packet.
  uint16_t pack() const {
    return static_cast<uint16_t>(((static_cast<unsigned>(type) & 0x1f) << 11) |
                                 ((next_or_ctrl & 0xfu) << 7) | (flags & 0x7fu));
  }
  static Prologue unpack(uint16_t raw) {
    return Prologue{static_cast<PdsType>(raw >> 11), static_cast<uint8_t>((raw >> 7) & 0xf),
                    static_cast<uint8_t>(raw & 0x7f)};
  }
};

// With SYN set, the DPDCID field carries pdc_info (4 bits) | psn_offset (12 bits):
// the offset of this PSN from the PDC's start PSN, so the target learns the start.
struct SynInfo {
  uint8_t pdc_info = 0;     // bit 0: use a reserved PDC
  uint16_t psn_offset = 0;  // 12 bits
};
inline constexpr uint16_t kMaxSynPsnOffset = 0x0fff;

// RUD or ROD request (type 0x02/0x03, or 0x0d/0x0e with a 4-byte CC state).
struct PdsRequest {
  bool ordered = false;  // ROD
  NextHeader next = NextHeader::kSesStandardRequest;
  uint8_t flags = 0;  // request_flags
  int16_t clear_psn_offset = 0;
  uint32_t psn = 0;
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;  // meaningful when SYN is clear
  SynInfo syn{};        // meaningful when SYN is set
  bool has_cc_state = false;
  uint32_t cc_state = 0;

  bool is_syn() const { return (flags & request_flags::kSyn) != 0; }
};

// ACK_CC cc_type of a receiver credit grant (RCCC): cc_state is the window in bytes the
// receiver grants the sender of this PDC.
inline constexpr uint8_t kAckCcTypeCredit = 1;

// ACK (type 0x07) or ACK_CC (0x08) when has_cc is set.
struct PdsAck {
  uint8_t flags = 0;           // ack_flags
  int16_t ack_psn_offset = 0;  // PSN that triggered this ACK, relative to cack_psn
  uint32_t cack_psn = 0;       // cumulative: every PSN <= this was received
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  bool has_cc = false;
  uint8_t cc_type = 0;          // 4 bits
  uint8_t cc_flags = 0;         // 4 bits
  uint8_t mpr = 0;              // maximum PDCs requested
  int16_t sack_psn_offset = 0;  // SACK base relative to cack_psn
  uint64_t sack_bitmap = 0;     // bit i: PSN (cack_psn + sack_psn_offset + i) received
  uint64_t cc_state = 0;
};

struct PdsNack {
  NackCode code = NackCode::kTrimmed;
  uint8_t vendor_code = 0;
  uint8_t flags = 0;  // nack_flags
  uint32_t psn = 0;   // or RUDI packet id when kRudi is set
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  uint32_t payload = 0;
};

struct PdsCtrl {
  CtrlType type = CtrlType::kNop;
  uint8_t flags = 0;  // ctrl_flags
  uint16_t probe_opaque = 0;
  uint32_t psn = 0;
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  SynInfo syn{};
  uint32_t payload = 0;
};

// RUDI request (0x04) or response (0x05).
struct PdsRudi {
  bool response = false;
  NextHeader next = NextHeader::kSesStandardRequest;
  uint8_t flags = 0;  // rudi_flags
  uint32_t packet_id = 0;
};

struct PdsUud {
  NextHeader next = NextHeader::kSesStandardRequest;
};

// Wire layouts. Only the codec touches these.
namespace layout {
struct Request {
  be16 prologue;
  be16 clear_psn_offset;
  be32 psn;
  be16 spdcid;
  be16 dpdcid_or_syn;
};
struct Ack {
  be16 prologue;
  be16 ack_psn_offset;
  be32 cack_psn;
  be16 spdcid;
  be16 dpdcid;
};
struct AckCcExtension {
  uint8_t cc_type_flags;
  uint8_t mpr;
  be16 sack_psn_offset;
  be64 sack_bitmap;
  be64 cc_state;
};
struct Nack {
  be16 prologue;
  uint8_t code;
  uint8_t vendor_code;
  be32 psn;
  be16 spdcid;
  be16 dpdcid;
  be32 payload;
};
struct Ctrl {
  be16 prologue;
  be16 probe_opaque;
  be32 psn;
  be16 spdcid;
  be16 dpdcid_or_syn;
  be32 payload;
};
struct Rudi {
  be16 prologue;
  be16 reserved;
  be32 packet_id;
};
struct Uud {
  be16 prologue;
  be16 reserved;
};
static_assert(sizeof(Request) == kRequestBytes);
static_assert(sizeof(Ack) == kAckBytes);
static_assert(sizeof(Ack) + sizeof(AckCcExtension) == kAckCcBytes);
static_assert(sizeof(Nack) == kNackBytes);
static_assert(sizeof(Ctrl) == kCtrlBytes);
static_assert(sizeof(Rudi) == kRudiBytes);
static_assert(sizeof(Uud) == kUudBytes);
}  // namespace layout

using ByteSpan = std::span<uint8_t>;
using ConstByteSpan = std::span<const uint8_t>;

// Reads only the prologue; use it to dispatch to the right decoder.
DecodeError decode_prologue(ConstByteSpan in, Prologue& out);

// encoded_size(h) is the exact byte count encode(h, ...) writes. encode returns that
// count, or 0 when `out` is too small (nothing is written then).
size_t encoded_size(const PdsRequest& h);
size_t encoded_size(const PdsAck& h);
inline constexpr size_t encoded_size(const PdsNack&) {
  return kNackBytes;
}
inline constexpr size_t encoded_size(const PdsCtrl&) {
  return kCtrlBytes;
}
inline constexpr size_t encoded_size(const PdsRudi&) {
  return kRudiBytes;
}
inline constexpr size_t encoded_size(const PdsUud&) {
  return kUudBytes;
}

size_t encode(const PdsRequest& h, ByteSpan out);
size_t encode(const PdsAck& h, ByteSpan out);
size_t encode(const PdsNack& h, ByteSpan out);
size_t encode(const PdsCtrl& h, ByteSpan out);
size_t encode(const PdsRudi& h, ByteSpan out);
size_t encode(const PdsUud& h, ByteSpan out);

// Each decoder checks the type in the prologue, the length, reserved bits and enum
// ranges. On success `consumed` (when given) is the header's size in bytes.
DecodeError decode(ConstByteSpan in, PdsRequest& out, size_t* consumed = nullptr);
DecodeError decode(ConstByteSpan in, PdsAck& out, size_t* consumed = nullptr);
DecodeError decode(ConstByteSpan in, PdsNack& out, size_t* consumed = nullptr);
DecodeError decode(ConstByteSpan in, PdsCtrl& out, size_t* consumed = nullptr);
DecodeError decode(ConstByteSpan in, PdsRudi& out, size_t* consumed = nullptr);
DecodeError decode(ConstByteSpan in, PdsUud& out, size_t* consumed = nullptr);

}  // namespace spray::wire
