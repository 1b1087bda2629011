// The bytes a tool sends as message `msg`, and a check that a received message holds
// them. Every message and every 8-byte word differs, so a misplaced, duplicated or
// stale packet shows.
//
// Word-wise (one 64-bit value per 8 bytes, a plain loop the compiler vectorises) because
// a benchmark that checks every byte must check faster than the transport moves them:
// the byte-at-a-time pattern this replaces held spray-endpoint to about 0.6 GB/s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace spray::tools {

// The value of 8-byte word `w` of message `msg` (little-endian in memory).
inline uint64_t pattern_word(uint64_t msg, uint64_t w) {
  return (msg + 1) * 0x9e3779b97f4a7c15ULL ^ w * 0xd6e8feb86659fd93ULL;
}

inline void fill_pattern(std::span<uint8_t> out, uint64_t msg) {
  const size_t words = out.size() / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = pattern_word(msg, w);
    std::memcpy(out.data() + 8 * w, &v, 8);
  }
  if (const size_t rest = out.size() % 8) {  // (an empty span may have no data pointer)
    const uint64_t tail = pattern_word(msg, words);
    std::memcpy(out.data() + 8 * words, &tail, rest);
  }
}

// How many 8-byte words (the last one possibly partial) of `in` differ from message
// `msg`'s pattern: 0 means intact. No early exit, so the loop vectorises.
inline size_t pattern_mismatches(std::span<const uint8_t> in, uint64_t msg) {
  const size_t words = in.size() / 8;
  size_t wrong = 0;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v;
    std::memcpy(&v, in.data() + 8 * w, 8);
    wrong += v != pattern_word(msg, w);
  }
  if (const size_t rest = in.size() % 8) {
    const uint64_t want = pattern_word(msg, words);
    wrong += std::memcmp(in.data() + 8 * words, &want, rest) != 0;
  }
  return wrong;
}

}  // namespace spray::tools
