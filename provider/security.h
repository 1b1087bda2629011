// The endpoints' UET TSS settings (transport/tss): from FI_SPRAY_TSS_KEY_FILE, the secure
// domain's 32-byte key as 64 hex digits, and FI_SPRAY_TSS_DOMAIN, its index (SDI).
// Every process of a job reads the same file; one without it cannot talk to them.
#pragma once

#include <optional>
#include <string>

#include "transport/tss/secure_channels.h"

namespace spray::fi {

// The security a new endpoint gets: nullopt when FI_SPRAY_TSS_KEY_FILE is not set. False,
// with the reason in `error`, when the file cannot be read or holds no key, or the
// domain index is out of range. Each call draws the endpoint instance's own random SSI.
bool endpoint_security(std::optional<tss::TssConfig>& out, std::string& error);

}  // namespace spray::fi
