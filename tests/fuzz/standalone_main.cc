// Runs a libFuzzer target without libFuzzer (gcc builds, sanitizer builds): replays
// the corpus files given on the command line (a directory: every file in it) and
// mutants of each, then a fixed number of pseudo-random inputs derived from a seed, so
// every build exercises the fuzz targets a little.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "transport/base/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

constexpr int kMutantsPerFile = 50;

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        files.push_back(entry.path());
      }
    } else {
      files.emplace_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());  // the same order on every run
  spray::Rng rng(12345);
  for (const auto& path : files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    // Then mutants of it, 1-4 bytes overwritten each: a seed gets past the header
    // checks, so its mutants reach the state behind them.
    for (int round = 0; round < kMutantsPerFile && !bytes.empty(); ++round) {
      std::vector<uint8_t> mutant = bytes;
      for (uint64_t n = 1 + rng.below(4); n > 0; --n) {
        mutant[rng.below(mutant.size())] = static_cast<uint8_t>(rng.next());
      }
      LLVMFuzzerTestOneInput(mutant.data(), mutant.size());
    }
  }
  std::vector<uint8_t> buf;
  for (int round = 0; round < 2000; ++round) {
    buf.resize(rng.below(512));
    for (auto& b : buf) b = static_cast<uint8_t>(rng.next());
    // Bias the first bytes toward valid PDS types so decoders get past the prologue.
    if (buf.size() >= 2 && rng.chance(0.7)) buf[0] = static_cast<uint8_t>((1 + rng.below(14)) << 3);
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  std::printf(
      "fuzz replay: 2000 random inputs, %zu corpus files and %d mutants of each, no failure\n",
      files.size(), kMutantsPerFile);
  return 0;
}
