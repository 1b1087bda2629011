// One tagged 8-byte message from endpoint `from` to endpoint `to`, both opened with
// RdmEndpoint and progressed here: true once both completions came (within 10 s) and the
// value arrived intact. Providers that connect lazily (tcp) answer the first post with
// -FI_EAGAIN; it is posted again.
#pragma once

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "provider/client/rdm_endpoint.h"

namespace spray::fi_client {

inline void exchange_one_tagged(RdmEndpoint& from, RdmEndpoint& to) {
  std::string error;
  const fi_addr_t to_at_from = from.enter(to.name(), error);
  ASSERT_NE(to_at_from, FI_ADDR_NOTAVAIL) << error;
  const fi_addr_t from_at_to = to.enter(from.name(), error);
  ASSERT_NE(from_at_to, FI_ADDR_NOTAVAIL) << error;
  uint64_t sent = 0x0123456789abcdef, got = 0;
  ASSERT_EQ(fi_trecv(to.ep(), &got, sizeof got, nullptr, from_at_to, 7, 0, nullptr), 0);
  bool posted = false;
  int completions = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (completions < 2 && std::chrono::steady_clock::now() < end) {
    if (!posted) {
      const ssize_t rc = fi_tsend(from.ep(), &sent, sizeof sent, nullptr, to_at_from, 7, nullptr);
      ASSERT_TRUE(rc == 0 || rc == -FI_EAGAIN) << fi_strerror(static_cast<int>(-rc));
      posted = rc == 0;
    }
    fi_cq_tagged_entry e;
    for (RdmEndpoint* side : {&from, &to}) {
      const ssize_t n = fi_cq_read(side->cq(), &e, 1);
      ASSERT_TRUE(n == 1 || n == -FI_EAGAIN) << fi_strerror(static_cast<int>(-n));
      if (n == 1) ++completions;
    }
  }
  EXPECT_EQ(completions, 2);
  EXPECT_EQ(got, sent);
}

}  // namespace spray::fi_client
