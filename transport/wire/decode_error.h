// Why a decoder rejected a buffer. Decoders never read past the span they are given;
// they return one of these instead of a header.
#pragma once

#include <cstdint>
#include <string_view>

namespace spray::wire {

enum class DecodeError : uint8_t {
  kOk = 0,
  kTruncated,        // the buffer is shorter than the header it claims to hold
  kWrongType,        // the PDS type is not the one this decoder handles
  kReservedBitsSet,  // a reserved flag or field bit is non-zero
  kBadNextHeader,    // next-header value unknown or not allowed for this type
  kBadControlType,   // CTRL type outside the defined set
  kBadNackCode,      // NACK code outside the defined set
  kBadVersion,       // SES version other than 0 (UET 1.0)
  kBadOpcode,        // SES opcode outside the defined set
  kBadReturnCode,    // SES return code outside the defined set
  kBadLength,        // a length field disagrees with the buffer or with its limits
};

constexpr std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kWrongType:
      return "wrong PDS type";
    case DecodeError::kReservedBitsSet:
      return "reserved bits set";
    case DecodeError::kBadNextHeader:
      return "bad next header";
    case DecodeError::kBadControlType:
      return "bad control type";
    case DecodeError::kBadNackCode:
      return "bad NACK code";
    case DecodeError::kBadVersion:
      return "bad SES version";
    case DecodeError::kBadOpcode:
      return "bad SES opcode";
    case DecodeError::kBadReturnCode:
      return "bad SES return code";
    case DecodeError::kBadLength:
      return "bad length";
  }
  return "unknown";
}

}  // namespace spray::wire
