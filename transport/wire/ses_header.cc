#include "transport/wire/ses_header.h"

#include <cstring>

#include "transport/wire/in_place.h"

namespace spray::wire {
namespace {

constexpr uint8_t kOpcodeMask = 0x3f;
constexpr uint8_t kVersionMask = 0xc0;
constexpr uint32_t kJobIdMask = kMaxJobId;
constexpr uint16_t k12BitMask = 0x0fff;
constexpr uint64_t kLengthOffsetReserved = 0xffffc00000000000ULL;  // bits 63..46

// The big-endian 32-bit field at byte `at` of `in`, read without decoding the rest;
// nullopt when `in` is too short to hold it.
std::optional<uint32_t> peek_be32(ConstByteSpan in, size_t at) {
  if (in.size() < at + sizeof(be32)) return std::nullopt;
  be32 field;
  std::memcpy(&field, in.data() + at, sizeof field);
  return field.get();
}

bool fits_common(const SesRequestCommon& c) {
  return static_cast<uint8_t>(c.opcode) <= kMaxSesOpcode && (c.flags & ~ses_flags::kDefined) == 0 &&
         c.job_id <= kJobIdMask && c.pid_on_fep <= k12BitMask && c.resource_index <= k12BitMask;
}

// Fills `l` where it lies (inside a placed header, see in_place.h).
void pack_common(const SesRequestCommon& c, layout::SesCommon& l) {
  l.opcode = static_cast<uint8_t>(c.opcode);
  l.version_flags = c.flags;  // version 0
  l.message_id_or_length.set(c.message_id);
  l.ri_generation_job_id.set((static_cast<uint32_t>(c.ri_generation) << 24) | c.job_id);
  l.pid_on_fep.set(c.pid_on_fep);
  l.resource_index.set(c.resource_index);
}

DecodeError unpack_common(const layout::SesCommon& l, SesRequestCommon& c) {
  if ((l.opcode & ~kOpcodeMask) != 0) return DecodeError::kReservedBitsSet;
  if (l.opcode > kMaxSesOpcode) return DecodeError::kBadOpcode;
  if ((l.version_flags & kVersionMask) != 0) return DecodeError::kBadVersion;
  if ((l.pid_on_fep.get() & ~k12BitMask) != 0 || (l.resource_index.get() & ~k12BitMask) != 0) {
    return DecodeError::kReservedBitsSet;
  }
  c.opcode = static_cast<SesOpcode>(l.opcode);
  c.flags = static_cast<uint8_t>(l.version_flags & ses_flags::kDefined);
  c.message_id = l.message_id_or_length.get();
  const uint32_t gj = l.ri_generation_job_id.get();
  c.ri_generation = static_cast<uint8_t>(gj >> 24);
  c.job_id = gj & kJobIdMask;
  c.pid_on_fep = l.pid_on_fep.get();
  c.resource_index = l.resource_index.get();
  return DecodeError::kOk;
}

bool fits_response_common(const SesResponseCommon& c) {
  return c.list <= 3 && static_cast<uint8_t>(c.opcode) <= 3 &&
         static_cast<uint8_t>(c.return_code) <= kMaxReturnCode && c.job_id <= kJobIdMask;
}

void pack_response_common(const SesResponseCommon& c, layout::ResponseCommon& l) {
  l.list_opcode = static_cast<uint8_t>((c.list << 6) | static_cast<uint8_t>(c.opcode));
  l.version_return_code = static_cast<uint8_t>(c.return_code);
  l.message_id.set(c.message_id);
  l.ri_generation_job_id.set((static_cast<uint32_t>(c.ri_generation) << 24) | c.job_id);
}

DecodeError unpack_response_common(const layout::ResponseCommon& l, SesResponseCommon& c) {
  const uint8_t opcode = l.list_opcode & kOpcodeMask;
  if (opcode > 3) return DecodeError::kBadOpcode;
  if ((l.version_return_code & kVersionMask) != 0) return DecodeError::kBadVersion;
  const uint8_t rc = l.version_return_code & kOpcodeMask;
  if (rc > kMaxReturnCode) return DecodeError::kBadReturnCode;
  c.list = static_cast<uint8_t>(l.list_opcode >> 6);
  c.opcode = static_cast<SesResponseOpcode>(opcode);
  c.return_code = static_cast<ReturnCode>(rc);
  c.message_id = l.message_id.get();
  const uint32_t gj = l.ri_generation_job_id.get();
  c.ri_generation = static_cast<uint8_t>(gj >> 24);
  c.job_id = gj & kJobIdMask;
  return DecodeError::kOk;
}

}  // namespace

// --- requests ----------------------------------------------------------------------

size_t encode(const SesStandardRequest& h, ByteSpan out) {
  if (out.size() < kSesStandardBytes || !fits_common(h.common)) return 0;
  const bool som = h.common.has(ses_flags::kStartOfMessage);
  if (!som && h.payload_length > kMaxSesPayloadLength) return 0;
  auto& l = place<layout::SesStandard>(out);
  pack_common(h.common, l.common);
  l.buffer_offset.set(h.buffer_offset);
  l.initiator.set(h.initiator);
  l.match_bits.set(h.match_bits);
  l.header_data_or_length_offset.set(
      som ? h.header_data : (static_cast<uint64_t>(h.payload_length) << 32) | h.message_offset);
  l.request_length.set(h.request_length);
  return kSesStandardBytes;
}

DecodeError decode(ConstByteSpan in, SesStandardRequest& out) {
  if (in.size() < kSesStandardBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::SesStandard>(in);
  out = SesStandardRequest{};
  if (auto e = unpack_common(l.common, out.common); e != DecodeError::kOk) return e;
  out.buffer_offset = l.buffer_offset.get();
  out.initiator = l.initiator.get();
  out.match_bits = l.match_bits.get();
  const uint64_t v = l.header_data_or_length_offset.get();
  if (out.common.has(ses_flags::kStartOfMessage)) {
    out.header_data = v;
  } else {
    if ((v & kLengthOffsetReserved) != 0) return DecodeError::kReservedBitsSet;
    out.payload_length = static_cast<uint16_t>(v >> 32);
    out.message_offset = static_cast<uint32_t>(v);
  }
  out.request_length = l.request_length.get();
  return DecodeError::kOk;
}

size_t encode(const SesSmallRequest& h, ByteSpan out) {
  if (out.size() < kSesSmallBytes || !fits_common(h.common)) return 0;
  if (h.common.message_id > kMaxSesPayloadLength) return 0;
  auto& l = place<layout::SesSmall>(out);
  pack_common(h.common, l.common);
  l.buffer_offset.set(h.buffer_offset);
  return kSesSmallBytes;
}

DecodeError decode(ConstByteSpan in, SesSmallRequest& out) {
  if (in.size() < kSesSmallBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::SesSmall>(in);
  out = SesSmallRequest{};
  if (auto e = unpack_common(l.common, out.common); e != DecodeError::kOk) return e;
  if (out.common.message_id > kMaxSesPayloadLength) return DecodeError::kReservedBitsSet;
  out.buffer_offset = l.buffer_offset.get();
  return DecodeError::kOk;
}

size_t encode(const SesMediumRequest& h, ByteSpan out) {
  if (out.size() < kSesMediumBytes || !fits_common(h.common)) return 0;
  if (h.common.message_id > kMaxSesPayloadLength) return 0;
  auto& l = place<layout::SesMedium>(out);
  pack_common(h.common, l.common);
  l.header_data_or_buffer_offset.set(h.header_data_or_buffer_offset);
  l.initiator.set(h.initiator);
  l.match_bits.set(h.match_bits);
  return kSesMediumBytes;
}

DecodeError decode(ConstByteSpan in, SesMediumRequest& out) {
  if (in.size() < kSesMediumBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::SesMedium>(in);
  out = SesMediumRequest{};
  if (auto e = unpack_common(l.common, out.common); e != DecodeError::kOk) return e;
  if (out.common.message_id > kMaxSesPayloadLength) return DecodeError::kReservedBitsSet;
  out.header_data_or_buffer_offset = l.header_data_or_buffer_offset.get();
  out.initiator = l.initiator.get();
  out.match_bits = l.match_bits.get();
  return DecodeError::kOk;
}

size_t encode(const RendezvousExtension& h, ByteSpan out) {
  if (out.size() < kRendezvousExtensionBytes) return 0;
  if (h.pid_on_fep > k12BitMask || h.resource_index > k12BitMask) return 0;
  auto& l = place<layout::Rendezvous>(out);
  l.eager_length.set(h.eager_length);
  l.ri_generation_pid_resource.set((static_cast<uint32_t>(h.ri_generation) << 24) |
                                   (static_cast<uint32_t>(h.pid_on_fep) << 12) | h.resource_index);
  l.read_offset.set(h.read_offset);
  l.read_key.set(h.read_key);
  return kRendezvousExtensionBytes;
}

DecodeError decode(ConstByteSpan in, RendezvousExtension& out) {
  if (in.size() < kRendezvousExtensionBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::Rendezvous>(in);
  const uint32_t v = l.ri_generation_pid_resource.get();
  out = RendezvousExtension{};
  out.eager_length = l.eager_length.get();
  out.ri_generation = static_cast<uint8_t>(v >> 24);
  out.pid_on_fep = static_cast<uint16_t>((v >> 12) & k12BitMask);
  out.resource_index = static_cast<uint16_t>(v & k12BitMask);
  out.read_offset = l.read_offset.get();
  out.read_key = l.read_key.get();
  return DecodeError::kOk;
}

// --- atomic extensions -------------------------------------------------------------

size_t encode(const AtomicExtension& h, ByteSpan out) {
  if (out.size() < kAtomicExtensionBytes || static_cast<uint8_t>(h.opcode) > kMaxAmoOpcode ||
      static_cast<uint8_t>(h.datatype) > kMaxAmoDatatype ||
      (h.semantic_control & ~amo_control::kDefined) != 0) {
    return 0;
  }
  auto& l = place<layout::Atomic>(out);
  l.opcode = static_cast<uint8_t>(h.opcode);
  l.datatype = static_cast<uint8_t>(h.datatype);
  l.semantic_control = h.semantic_control;
  l.reserved = 0;
  return kAtomicExtensionBytes;
}

DecodeError decode(ConstByteSpan in, AtomicExtension& out) {
  if (in.size() < kAtomicExtensionBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::Atomic>(in);
  if (l.opcode > kMaxAmoOpcode || l.datatype > kMaxAmoDatatype) return DecodeError::kBadOpcode;
  if ((l.semantic_control & ~amo_control::kDefined) != 0 || l.reserved != 0) {
    return DecodeError::kReservedBitsSet;
  }
  out = AtomicExtension{};
  out.opcode = static_cast<AmoOpcode>(l.opcode);
  out.datatype = static_cast<AmoDatatype>(l.datatype);
  out.semantic_control = l.semantic_control;
  return DecodeError::kOk;
}

size_t encode(const AtomicCompareSwapExtension& h, ByteSpan out) {
  if (out.size() < kAtomicCompareSwapExtensionBytes) return 0;
  auto& l = place<layout::AtomicCompareSwap>(out);
  l.compare_high.set(h.compare_high);
  l.compare_low.set(h.compare_low);
  l.swap_high.set(h.swap_high);
  l.swap_low.set(h.swap_low);
  return encode(h.common, out) == 0 ? 0 : kAtomicCompareSwapExtensionBytes;
}

DecodeError decode(ConstByteSpan in, AtomicCompareSwapExtension& out) {
  if (in.size() < kAtomicCompareSwapExtensionBytes) return DecodeError::kTruncated;
  AtomicExtension common;
  if (const DecodeError e = decode(in, common); e != DecodeError::kOk) return e;
  const auto& l = view<layout::AtomicCompareSwap>(in);
  out = AtomicCompareSwapExtension{};
  out.common = common;
  out.compare_high = l.compare_high.get();
  out.compare_low = l.compare_low.get();
  out.swap_high = l.swap_high.get();
  out.swap_low = l.swap_low.get();
  return DecodeError::kOk;
}

// --- responses ---------------------------------------------------------------------

size_t encode(const SesResponse& h, ByteSpan out) {
  if (out.size() < kSesResponseBytes || !fits_response_common(h.common)) return 0;
  auto& l = place<layout::Response>(out);
  pack_response_common(h.common, l.common);
  l.modified_length.set(h.modified_length);
  return kSesResponseBytes;
}

DecodeError decode(ConstByteSpan in, SesResponse& out) {
  if (in.size() < kSesResponseBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::Response>(in);
  out = SesResponse{};
  if (auto e = unpack_response_common(l.common, out.common); e != DecodeError::kOk) return e;
  out.modified_length = l.modified_length.get();
  return DecodeError::kOk;
}

size_t encode(const SesResponseWithData& h, ByteSpan out) {
  if (out.size() < kSesResponseWithDataBytes || !fits_response_common(h.common)) return 0;
  if (h.payload_length > kMaxSesPayloadLength) return 0;
  auto& l = place<layout::ResponseWithData>(out);
  pack_response_common(h.common, l.common);
  l.read_message_id.set(h.read_message_id);
  l.payload_length.set(h.payload_length);
  l.modified_length.set(h.modified_length);
  l.message_offset.set(h.message_offset);
  return kSesResponseWithDataBytes;
}

DecodeError decode(ConstByteSpan in, SesResponseWithData& out) {
  if (in.size() < kSesResponseWithDataBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::ResponseWithData>(in);
  out = SesResponseWithData{};
  if (auto e = unpack_response_common(l.common, out.common); e != DecodeError::kOk) return e;
  out.read_message_id = l.read_message_id.get();
  out.payload_length = l.payload_length.get();
  if (out.payload_length > kMaxSesPayloadLength) return DecodeError::kReservedBitsSet;
  if (out.payload_length > in.size() - kSesResponseWithDataBytes) return DecodeError::kBadLength;
  out.modified_length = l.modified_length.get();
  out.message_offset = l.message_offset.get();
  return DecodeError::kOk;
}

size_t encode(const SesSmallResponseWithData& h, ByteSpan out) {
  if (out.size() < kSesSmallResponseWithDataBytes || !fits_response_common(h.common)) return 0;
  if (h.common.message_id > kMaxSesPayloadLength) return 0;
  auto& l = place<layout::SmallResponseWithData>(out);
  pack_response_common(h.common, l.common);
  l.original_request_psn.set(h.original_request_psn);
  return kSesSmallResponseWithDataBytes;
}

DecodeError decode(ConstByteSpan in, SesSmallResponseWithData& out) {
  if (in.size() < kSesSmallResponseWithDataBytes) return DecodeError::kTruncated;
  const auto& l = view<layout::SmallResponseWithData>(in);
  out = SesSmallResponseWithData{};
  if (auto e = unpack_response_common(l.common, out.common); e != DecodeError::kOk) return e;
  if (out.common.message_id > kMaxSesPayloadLength) return DecodeError::kReservedBitsSet;
  if (out.common.message_id > in.size() - kSesSmallResponseWithDataBytes) {
    return DecodeError::kBadLength;
  }
  out.original_request_psn = l.original_request_psn.get();
  return DecodeError::kOk;
}

std::optional<uint32_t> peek_job_id(ConstByteSpan in) {
  static_assert(offsetof(layout::SesCommon, ri_generation_job_id) ==
                offsetof(layout::ResponseCommon, ri_generation_job_id));
  const auto gj = peek_be32(in, offsetof(layout::SesCommon, ri_generation_job_id));
  if (!gj) return std::nullopt;
  return *gj & kJobIdMask;
}

std::optional<uint32_t> peek_initiator(ConstByteSpan in) {
  return peek_be32(in, offsetof(layout::SesStandard, initiator));
}

}  // namespace spray::wire
