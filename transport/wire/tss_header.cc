#include "transport/wire/tss_header.h"

#include "transport/wire/endian.h"
#include "transport/wire/pds_header.h"

namespace spray::wire {
namespace {

constexpr uint32_t kTypeShift = 27;
constexpr uint32_t kSsiPresent = 1u << 26;
constexpr uint32_t kReserved = 1u << 25;
constexpr uint32_t kAssociation = 1u << 24;
constexpr uint32_t kSdiMask = kMaxSdi;

uint32_t load32(const uint8_t* p) {
  BigEndian<uint32_t> v;
  std::memcpy(&v, p, 4);
  return v.get();
}
uint64_t load64(const uint8_t* p) {
  BigEndian<uint64_t> v;
  std::memcpy(&v, p, 8);
  return v.get();
}
void store32(uint8_t* p, uint32_t x) {
  const BigEndian<uint32_t> v(x);
  std::memcpy(p, &v, 4);
}
void store64(uint8_t* p, uint64_t x) {
  const BigEndian<uint64_t> v(x);
  std::memcpy(p, &v, 8);
}

}  // namespace

size_t encode(const TssHeader& h, std::span<uint8_t> out) {
  const size_t size = encoded_size(h);
  if (out.size() < size || h.sdi > kMaxSdi || h.tsc > kMaxTsc) return 0;
  uint32_t word = (static_cast<uint32_t>(PdsType::kTss) << kTypeShift) | h.sdi;
  if (h.has_ssi) word |= kSsiPresent;
  if (h.association) word |= kAssociation;
  store32(out.data(), word);
  size_t at = 4;
  if (h.has_ssi) {
    store32(out.data() + at, h.ssi);
    at += 4;
  }
  store64(out.data() + at, (uint64_t{h.epoch} << 48) | h.tsc);
  return size;
}

DecodeError decode(std::span<const uint8_t> in, TssHeader& out, size_t* consumed) {
  if (in.size() < kTssBytes) return DecodeError::kTruncated;
  const uint32_t word = load32(in.data());
  if ((word >> kTypeShift) != static_cast<uint32_t>(PdsType::kTss)) return DecodeError::kWrongType;
  if ((word & kReserved) != 0) return DecodeError::kReservedBitsSet;
  TssHeader h;
  h.sdi = word & kSdiMask;
  h.association = (word & kAssociation) != 0;
  h.has_ssi = (word & kSsiPresent) != 0;
  size_t at = 4;
  if (h.has_ssi) {
    if (in.size() < kTssWithSsiBytes) return DecodeError::kTruncated;
    h.ssi = load32(in.data() + at);
    at += 4;
  }
  const uint64_t epoch_tsc = load64(in.data() + at);
  h.epoch = static_cast<uint16_t>(epoch_tsc >> 48);
  h.tsc = epoch_tsc & kMaxTsc;
  out = h;
  if (consumed != nullptr) *consumed = at + 8;
  return DecodeError::kOk;
}

}  // namespace spray::wire
