// main() of the provider tests: settings for every test, then GoogleTest.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace {

// True when libibverbs would find a device: it lists /sys/class/infiniband_verbs/uverbs*.
bool rdma_device_present() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband_verbs", ec)) {
    if (e.path().filename().string().starts_with("uverbs")) return true;
  }
  return false;
}

// Over FI_SPRAY_DATAPATH=verbs without an RDMA device every test is skipped, saying why
// (the device's absence is checked independently of the provider, so a provider that
// wrongly finds no device still fails where one exists).
struct NeedsRdmaDevice : ::testing::Environment {
  void SetUp() override {
    const char* datapath = std::getenv("FI_SPRAY_DATAPATH");
    if (datapath && std::strcmp(datapath, "verbs") == 0 && !rdma_device_present()) {
      GTEST_SKIP() << "FI_SPRAY_DATAPATH=verbs: no RDMA device on this machine "
                      "(/sys/class/infiniband_verbs has no uverbs device)";
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  // libfabric loads the provider from the build tree, and only it.
  setenv("FI_PROVIDER_PATH", SPRAY_FI_DIR, 0);
  setenv("FI_PROVIDER", "spray", 0);
  // Fail fast towards dead peers (the default waits ~0.5 s of backoff).
  setenv("FI_SPRAY_RETRIES", "4", 0);
  setenv("FI_SPRAY_RTO_MAX_MS", "5", 0);
  // A peer gives up after ~20 ms of silence then, so an endpoint whose test makes no call
  // must be answered sooner: the standby thread steps in after 1-2 ms instead of 10-20.
  setenv("FI_SPRAY_STANDBY_PROGRESS_MS", "1", 0);
  // Warnings go to the test's output, which ctest keeps for a failed test: a PDC that
  // failed then says to which peer and why (an operation's error code alone does not).
  setenv("FI_LOG_LEVEL", "warn", 0);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new NeedsRdmaDevice);
  return RUN_ALL_TESTS();
}
