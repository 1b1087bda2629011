// Strong big-endian field types for wire headers.
//
// BigEndian<T> stores a T in network byte order in a byte array, so structs built from
// these types have alignment 1, no padding, and a size equal to the wire size. There
// is no implicit conversion: reading takes `.get()`, writing takes `.set()`, so a
// forgotten byte swap is a compile error rather than a bug on the wire.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace spray::wire {

template <class T>
class BigEndian {
  static_assert(std::is_unsigned_v<T>);

 public:
  constexpr BigEndian() = default;
  constexpr explicit BigEndian(T v) { set(v); }

  constexpr T get() const {
    if (std::is_constant_evaluated()) {
      T v = 0;
      for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | bytes_[i]);
      return v;
    }
    T v;
    std::memcpy(&v, bytes_.data(), sizeof(T));  // one load and one bswap at run time
    return to_big(v);
  }
  constexpr void set(T v) {
    if (std::is_constant_evaluated()) {
      for (size_t i = sizeof(T); i-- > 0;) {
        bytes_[i] = static_cast<uint8_t>(v & 0xff);
        if constexpr (sizeof(T) > 1) v = static_cast<T>(v >> 8);
      }
      return;
    }
    const T be = to_big(v);
    std::memcpy(bytes_.data(), &be, sizeof(T));
  }

 private:
  // Host order <-> big-endian (the same swap both ways).
  static T to_big(T v) {
    if constexpr (std::endian::native == std::endian::big || sizeof(T) == 1) {
      return v;
    } else if constexpr (sizeof(T) == 2) {
      return __builtin_bswap16(v);
    } else if constexpr (sizeof(T) == 4) {
      return __builtin_bswap32(v);
    } else {
      return __builtin_bswap64(v);
    }
  }

  std::array<uint8_t, sizeof(T)> bytes_{};
};

using be16 = BigEndian<uint16_t>;
using be32 = BigEndian<uint32_t>;
using be64 = BigEndian<uint64_t>;

static_assert(sizeof(be16) == 2 && alignof(be16) == 1);
static_assert(sizeof(be32) == 4 && alignof(be32) == 1);
static_assert(sizeof(be64) == 8 && alignof(be64) == 1);

}  // namespace spray::wire
