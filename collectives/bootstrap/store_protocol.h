// Framing shared by the store's server and client (the protocol is described in store.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "collectives/bootstrap/store.h"

namespace spray::coll::store_protocol {

inline constexpr uint32_t kMaxKey = 4096;
inline constexpr uint32_t kMaxValue = 1 << 20;

// Response status: the request was done, or refused (the value is the reason, and the
// server closes the connection after it).
inline constexpr uint8_t kOk = 0;
inline constexpr uint8_t kRefused = 1;

inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline void store_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// op, key and (for 'S') value as one buffer.
inline Bytes request(uint8_t op, const std::string& key, const Bytes* value) {
  Bytes out;
  out.push_back(op);
  store_u32(out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  if (value) {
    store_u32(out, static_cast<uint32_t>(value->size()));
    out.insert(out.end(), value->begin(), value->end());
  }
  return out;
}

inline Bytes response(uint8_t status, const Bytes& value) {
  Bytes out;
  out.push_back(status);
  store_u32(out, static_cast<uint32_t>(value.size()));
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

}  // namespace spray::coll::store_protocol
