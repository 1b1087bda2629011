// A secured job moving to a new key while its endpoints run (FI_SPRAY_TSS_KEY_FILE
// rewritten in the three steps security.h gives), through the public libfabric API.
// Messages between the endpoints arrive intact after every step; an endpoint opened at
// the end, with only the new key, reaches the old endpoints both ways (so they seal with
// the new key and open it); and a file rewritten with garbage on the way is ignored, the
// endpoints keeping their keys.
//
// Run by CTest with FI_SPRAY_TSS_KEY_FILE naming a file this test owns and rewrites, and
// FI_SPRAY_TSS_KEY_CHECK_MS short; it refuses to run otherwise.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/provider/fabric_fixture.h"

namespace spray_fi_test {
namespace {

constexpr char kOldKey[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr char kNewKey[] = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f";

struct TssRekey : Fabric {
  std::string key_file;

  void SetUp() override {
    const char* path = std::getenv("FI_SPRAY_TSS_KEY_FILE");
    const char* check = std::getenv("FI_SPRAY_TSS_KEY_CHECK_MS");
    ASSERT_TRUE(path && check && std::string(path).find("rekey") != std::string::npos)
        << "run by CTest: FI_SPRAY_TSS_KEY_FILE must name this test's own file (…rekey…) "
           "and FI_SPRAY_TSS_KEY_CHECK_MS be set";
    key_file = path;
    write_keys(kOldKey);  // the plain form: one key, association 0
    Fabric::SetUp();
  }
  void TearDown() override {
    Fabric::TearDown();
    std::filesystem::remove(key_file);
  }
  // Replaces the key file at once (a new file renamed over it), mode 0600.
  void write_keys(const std::string& text) {
    const std::string next = key_file + ".next";
    {
      std::ofstream out(next, std::ios::trunc);
      out << text << "\n";
    }
    std::filesystem::permissions(
        next, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::filesystem::rename(next, key_file);
  }
  // Reads the CQ (progressing every endpoint) for `ms` milliseconds: long enough for each
  // to look at the key file again (FI_SPRAY_TSS_KEY_CHECK_MS is far shorter).
  void progress_for(int ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      fi_cq_tagged_entry e;
      const ssize_t r = fi_cq_read(cq, &e, 1);
      ASSERT_TRUE(r == -FI_EAGAIN) << "unexpected completion or error: " << r;
    }
  }
  // `from` sends 3 messages of sizes up to a rendezvous to `to`, each checked byte by byte.
  void exchange(size_t from, size_t to, uint8_t seed) {
    SCOPED_TRACE("endpoint " + std::to_string(from) + " -> " + std::to_string(to));
    for (const size_t size : {size_t{8}, size_t{5000}, size_t{200000}}) {
      const auto message = pattern(size, static_cast<uint8_t>(seed + size));
      std::vector<uint8_t> in(size, 0);
      ASSERT_EQ(fi_trecv(eps[to], in.data(), size, nullptr, addrs[from], seed, 0, nullptr), 0);
      ASSERT_EQ(fi_tsend(eps[from], message.data(), size, nullptr, addrs[to], seed, nullptr), 0);
      ASSERT_EQ(wait(2).size(), 2u) << size << " bytes";
      ASSERT_EQ(in, message) << size << " bytes";
    }
  }
};

TEST_F(TssRekey, a_job_moves_to_a_new_key_while_its_endpoints_run) {
  endpoint();
  endpoint();
  exchange(0, 1, 1);
  // 1. The new key under association 1 beside the old one, which still seals.
  write_keys(std::string("0 ") + kOldKey + " seal\n1 " + kNewKey);
  progress_for(200);
  exchange(0, 1, 2);
  exchange(1, 0, 3);
  // A file that does not parse is ignored: the endpoints keep both keys.
  write_keys("this is not a key file");
  progress_for(200);
  exchange(1, 0, 4);
  // 2. The new key seals.
  write_keys(std::string("# moving to the new key\n0 ") + kOldKey + "\n1 " + kNewKey + " seal");
  progress_for(200);
  exchange(0, 1, 5);
  exchange(1, 0, 6);
  // 3. The old key retired.
  write_keys(std::string("1 ") + kNewKey);
  progress_for(200);
  exchange(0, 1, 7);
  // An endpoint opened now knows only the new key: the first two reach it, and it them,
  // only if they seal with the new key and open packets sealed with it.
  endpoint();
  exchange(2, 0, 8);
  exchange(0, 2, 9);
  exchange(1, 2, 10);
  exchange(2, 1, 11);
}

// What fi_endpoint makes of the key file: the forms security.h describes open; anything
// else is refused (FI_EINVAL), and an endpoint that cannot tell which key seals, or would
// read a key it does not hold, never opens.
TEST_F(TssRekey, key_files_that_do_not_parse_fail_fi_endpoint) {
  const std::string old_key = kOldKey, new_key = kNewKey;
  const std::vector<std::string> good = {
      old_key,                                                    // the plain form
      "  " + old_key + "  \n",                                    // whitespace around it
      "1 " + new_key,                                             // one key, association 1
      "# two keys\n0 " + old_key + "\n\n1 " + new_key + " seal",  // comments, blank lines
      "0 " + old_key + " seal # the old one still seals\n1 " + new_key,
  };
  const std::vector<std::string> bad = {
      "",                                                // no key
      "# only a comment",                                // no key
      old_key.substr(2),                                 // 62 digits
      old_key + "00",                                    // 66 digits
      "2 " + old_key,                                    // no association 2
      "0 " + old_key + "\n1 " + new_key,                 // two keys, none sealing
      "0 " + old_key + " seal\n1 " + new_key + " seal",  // two sealing
      "0 " + old_key + "\n0 " + new_key + " seal",       // association 0 twice
      "0 " + old_key + " sealed",                        // not `seal`
      "0 " + old_key + " seal now",                      // more words
      "0 " + old_key.substr(0, 63) + "g",                // not hex
  };
  for (const auto& [contents, opens] : {std::pair{good, true}, std::pair{bad, false}}) {
    for (const std::string& text : contents) {
      SCOPED_TRACE("key file: \"" + text + "\"");
      write_keys(text);
      fid_ep* ep = nullptr;
      const int rc = fi_endpoint(domain, info, &ep, nullptr);
      EXPECT_EQ(rc, opens ? 0 : -FI_EINVAL);
      if (ep) {
        EXPECT_EQ(fi_close(&ep->fid), 0);
      }
    }
  }
}

}  // namespace
}  // namespace spray_fi_test
