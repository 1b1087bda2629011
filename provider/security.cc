#include "provider/security.h"

#include <sys/stat.h>

#include <algorithm>
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

DomainKeys::~DomainKeys() {
  for (auto& key : by_association) {
    if (key) tss::wipe(*key);
  }
}

bool read_domain_keys(const std::string& path, DomainKeys& out, std::string& error) {
  out = DomainKeys{};
  std::ifstream file(path);
  if (!file) {
    error = "cannot read FI_SPRAY_TSS_KEY_FILE " + path;
    return false;
  }
  std::stringstream whole;
  whole << file.rdbuf();
  std::string text = whole.str();
  const auto refuse = [&](const std::string& why) {
    error = "FI_SPRAY_TSS_KEY_FILE " + path + " does not hold a key as it should: " + why;
    std::fill(text.begin(), text.end(), '\0');
    return false;
  };
  // The plain form: one word, the key (association 0, sealing).
  std::istringstream words(text);
  std::string word;
  size_t word_count = 0;
  while (words >> word && word_count < 2) ++word_count;
  std::fill(word.begin(), word.end(), '\0');
  if (word_count == 1) {
    std::optional<tss::Key> key = parse_key(text);
    if (!key) return refuse("the key must be 64 hex digits (32 bytes)");
    out.by_association[0] = *key;
    tss::wipe(*key);
    std::fill(text.begin(), text.end(), '\0');
    return true;
  }
  // Lines of "AN KEY [seal]".
  std::istringstream lines(text);
  std::string line;
  int sealing = -1;
  for (int number = 1; std::getline(lines, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string an, hex, mark, extra;
    if (!(fields >> an)) continue;  // empty or a comment
    fields >> hex >> mark >> extra;
    const std::string at = "line " + std::to_string(number) + ": ";
    if (an != "0" && an != "1") return refuse(at + "the association number must be 0 or 1");
    const size_t association = an == "1" ? 1 : 0;
    std::optional<tss::Key> key = parse_key(hex);
    if (!key) return refuse(at + "the key must be 64 hex digits (32 bytes)");
    if (out.by_association[association]) return refuse(at + "association " + an + " twice");
    out.by_association[association] = *key;
    tss::wipe(*key);
    if (!mark.empty() && mark != "seal")
      return refuse(at + "expected `seal` or nothing after the key");
    if (!extra.empty()) return refuse(at + "more than `AN KEY [seal]`");
    if (mark == "seal") {
      if (sealing >= 0) return refuse(at + "a second key marked `seal`");
      sealing = static_cast<int>(association);
    }
  }
  std::fill(text.begin(), text.end(), '\0');
  std::fill(line.begin(), line.end(), '\0');
  const int keys = (out.by_association[0] ? 1 : 0) + (out.by_association[1] ? 1 : 0);
  if (keys == 0) return refuse("64 hex digits (32 bytes), or lines `AN KEY [seal]`");
  if (sealing < 0 && keys == 2) return refuse("two keys, and neither is marked `seal`");
  out.sealing = sealing >= 0 ? sealing == 1 : out.by_association[1].has_value();
  return true;
}

void apply_domain_keys(const DomainKeys& keys, tss::SecureChannels& channels) {
  for (const bool association : {false, true}) {
    if (keys.by_association[association]) {
      channels.install_key(association, *keys.by_association[association]);
    }
  }
  channels.seal_with(keys.sealing);
  for (const bool association : {false, true}) {
    if (!keys.by_association[association]) channels.retire_key(association);
  }
}

bool endpoint_security(std::optional<tss::TssConfig>& out, DomainKeys& keys, std::string& error) {
  out.reset();
  const Params& p = params();
  if (p.tss_key_file.empty()) return true;
  if (p.tss_domain < 1 || static_cast<uint32_t>(p.tss_domain) > wire::kMaxSdi) {
    error = "FI_SPRAY_TSS_DOMAIN must be from 1 to 16777215";
    return false;
  }
  if (!read_domain_keys(p.tss_key_file, keys, error)) return false;
  struct stat st {};
  if (::stat(p.tss_key_file.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    SPRAY_WARN(FI_LOG_EP_CTRL, "the TSS key file %s can be read by others than its owner\n",
               p.tss_key_file.c_str());
  }
  tss::TssConfig c;
  c.domain_index = static_cast<uint32_t>(p.tss_domain);
  c.domain_key = *keys.by_association[keys.sealing];
  c.association = keys.sealing;
  // Fresh for each endpoint instance, so that one reopened at the same address never
  // reuses a key and IV (see secure_channels.h).
  std::random_device random;
  c.source_id = random();
  out = c;
  tss::wipe(c.domain_key);
  return true;
}

KeyFileWatch::KeyFileWatch(std::string path) : path_(std::move(path)) {}

bool KeyFileWatch::changed(Time now) {
  next_check_ = now + Duration::milliseconds(std::max(params().tss_key_check_ms, 1));
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) st = {};  // gone: a change too, when it comes back
  const bool moved = st.st_ino != seen_.st_ino || st.st_size != seen_.st_size ||
                     st.st_mtim.tv_sec != seen_.st_mtim.tv_sec ||
                     st.st_mtim.tv_nsec != seen_.st_mtim.tv_nsec;
  seen_ = st;
  return moved;
}

}  // namespace spray::fi
