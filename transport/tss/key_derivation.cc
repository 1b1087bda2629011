#include "transport/tss/key_derivation.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

namespace spray::tss {

bool derive_key(const Key& secret, std::span<const uint8_t> label, std::span<const uint8_t> context,
                Key& out) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "KBKDF", nullptr);
  if (kdf == nullptr) return false;
  EVP_KDF_CTX* kctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (kctx == nullptr) return false;
  // The parameter API takes non-const pointers; OpenSSL only reads these.
  char mode[] = "COUNTER";
  char mac[] = "CMAC";
  char cipher[] = "AES-256-CBC";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, mode, 0),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MAC, mac, 0),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_CIPHER, cipher, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(label.data()),
                                        label.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(context.data()),
                                        context.size()),
      OSSL_PARAM_construct_end()};
  const bool ok = EVP_KDF_derive(kctx, out.data(), out.size(), params) == 1;
  EVP_KDF_CTX_free(kctx);
  return ok;
}

void wipe(Key& key) {
  OPENSSL_cleanse(key.data(), key.size());
}

}  // namespace spray::tss
