// The TSS key derivation function: where a pair's traffic key comes from (see
// secure_channels.h for the label and context Spray feeds it).
#pragma once

#include <span>

#include "transport/tss/aes_gcm.h"

namespace spray::tss {

// NIST SP 800-108 key derivation in counter mode with AES-256-CMAC as the PRF (UET TSS's
// KDF): 32 bytes from `secret`, `label` and `context`. False on an OpenSSL failure.
bool derive_key(const Key& secret, std::span<const uint8_t> label, std::span<const uint8_t> context,
                Key& out);

// Overwrites a key that is no longer needed, in a way the compiler may not remove
// (OPENSSL_cleanse), so that it does not linger in freed or reused memory.
void wipe(Key& key);

}  // namespace spray::tss
