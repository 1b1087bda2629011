// Real conversations with the fuzz target's host 0, recorded as fuzz_engine inputs.
//
// Each one starts operations on host 1 of an EngineFuzzTarget and runs the cluster until
// they have completed and the last acknowledgements are in; every packet host 0's NIC
// received from host 1 on the way is appended, in order, to the input. Replayed into a
// fresh EngineFuzzTarget, the input drives host 0 through the same states (the
// simulation is deterministic), so the fuzzer's mutations start deep inside PDC and SES
// state instead of at the header checks random bytes rarely pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spray::fuzz {

struct Conversation {
  std::string name;            // file name stem, e.g. "send_rud"
  std::vector<uint8_t> input;  // engine_fuzz_target.h's format
  // ACKs the live host 1 held to a later step (host 0's inject asks for none when it
  // has its PDC to itself); the seeds then carry such a late ACK.
  uint64_t acks_held_by_host1 = 0;
};

// The payload byte at `offset` of every conversation's data (sends, writes).
inline uint8_t conversation_byte(size_t offset) {
  return static_cast<uint8_t>(offset * 7 + 3);
}

// All conversations, the same bytes on every call. Throws std::runtime_error when one
// does not complete or does not fit in a fuzz input.
std::vector<Conversation> record_engine_conversations();

}  // namespace spray::fuzz
