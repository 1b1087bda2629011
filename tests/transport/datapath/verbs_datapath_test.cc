// The libibverbs datapath. Where no RDMA device exists (these CI machines), the
// end-to-end tests skip and say why; the discovery error path is tested everywhere.
#include "transport/datapath/verbs/verbs_datapath.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/support/real_time_transfer.h"
#include "transport/datapath/clock.h"
#include "transport/engine/engine.h"

namespace spray::dp {
namespace {

TEST(VerbsDatapath, open__without_a_device_explains_why) {
  if (!VerbsDatapath::devices().empty()) GTEST_SKIP() << "an RDMA device exists here";
  std::string error;
  EXPECT_FALSE(VerbsDatapath::open(VerbsConfig{}, error));
  EXPECT_NE(error.find("no RDMA device found"), std::string::npos) << error;
}

TEST(VerbsDatapath, open__names_an_unknown_device) {
  if (VerbsDatapath::devices().empty()) GTEST_SKIP() << "no RDMA device on this machine";
  VerbsConfig c;
  c.device = "no-such-rdma-device";
  std::string error;
  EXPECT_FALSE(VerbsDatapath::open(c, error));
  EXPECT_NE(error.find("not found"), std::string::npos) << error;
}

TEST(VerbsDatapath, open__rejects_bad_configuration) {
  VerbsConfig c;
  c.entropy_classes = 0;
  std::string error;
  EXPECT_FALSE(VerbsDatapath::open(c, error));
  EXPECT_NE(error.find("entropy_classes"), std::string::npos) << error;
}

TEST(VerbsEngine, transfer__between_two_queue_pairs) {
  std::string error;
  auto da = VerbsDatapath::open(VerbsConfig{}, error);
  if (!da) GTEST_SKIP() << "verbs end-to-end test skipped: " << error;
  auto db = VerbsDatapath::open(VerbsConfig{}, error);
  ASSERT_TRUE(db) << error;
  test::transfer_in_real_time(*da, *db, {0, 1 << 20}, {}, Duration::seconds(10));
}

}  // namespace
}  // namespace spray::dp
