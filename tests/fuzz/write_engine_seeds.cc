// Writes the recorded conversations (engine_conversations.h) as fuzz_engine seeds, one
// file per conversation, and each of their packets as a fuzz_wire seed:
//   write_engine_seeds ENGINE_DIR WIRE_DIR
// The build runs it, so the seeds always match the wire format and the engine of the
// same build.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>

#include "tests/fuzz/engine_conversations.h"
#include "tests/fuzz/engine_fuzz_target.h"

namespace {

void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ENGINE_DIR WIRE_DIR\n", argv[0]);
    return 2;
  }
  try {
    const std::filesystem::path engine_dir = argv[1], wire_dir = argv[2];
    std::filesystem::create_directories(engine_dir);
    std::filesystem::create_directories(wire_dir);
    for (const auto& c : spray::fuzz::record_engine_conversations()) {
      write_file(engine_dir / (c.name + ".bin"), c.input);
      int i = 0;
      spray::fuzz::EngineFuzzTarget::for_each_packet(
          c.input, [&](std::span<const uint8_t> packet, uint8_t) {
            write_file(wire_dir / (c.name + "_" + std::to_string(i++) + ".bin"), packet);
            return true;
          });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_engine_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
