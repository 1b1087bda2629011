#include "transport/engine/engine.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "nic_sim/cluster.h"

namespace spray {
namespace {

sim::FabricConfig two_hosts() {
  sim::FabricConfig f;
  f.hosts = 2;
  f.paths = 4;
  return f;
}

TEST(Engine, send__delivers_one_message_intact) {
  sim::Cluster c(two_hosts(), {});
  std::vector<uint8_t> src(100000), dst(100000, 0);
  std::iota(src.begin(), src.end(), 0);
  ASSERT_EQ(c.engine(1).post_recv({dst.data(), dst.size(), 7}), Status::kOk);
  ASSERT_EQ(c.engine(0).send(1, src.data(), 60000, 9), Status::kOk);
  ses::Completion tx{}, rx{};
  bool got_tx = false, got_rx = false;
  ASSERT_TRUE(c.run_until(
      [&] {
        got_tx = got_tx || c.engine(0).poll_completion(tx);
        got_rx = got_rx || c.engine(1).poll_completion(rx);
        return got_tx && got_rx;
      },
      Duration::milliseconds(100)));
  EXPECT_EQ(tx.status, Status::kOk);
  EXPECT_EQ(tx.context, 9u);
  EXPECT_EQ(rx.status, Status::kOk);
  EXPECT_EQ(rx.context, 7u);
  EXPECT_EQ(rx.length, 60000u);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + 60000, dst.begin()));
}

}  // namespace
}  // namespace spray
