// The outcome of an operation as the transport reports it to its user.
//
// Errors are values inside the core (DESIGN.md decision 8); the provider maps them to
// fi_errno at the C ABI. Each value names one precise cause.
#pragma once

#include <cstdint>
#include <string_view>

namespace spray {

enum class Status : uint8_t {
  kOk = 0,
  kTruncated,        // the receive buffer was shorter than the message; the prefix landed
  kBadKey,           // the memory key is unknown at the target
  kOutOfBounds,      // the RMA range falls outside the registered region
  kAccessDenied,     // the region does not allow this access (read vs write)
  kPeerUnreachable,  // retries exhausted: the peer is dead or the path to it is gone
  kNoPdcAvailable,   // the target had no free packet delivery context
  kCanceled,         // the user canceled the operation before it completed
  kTooLong,          // the message exceeds what this path carries (e.g. UUD > 1 packet)
  kAgain,            // no resource right now; try again after progress
  kInvalidArgument,  // misuse of the API (unknown peer, null buffer with length, ...)
  kProtocolError,    // the peer answered with something we cannot interpret
  kNoMessage,        // a probe found no matching message (yet)
  kUnsupported,      // the target does not support this atomic operation, type or size
  kUnaligned,        // an atomic's target address is not aligned to its element size
};

constexpr std::string_view to_string(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kTruncated:
      return "truncated";
    case Status::kBadKey:
      return "bad memory key";
    case Status::kOutOfBounds:
      return "out of bounds";
    case Status::kAccessDenied:
      return "access denied";
    case Status::kPeerUnreachable:
      return "peer unreachable";
    case Status::kNoPdcAvailable:
      return "no PDC available at peer";
    case Status::kCanceled:
      return "canceled";
    case Status::kTooLong:
      return "too long";
    case Status::kAgain:
      return "try again";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kProtocolError:
      return "protocol error";
    case Status::kNoMessage:
      return "no matching message";
    case Status::kUnsupported:
      return "atomic operation not supported by the target";
    case Status::kUnaligned:
      return "atomic target not aligned to its element size";
  }
  return "unknown";
}

}  // namespace spray
