// libFuzzer target: arbitrary packets into a live engine (the world and the input
// format are in engine_fuzz_target.h). The engine must never crash, leak, read out of
// bounds or write outside the region and receive buffers it was given (ASan).
// Recorded real conversations (write_engine_seeds) are its seeds, so mutations start
// from packets that get past the header checks into PDC and SES state.
#include "tests/fuzz/engine_fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spray::fuzz::EngineFuzzTarget target;
  target.feed({data, size});
  return 0;
}
