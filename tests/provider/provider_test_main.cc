// main() of the provider tests: settings for every test, then GoogleTest.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // Fail fast towards dead peers (the default waits ~0.5 s of backoff).
  setenv("FI_SPRAY_RETRIES", "4", 0);
  setenv("FI_SPRAY_RTO_MAX_MS", "5", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
