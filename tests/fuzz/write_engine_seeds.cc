// Writes the recorded conversations (engine_conversations.h) as fuzz_engine seeds, one
// file per conversation: write_engine_seeds DIR. The build runs it, so the seeds always
// match the wire format and the engine of the same build.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/engine_conversations.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    for (const auto& c : spray::fuzz::record_engine_conversations()) {
      std::ofstream f(dir / (c.name + ".bin"), std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(c.input.data()),
              static_cast<std::streamsize>(c.input.size()));
      if (!f) throw std::runtime_error("cannot write " + (dir / c.name).string());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_engine_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
