// UET 1.0 Transport Security Sublayer (TSS) header: encoder and decoder.
//
// A secured packet is: TSS header · PDS header · SES header · payload · 16-byte ICV
// (the AES-GCM tag). The header is the packet's first bytes, in place of a PDS prologue
// (its type field, 0x01, sits where the prologue's does), and is sent in the clear:
//
//   word 0 (4):  type (5 bits, 0x01) | SP (1: SSI present) | reserved (1) | AN (1) |
//                SDI (secure domain index, 24 bits)
//   [SSI (4), only when SP]
//   epoch (16 bits) | TSC (transmit security counter, 48 bits) (8)
//
// 12 bytes, or 16 with the SSI (secure source identifier). Layout from the consortium's
// reference provider (uet_pkt_hdr.h, struct uet_sec / uet_sec_ssi); what the fields mean
// to Spray is in transport/tss/secure_channels.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/decode_error.h"

namespace spray::wire {

inline constexpr size_t kTssBytes = 12;
inline constexpr size_t kTssWithSsiBytes = 16;
inline constexpr size_t kTssIcvBytes = 16;  // AES-GCM tag at the packet's end
inline constexpr uint32_t kMaxSdi = (1u << 24) - 1;
inline constexpr uint64_t kMaxTsc = (uint64_t{1} << 48) - 1;

struct TssHeader {
  uint32_t sdi = 0;          // secure domain index, 24 bits
  bool association = false;  // AN: which of the domain's two key associations
  bool has_ssi = false;      // SP
  uint32_t ssi = 0;          // only when has_ssi
  uint16_t epoch = 0;
  uint64_t tsc = 0;  // 48 bits; never repeats under one key

  friend bool operator==(const TssHeader&, const TssHeader&) = default;
};

inline constexpr size_t encoded_size(const TssHeader& h) {
  return h.has_ssi ? kTssWithSsiBytes : kTssBytes;
}
// Writes the header at out[0, encoded_size(h)); returns that count, or 0 (nothing
// written) when `out` is too small or a field does not fit (SDI > 24 bits, TSC > 48).
size_t encode(const TssHeader& h, std::span<uint8_t> out);
// Reads a header from the start of `in`; `consumed` (if given) gets its size.
DecodeError decode(std::span<const uint8_t> in, TssHeader& out, size_t* consumed = nullptr);

}  // namespace spray::wire
