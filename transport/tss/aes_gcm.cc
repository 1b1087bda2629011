#include "transport/tss/aes_gcm.h"

#include <openssl/evp.h>

namespace spray::tss {
namespace {

EVP_CIPHER_CTX* as_ctx(void* p) {
  return static_cast<EVP_CIPHER_CTX*>(p);
}

// Fetched once per process: an implicit fetch per context would search the providers.
const EVP_CIPHER* aes_256_gcm() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

// Sets the IV (the key stays) and feeds the additional authenticated data.
bool start(EVP_CIPHER_CTX* ctx, const Iv& iv, std::span<const uint8_t> aad) {
  int n = 0;
  if (EVP_CipherInit_ex(ctx, nullptr, nullptr, nullptr, iv.data(), -1) != 1) return false;
  return aad.empty() ||
         EVP_CipherUpdate(ctx, nullptr, &n, aad.data(), static_cast<int>(aad.size())) == 1;
}

bool update(EVP_CIPHER_CTX* ctx, uint8_t* out, std::span<const uint8_t> in) {
  int n = 0;
  return in.empty() || EVP_CipherUpdate(ctx, out, &n, in.data(), static_cast<int>(in.size())) == 1;
}

}  // namespace

void AesGcm::Free::operator()(void* ctx) const {
  EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(ctx));
}

AesGcm::AesGcm(const Key& key, Direction direction) {
  const EVP_CIPHER* cipher = aes_256_gcm();
  if (cipher == nullptr) return;
  std::unique_ptr<void, Free> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return;
  const int enc = direction == Direction::kSeal ? 1 : 0;
  if (EVP_CipherInit_ex(as_ctx(ctx.get()), cipher, nullptr, key.data(), nullptr, enc) != 1) return;
  ctx_ = std::move(ctx);
}

AesGcm::~AesGcm() = default;

bool AesGcm::seal(const Iv& iv, std::span<const uint8_t> aad, std::span<uint8_t> text,
                  std::span<const uint8_t> gathered, std::span<uint8_t, kTagBytes> tag) {
  EVP_CIPHER_CTX* ctx = as_ctx(ctx_.get());
  if (ctx == nullptr || !start(ctx, iv, aad)) return false;
  if (!update(ctx, text.data(), text) || !update(ctx, text.data() + text.size(), gathered)) {
    return false;
  }
  int n = 0;
  if (EVP_CipherFinal_ex(ctx, nullptr, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, tag.data()) == 1;
}

bool AesGcm::open(const Iv& iv, std::span<const uint8_t> aad, std::span<uint8_t> text,
                  std::span<const uint8_t, kTagBytes> tag) {
  EVP_CIPHER_CTX* ctx = as_ctx(ctx_.get());
  if (ctx == nullptr || !start(ctx, iv, aad) || !update(ctx, text.data(), text)) return false;
  // OpenSSL takes the expected tag through a non-const pointer; it only reads it.
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, const_cast<uint8_t*>(tag.data())) !=
      1) {
    return false;
  }
  int n = 0;
  return EVP_CipherFinal_ex(ctx, nullptr, &n) == 1;
}

bool AesGcm::decrypt_unverified(const Iv& iv, std::span<uint8_t> text) {
  EVP_CIPHER_CTX* ctx = as_ctx(ctx_.get());
  return ctx != nullptr && start(ctx, iv, {}) && update(ctx, text.data(), text);
}

}  // namespace spray::tss
