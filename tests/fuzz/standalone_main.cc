// Runs a libFuzzer target without libFuzzer (gcc builds, sanitizer builds): replays
// any corpus files given on the command line, then a fixed number of pseudo-random
// inputs derived from a seed, so every build exercises the fuzz targets a little.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "transport/base/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  spray::Rng rng(12345);
  std::vector<uint8_t> buf;
  for (int round = 0; round < 2000; ++round) {
    buf.resize(rng.below(512));
    for (auto& b : buf) b = static_cast<uint8_t>(rng.next());
    // Bias the first bytes toward valid PDS types so decoders get past the prologue.
    if (buf.size() >= 2 && rng.chance(0.7)) buf[0] = static_cast<uint8_t>((1 + rng.below(14)) << 3);
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  std::printf("fuzz replay: 2000 random inputs and %d corpus files, no failure\n", argc - 1);
  return 0;
}
