// UET 1.0 Semantic Sublayer (SES) headers: encoders and decoders.
//
// Requests come in three sizes: standard (44 bytes, carries everything), medium (32)
// and small (20). Responses are a plain response (12), a response with data (20, read
// data follows) or a small response with data (12). A rendezvous extension (24) may
// follow a standard request, and so may an atomic extension (4; with the compare-and-swap
// values 36). All multi-byte fields are big-endian; decoders validate
// opcode, version, reserved bits and lengths.
//
// If you add a header: add its layout with a static_assert, a host struct, the codec,
// a golden test, and a case in tests/fuzz/fuzz_wire.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "transport/wire/decode_error.h"
#include "transport/wire/endian.h"
#include "transport/wire/pds_header.h"

namespace spray::wire {

enum class SesOpcode : uint8_t {
  kNoOp = 0x00,
  kWrite = 0x01,
  kRead = 0x02,
  kAtomic = 0x03,
  kFetchAtomic = 0x04,
  kSend = 0x05,
  kRendezvousSend = 0x06,
  kDatagramSend = 0x07,
  kDeferSend = 0x08,
  kTaggedSend = 0x09,
  kRendezvousTaggedSend = 0x0a,
  kDeferTaggedSend = 0x0b,
  kDeferReadyToRestart = 0x0c,
  kTaggedSendAtomic = 0x0d,
  kTaggedSendFetchAtomic = 0x0e,
  kMessageError = 0x0f,
  kSyncWrite = 0x10,
  kSyncAtomic = 0x11,
};
inline constexpr uint8_t kMaxSesOpcode = 0x11;

namespace ses_flags {
inline constexpr uint8_t kDeliveryComplete = 0x20;
inline constexpr uint8_t kInitiatorError = 0x10;
inline constexpr uint8_t kRelative = 0x08;
inline constexpr uint8_t kHeaderData = 0x04;
inline constexpr uint8_t kEndOfMessage = 0x02;
inline constexpr uint8_t kStartOfMessage = 0x01;
inline constexpr uint8_t kDefined = 0x3f;
}  // namespace ses_flags

enum class SesResponseOpcode : uint8_t {
  kDefault = 0,
  kResponse = 1,
  kResponseWithData = 2,
  kNoResponse = 3,
};

enum class ReturnCode : uint8_t {
  kNull = 0x00,
  kOk = 0x01,
  kBadGeneration = 0x02,
  kDisabled = 0x03,
  kDisabledGeneration = 0x04,
  kNoMatch = 0x05,
  kUnsupportedOp = 0x06,
  kUnsupportedSize = 0x07,
  kAtInvalid = 0x08,
  kAtPermission = 0x09,
  kAtAtsError = 0x0a,
  kAtNoTranslation = 0x0b,
  kAtOutOfRange = 0x0c,
  kHostPoisoned = 0x0d,
  kHostUnsuccessfulCompletion = 0x0e,
  kAmoUnsupportedOp = 0x0f,
  kAmoUnsupportedDatatype = 0x10,
  kAmoUnsupportedSize = 0x11,
  kAmoUnaligned = 0x12,
  kAmoFpNan = 0x13,
  kAmoFpUnderflow = 0x14,
  kAmoFpOverflow = 0x15,
  kAmoFpInexact = 0x16,
  kPermissionViolation = 0x17,
  kOpViolation = 0x18,
  kBadIndex = 0x19,
  kBadPid = 0x1a,
  kBadJobId = 0x1b,
  kBadMemoryKey = 0x1c,
  kBadAddress = 0x1d,
  kCancelled = 0x1e,
  kUndeliverable = 0x1f,
  kUncorrectable = 0x20,
  kUncorrectableTransient = 0x21,
  kTooLong = 0x22,
  kInitiatorError = 0x23,
  kDropped = 0x24,
};
inline constexpr uint8_t kMaxReturnCode = 0x24;  // 6-bit field; 0x25..0x3f are reserved

// The operation an ATOMIC or FETCH_ATOMIC request applies to each element at the target.
enum class AmoOpcode : uint8_t {
  kMin = 0x00,
  kMax = 0x01,
  kSum = 0x02,
  kDiff = 0x03,
  kProd = 0x04,
  kLogicalOr = 0x05,
  kLogicalAnd = 0x06,
  kBitwiseOr = 0x07,
  kBitwiseAnd = 0x08,
  kLogicalXor = 0x09,
  kBitwiseXor = 0x0a,
  kRead = 0x0b,
  kWrite = 0x0c,
  kCompareSwap = 0x0d,           // swap if equal
  kCompareSwapNotEqual = 0x0e,   // swap if compare != target
  kCompareSwapLessEqual = 0x0f,  // swap if compare <= target
  kCompareSwapLess = 0x10,       // swap if compare < target
  kCompareSwapGreaterEqual = 0x11,
  kCompareSwapGreater = 0x12,
  kMaskedSwap = 0x13,  // target = (swap & compare) | (target & ~compare)
};
inline constexpr uint8_t kMaxAmoOpcode = 0x13;

// The element type of an atomic operation.
enum class AmoDatatype : uint8_t {
  kInt8 = 0x00,
  kUint8 = 0x01,
  kInt16 = 0x02,
  kUint16 = 0x03,
  kInt32 = 0x04,
  kUint32 = 0x05,
  kInt64 = 0x06,
  kUint64 = 0x07,
  kInt128 = 0x08,
  kUint128 = 0x09,
  kFloat = 0x0a,
  kDouble = 0x0b,
  kFloatComplex = 0x0c,
  kDoubleComplex = 0x0d,
  kLongDouble = 0x0e,
  kLongDoubleComplex = 0x0f,
  kBf16 = 0x10,
  kFp16 = 0x11,
};
inline constexpr uint8_t kMaxAmoDatatype = 0x11;

namespace amo_control {
inline constexpr uint8_t kCacheable = 0x01;
inline constexpr uint8_t kCpuCoherent = 0x02;
inline constexpr uint8_t kDefined = 0x03;
}  // namespace amo_control

inline constexpr size_t kSesCommonBytes = 12;
inline constexpr size_t kSesStandardBytes = 44;
inline constexpr size_t kSesMediumBytes = 32;
inline constexpr size_t kSesSmallBytes = 20;
inline constexpr size_t kRendezvousExtensionBytes = 24;
inline constexpr size_t kAtomicExtensionBytes = 4;
inline constexpr size_t kAtomicCompareSwapExtensionBytes = 36;
inline constexpr size_t kSesResponseBytes = 12;
inline constexpr size_t kSesResponseWithDataBytes = 20;
inline constexpr size_t kSesSmallResponseWithDataBytes = 12;
inline constexpr uint16_t kMaxSesPayloadLength = 0x3fff;  // 14-bit payload/request length
inline constexpr uint32_t kMaxJobId = 0x00ffffff;         // 24-bit JobID

// Fields shared by every request header.
struct SesRequestCommon {
  SesOpcode opcode = SesOpcode::kNoOp;
  uint8_t flags = 0;            // ses_flags
  uint16_t message_id = 0;      // standard header: message id; small/medium: request length
  uint8_t ri_generation = 0;    // resource-index generation (8 bits)
  uint32_t job_id = 0;          // 24 bits
  uint16_t pid_on_fep = 0;      // 12 bits
  uint16_t resource_index = 0;  // 12 bits

  bool has(uint8_t f) const { return (flags & f) != 0; }
};

// The standard request. The 8-byte field after match bits carries header data on a
// start-of-message packet (with HD set) and payload length (14 bits) | message offset
// (32 bits) on every other packet.
struct SesStandardRequest {
  SesRequestCommon common;
  uint64_t buffer_offset = 0;
  uint32_t initiator = 0;
  uint64_t match_bits = 0;      // or memory key for RMA
  uint64_t header_data = 0;     // SOM only
  uint16_t payload_length = 0;  // non-SOM only (14 bits)
  uint32_t message_offset = 0;  // non-SOM only
  uint32_t request_length = 0;
};

struct SesSmallRequest {
  SesRequestCommon common;  // message_id holds the 14-bit request length
  uint64_t buffer_offset = 0;
};

struct SesMediumRequest {
  SesRequestCommon common;  // message_id holds the 14-bit request length
  uint64_t header_data_or_buffer_offset = 0;
  uint32_t initiator = 0;
  uint64_t match_bits = 0;
};

struct RendezvousExtension {
  uint32_t eager_length = 0;
  uint8_t ri_generation = 0;
  uint16_t pid_on_fep = 0;      // 12 bits
  uint16_t resource_index = 0;  // 12 bits
  uint64_t read_offset = 0;
  uint64_t read_key = 0;
};

// What follows a standard ATOMIC/FETCH_ATOMIC request: the operation and element type;
// the operands follow it as payload. The compare-and-swap opcodes carry one element's
// compare and swap values (up to 128 bits each, high and low halves) in the extension
// instead, and no payload.
struct AtomicExtension {
  AmoOpcode opcode = AmoOpcode::kSum;
  AmoDatatype datatype = AmoDatatype::kUint64;
  uint8_t semantic_control = 0;  // amo_control
};

struct AtomicCompareSwapExtension {
  AtomicExtension common;
  uint64_t compare_high = 0;
  uint64_t compare_low = 0;
  uint64_t swap_high = 0;
  uint64_t swap_low = 0;
};

// Whether `op` is one of the compare-and-swap family (its values travel in the
// 36-byte extension).
constexpr bool is_compare_swap(AmoOpcode op) {
  return op >= AmoOpcode::kCompareSwap && op <= AmoOpcode::kMaskedSwap;
}

// Common part of every response.
struct SesResponseCommon {
  uint8_t list = 0;  // 2 bits: 0 expected, 1 overflow
  SesResponseOpcode opcode = SesResponseOpcode::kResponse;
  ReturnCode return_code = ReturnCode::kOk;
  uint16_t message_id = 0;  // small-with-data: 14-bit payload length instead
  uint8_t ri_generation = 0;
  uint32_t job_id = 0;  // 24 bits
};

struct SesResponse {
  SesResponseCommon common;
  uint32_t modified_length = 0;
};

struct SesResponseWithData {
  SesResponseCommon common;
  uint16_t read_message_id = 0;
  uint16_t payload_length = 0;  // 14 bits
  uint32_t modified_length = 0;
  uint32_t message_offset = 0;
};

struct SesSmallResponseWithData {
  SesResponseCommon common;
  uint32_t original_request_psn = 0;
};

namespace layout {
struct SesCommon {
  uint8_t opcode;
  uint8_t version_flags;
  be16 message_id_or_length;
  be32 ri_generation_job_id;
  be16 pid_on_fep;
  be16 resource_index;
};
struct SesStandard {
  SesCommon common;
  be64 buffer_offset;
  be32 initiator;
  be64 match_bits;
  be64 header_data_or_length_offset;
  be32 request_length;
};
struct SesSmall {
  SesCommon common;
  be64 buffer_offset;
};
struct SesMedium {
  SesCommon common;
  be64 header_data_or_buffer_offset;
  be32 initiator;
  be64 match_bits;
};
struct Rendezvous {
  be32 eager_length;
  be32 ri_generation_pid_resource;
  be64 read_offset;
  be64 read_key;
};
struct Atomic {
  uint8_t opcode;
  uint8_t datatype;
  uint8_t semantic_control;
  uint8_t reserved;
};
struct AtomicCompareSwap {
  Atomic common;
  be64 compare_high;
  be64 compare_low;
  be64 swap_high;
  be64 swap_low;
};
struct ResponseCommon {
  uint8_t list_opcode;
  uint8_t version_return_code;
  be16 message_id;
  be32 ri_generation_job_id;
};
struct Response {
  ResponseCommon common;
  be32 modified_length;
};
struct ResponseWithData {
  ResponseCommon common;
  be16 read_message_id;
  be16 payload_length;
  be32 modified_length;
  be32 message_offset;
};
struct SmallResponseWithData {
  ResponseCommon common;
  be32 original_request_psn;
};
static_assert(sizeof(SesCommon) == kSesCommonBytes);
static_assert(sizeof(SesStandard) == kSesStandardBytes);
static_assert(sizeof(SesSmall) == kSesSmallBytes);
static_assert(sizeof(SesMedium) == kSesMediumBytes);
static_assert(sizeof(Rendezvous) == kRendezvousExtensionBytes);
static_assert(sizeof(Atomic) == kAtomicExtensionBytes);
static_assert(sizeof(AtomicCompareSwap) == kAtomicCompareSwapExtensionBytes);
static_assert(sizeof(Response) == kSesResponseBytes);
static_assert(sizeof(ResponseWithData) == kSesResponseWithDataBytes);
static_assert(sizeof(SmallResponseWithData) == kSesSmallResponseWithDataBytes);
}  // namespace layout

// encode() returns bytes written, or 0 when `out` is too small or a field does not fit
// its wire width (e.g. a small request longer than 14 bits).
size_t encode(const SesStandardRequest& h, ByteSpan out);
size_t encode(const SesSmallRequest& h, ByteSpan out);
size_t encode(const SesMediumRequest& h, ByteSpan out);
size_t encode(const RendezvousExtension& h, ByteSpan out);
size_t encode(const AtomicExtension& h, ByteSpan out);
size_t encode(const AtomicCompareSwapExtension& h, ByteSpan out);
size_t encode(const SesResponse& h, ByteSpan out);
size_t encode(const SesResponseWithData& h, ByteSpan out);
size_t encode(const SesSmallResponseWithData& h, ByteSpan out);

DecodeError decode(ConstByteSpan in, SesStandardRequest& out);
DecodeError decode(ConstByteSpan in, SesSmallRequest& out);
DecodeError decode(ConstByteSpan in, SesMediumRequest& out);
DecodeError decode(ConstByteSpan in, RendezvousExtension& out);
DecodeError decode(ConstByteSpan in, AtomicExtension& out);
DecodeError decode(ConstByteSpan in, AtomicCompareSwapExtension& out);
DecodeError decode(ConstByteSpan in, SesResponse& out);
DecodeError decode(ConstByteSpan in, SesResponseWithData& out);
DecodeError decode(ConstByteSpan in, SesSmallResponseWithData& out);

// The JobID of any SES header, request or response (both carry it at the same place:
// bytes 4-7, below the RI generation), without decoding the rest; nullopt when `in` is
// too short to hold it. What an endpoint checks before it lets a packet touch any state.
std::optional<uint32_t> peek_job_id(ConstByteSpan in);
// The `initiator` field of a standard request (bytes 20-23), without decoding the rest;
// nullopt when `in` is too short to hold it. Spray carries incarnations in it
// (transport/ses/ses_incarnation.cc).
std::optional<uint32_t> peek_initiator(ConstByteSpan in);

}  // namespace spray::wire
