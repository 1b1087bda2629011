// The endpoints' UET TSS settings (transport/tss): from FI_SPRAY_TSS_KEY_FILE, the secure
// domain's keys, and FI_SPRAY_TSS_DOMAIN, its index (SDI). Every process of a job reads
// the same file; one without it cannot talk to them.
//
// The key file holds one key as 64 hex digits (association 0, sealing), or, to move the
// domain to a new key without a gap, one or two lines of the form
//     AN KEY [seal]
// (AN: association number 0 or 1; KEY: 64 hex digits; `seal` on the key packets are
// sealed with, implied when there is one key; `#` starts a comment). An endpoint reads
// the file when it opens and again whenever it changes (checked every
// FI_SPRAY_TSS_KEY_CHECK_MS): it installs every key listed (packets sealed with any of
// them open), seals with the one marked, and retires a key no longer listed. So a domain
// moves to a new key in three rewrites of the file on every host, each once the last has
// reached every endpoint: add the new key under the other AN; move `seal` to it; remove
// the old key. A file that does not parse is refused with the reason (at open) or
// ignored with a warning (later: the endpoint keeps its keys).
#pragma once

#include <sys/stat.h>

#include <array>
#include <optional>
#include <string>

#include "transport/base/time.h"
#include "transport/tss/secure_channels.h"

namespace spray::fi {

// The keys a key file holds, by association number, and the one that seals. Wiped when
// it goes.
struct DomainKeys {
  std::array<std::optional<tss::Key>, 2> by_association;
  bool sealing = false;

  DomainKeys() = default;
  DomainKeys(const DomainKeys&) = default;
  DomainKeys& operator=(const DomainKeys&) = default;
  ~DomainKeys();
};

// Reads the key file at `path`: false, with the reason in `error`, when it cannot be read
// or does not hold keys as described above.
bool read_domain_keys(const std::string& path, DomainKeys& out, std::string& error);
// Makes `channels` hold exactly `keys`: each installed, the sealing one sealing, an
// association without a key retired.
void apply_domain_keys(const DomainKeys& keys, tss::SecureChannels& channels);

// The security a new endpoint gets: nullopt when FI_SPRAY_TSS_KEY_FILE is not set. False,
// with the reason in `error`, when the file cannot be read or holds no key, or the
// domain index is out of range. Each call draws the endpoint instance's own random SSI.
// `keys` receives every key of the file (the config carries the sealing one only).
bool endpoint_security(std::optional<tss::TssConfig>& out, DomainKeys& keys, std::string& error);

// Watches the key file for an endpoint: due() every FI_SPRAY_TSS_KEY_CHECK_MS, changed()
// when the file's inode, size or modification time moved since the last look.
class KeyFileWatch {
 public:
  explicit KeyFileWatch(std::string path);
  bool due(Time now) const { return now >= next_check_; }
  // Looks at the file (one stat); true when it changed since the last look.
  bool changed(Time now);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Time next_check_{};
  struct stat seen_ {};
};

}  // namespace spray::fi
