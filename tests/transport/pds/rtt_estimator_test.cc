// RttEstimator: RFC 6298 smoothing and the clamped retransmission timeout.
#include "transport/pds/rtt_estimator.h"

#include <gtest/gtest.h>

namespace spray::pds {
namespace {

constexpr Duration us(int64_t v) {
  return Duration::microseconds(v);
}

TEST(RttEstimator, rto__is_the_initial_value_until_a_sample) {
  RttEstimator e;
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.rto(us(200), us(100), us(20'000)), us(200));
  EXPECT_EQ(e.rto(us(50), us(100), us(20'000)), us(100));  // still within the bounds
}

TEST(RttEstimator, first_sample__sets_srtt_and_half_of_it_as_variance) {
  RttEstimator e;
  e.on_sample(us(40));
  EXPECT_EQ(e.srtt(), us(40));
  EXPECT_EQ(e.rto(us(200), us(1), us(20'000)), us(40 + 4 * 20));
}

TEST(RttEstimator, steady_samples__converge_to_the_rtt_with_shrinking_variance) {
  RttEstimator e;
  e.on_sample(us(1000));
  for (int i = 0; i < 200; ++i) e.on_sample(us(100));
  EXPECT_LT(e.srtt(), us(101));
  EXPECT_LT(e.rto(us(200), us(1), us(20'000)), us(110));
}

TEST(RttEstimator, rising_rtt__raises_the_rto_above_the_samples) {
  RttEstimator e;
  for (int i = 0; i < 50; ++i) e.on_sample(us(100));
  e.on_sample(us(5000));  // a queue built up
  EXPECT_GT(e.rto(us(200), us(1), us(1'000'000)), us(5000));
}

TEST(RttEstimator, rto__is_clamped_to_the_bounds) {
  RttEstimator e;
  e.on_sample(us(1));
  EXPECT_EQ(e.rto(us(200), us(100), us(20'000)), us(100));
  e.on_sample(us(900'000));
  EXPECT_EQ(e.rto(us(200), us(100), us(20'000)), us(20'000));
}

}  // namespace
}  // namespace spray::pds
