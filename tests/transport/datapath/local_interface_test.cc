// Local interfaces: the MTU of a local address (less headers, jumbo-capped) and the
// address of a named interface.
#include "transport/datapath/udp/local_interface.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace spray::dp {
namespace {

int loopback_mtu() {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ifreq req{};
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  const int rc = ioctl(fd, SIOCGIFMTU, &req);
  close(fd);
  return rc == 0 ? req.ifr_mtu : -1;
}

TEST(InterfaceMtu, loopback__is_its_mtu_less_headers_capped_at_a_jumbo_frame) {
  const int mtu = loopback_mtu();
  ASSERT_GT(mtu, 0);
  std::string error;
  const uint32_t expect = static_cast<uint32_t>(std::min(mtu, 9000)) - 28;
  EXPECT_EQ(udp_payload_mtu("127.0.0.1", error), expect) << error;
}

TEST(InterfaceMtu, address_no_interface_holds__is_zero_with_a_reason) {
  std::string error;
  EXPECT_EQ(udp_payload_mtu("192.0.2.77", error), 0u);  // TEST-NET-1: never local here
  EXPECT_NE(error.find("192.0.2.77"), std::string::npos);
  error.clear();
  EXPECT_EQ(udp_payload_mtu("not an address", error), 0u);
  EXPECT_FALSE(error.empty());
}

TEST(InterfaceAddress, loopback__is_its_ipv4_address) {
  std::string error;
  EXPECT_EQ(interface_address("lo", error), "127.0.0.1") << error;
}

TEST(InterfaceAddress, unknown_interface__is_empty_with_a_reason_that_names_it) {
  std::string error;
  EXPECT_EQ(interface_address("no-such-if0", error), "");
  EXPECT_NE(error.find("no-such-if0"), std::string::npos) << error;
}

}  // namespace
}  // namespace spray::dp
