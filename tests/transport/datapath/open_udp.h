// Opening a UdpDatapath in a test: a failure is a test failure that shows the datapath's
// own explanation.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {

inline std::unique_ptr<UdpDatapath> open_ok(const UdpConfig& c) {
  std::string error;
  auto d = UdpDatapath::open(c, error);
  EXPECT_TRUE(d) << error;
  return d;
}

}  // namespace spray::dp
