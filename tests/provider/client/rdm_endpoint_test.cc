// RdmEndpoint, the libfabric opener the collectives, the NCCL plugin and spray-fi-rate
// share: two endpoints on one provider enter each other's names and a tagged message
// crosses; the CQ blocks only when asked to and able; a provider that is not there, and
// a name that is no address, are errors that say so.
#include "provider/client/rdm_endpoint.h"

#include <gtest/gtest.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <string>

#include "tests/provider/client/tagged_exchange.h"

namespace spray::fi_client {
namespace {

class OnProvider : public ::testing::TestWithParam<const char*> {};

TEST_P(OnProvider, two_endpoints_enter_each_other_and_a_tagged_message_crosses) {
  RdmEndpointSpec spec;
  spec.provider = GetParam();
  spec.cq_wait = FI_WAIT_UNSPEC;
  std::string error;
  auto a = RdmEndpoint::open(spec, error);
  ASSERT_TRUE(a) << error;
  auto b = RdmEndpoint::open(spec, error);
  ASSERT_TRUE(b) << error;
  ASSERT_FALSE(a->name().empty());
  EXPECT_NE(a->name(), b->name());
  exchange_one_tagged(*a, *b);
}

INSTANTIATE_TEST_SUITE_P(Providers, OnProvider, ::testing::Values("spray", "tcp"));

TEST(RdmEndpoint, the_cq_blocks_only_when_asked_to) {
  RdmEndpointSpec spec;
  spec.provider = "spray";
  std::string error;
  spec.cq_wait = FI_WAIT_NONE;
  auto polled = RdmEndpoint::open(spec, error);
  ASSERT_TRUE(polled) << error;
  EXPECT_FALSE(polled->cq_can_block());
  spec.cq_wait = FI_WAIT_UNSPEC;
  auto blocking = RdmEndpoint::open(spec, error);
  ASSERT_TRUE(blocking) << error;
  EXPECT_TRUE(blocking->cq_can_block());  // spray's CQs have a wait object
}

TEST(RdmEndpoint, a_provider_that_is_not_there_is_named_with_what_was_asked) {
  RdmEndpointSpec spec;
  spec.provider = "no-such-provider";
  spec.described = "tagged RDM endpoint with a wish";
  std::string error;
  EXPECT_FALSE(RdmEndpoint::open(spec, error));
  EXPECT_NE(error.find("provider 'no-such-provider' offers no tagged RDM endpoint with a wish"),
            std::string::npos)
      << error;
}

TEST(RdmEndpoint, a_name_that_is_no_address_is_refused_with_a_reason) {
  RdmEndpointSpec spec;
  spec.provider = "spray";
  std::string error;
  auto e = RdmEndpoint::open(spec, error);
  ASSERT_TRUE(e) << error;
  EXPECT_EQ(e->enter({1, 2, 3}, error), FI_ADDR_NOTAVAIL);
  EXPECT_NE(error.find("the provider refused the name (3 bytes)"), std::string::npos) << error;
}

}  // namespace
}  // namespace spray::fi_client
