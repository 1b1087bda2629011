#include "provider/security.h"

#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <random>
#include <sstream>

#include "provider/spray_fi.h"
#include "transport/tss/key_derivation.h"

namespace spray::fi {
namespace {

// A key from its text: 64 hex digits, with any whitespace around them.
std::optional<tss::Key> parse_key(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    digits.push_back(c);
  }
  tss::Key key{};
  if (digits.size() != key.size() * 2) return std::nullopt;
  for (size_t i = 0; i < key.size(); ++i) {
    key[i] = static_cast<uint8_t>(std::stoul(digits.substr(2 * i, 2), nullptr, 16));
  }
  return key;
}

}  // namespace

bool endpoint_security(std::optional<tss::TssConfig>& out, std::string& error) {
  out.reset();
  const Params& p = params();
  if (p.tss_key_file.empty()) return true;
  if (p.tss_domain < 1 || static_cast<uint32_t>(p.tss_domain) > wire::kMaxSdi) {
    error = "FI_SPRAY_TSS_DOMAIN must be from 1 to 16777215";
    return false;
  }
  std::ifstream file(p.tss_key_file);
  if (!file) {
    error = "cannot read FI_SPRAY_TSS_KEY_FILE " + p.tss_key_file;
    return false;
  }
  std::stringstream text;
  text << file.rdbuf();
  std::optional<tss::Key> key = parse_key(text.str());
  if (!key) {
    error = "FI_SPRAY_TSS_KEY_FILE " + p.tss_key_file +
            " does not hold a key: it must hold 64 hex digits (32 bytes) and nothing else";
    return false;
  }
  struct stat st {};
  if (::stat(p.tss_key_file.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "the TSS key file %s can be read by others than its owner\n",
               p.tss_key_file.c_str());
  }
  tss::TssConfig c;
  c.domain_index = static_cast<uint32_t>(p.tss_domain);
  c.domain_key = *key;
  tss::wipe(*key);
  // Fresh for each endpoint instance, so that one reopened at the same address never
  // reuses a key and IV (see secure_channels.h).
  std::random_device random;
  c.source_id = random();
  out = c;
  return true;
}

}  // namespace spray::fi
