// AesGcm: one AES-256-GCM key, ready to seal or open packet after packet (OpenSSL EVP).
//
// The key schedule and the GHASH tables are computed once, when the key is set; each
// packet then only sets its 12-byte IV. So sealing costs no allocation and no system
// call per packet (OpenSSL reads its configuration once per process, when the first key
// is set; that is the only system call TSS makes). One direction per object: the TSS keys are
// one-way (a key per source and destination), so a context never switches between sealing and
// opening. Not copyable; movable. Not thread-safe (one engine, one thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

namespace spray::tss {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kIvBytes = 12;
inline constexpr size_t kTagBytes = 16;
using Key = std::array<uint8_t, kKeyBytes>;
using Iv = std::array<uint8_t, kIvBytes>;

class AesGcm {
 public:
  enum class Direction : uint8_t { kSeal, kOpen };

  // A context with no key: valid() is false and every call fails.
  AesGcm() = default;
  AesGcm(const Key& key, Direction direction);
  AesGcm(AesGcm&&) noexcept = default;
  AesGcm& operator=(AesGcm&&) noexcept = default;
  ~AesGcm();

  bool valid() const { return ctx_ != nullptr; }

  // Encrypts `text` in place, then `gathered` (may be empty) into the bytes that follow
  // `text` in memory (text.data() + text.size() onwards; the caller owns that room),
  // and writes the tag over `aad` and all of it. Returns false only on an OpenSSL
  // failure (then nothing may be sent).
  bool seal(const Iv& iv, std::span<const uint8_t> aad, std::span<uint8_t> text,
            std::span<const uint8_t> gathered, std::span<uint8_t, kTagBytes> tag);
  // Decrypts `text` in place and checks `tag` over `aad` and `text`. False: the packet
  // is not authentic (wrong key, or altered); `text` then holds garbage.
  bool open(const Iv& iv, std::span<const uint8_t> aad, std::span<uint8_t> text,
            std::span<const uint8_t, kTagBytes> tag);
  // Decrypts `text` in place without checking anything: for a packet whose tag a switch
  // cut off (trimming). Its bytes are then unauthenticated; see SecureChannels::open.
  bool decrypt_unverified(const Iv& iv, std::span<uint8_t> text);

 private:
  struct Free {
    void operator()(void* ctx) const;
  };
  std::unique_ptr<void, Free> ctx_;  // EVP_CIPHER_CTX, owned
};

}  // namespace spray::tss
