// main() of the provider tests that need two-PDC tables (FI_SPRAY_MAX_PDCS=2), where an
// endpoint may hold one PDC of its own and one of a peer's: every send to a second peer
// waits for the first PDC to close. 100 retries make a CLOSE nobody answers take about
// 50 s to fail, far longer than a send waits for a PDC (10 s).
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("FI_PROVIDER_PATH", SPRAY_FI_DIR, 0);
  setenv("FI_PROVIDER", "spray", 0);
  setenv("FI_SPRAY_MAX_PDCS", "2", 1);
  setenv("FI_SPRAY_RETRIES", "100", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
