// Endpoint names: socket addresses over the IP datapaths, FI_ADDR_IB_UD names over verbs.
// The verbs half is what an RDMA-less machine can check of the verbs provider path: names
// round-trip, malformed ones are refused, and they print readably.
#include "provider/endpoint_name.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>

#include <cstring>

namespace spray::fi {
namespace {

dp::NetAddr verbs_address(uint32_t qpn) {
  dp::NetAddr a;
  a.family = dp::NetAddr::Family::kVerbs;
  a.qpn = qpn;
  inet_pton(AF_INET6, "fe80::1:2:3:4", a.ip.data());
  return a;
}

TEST(EndpointName, formats_follow_the_datapath) {
  EXPECT_EQ(address_format_of("verbs"), static_cast<uint32_t>(FI_ADDR_IB_UD));
  for (const char* dp : {"auto", "udp", "shm", "dpdk"}) {
    EXPECT_EQ(address_format_of(dp), static_cast<uint32_t>(FI_SOCKADDR_IN)) << dp;
  }
  EXPECT_TRUE(is_socket_format(FI_SOCKADDR_IN6));
  EXPECT_FALSE(is_socket_format(FI_ADDR_IB_UD));
}

TEST(EndpointName, ib_ud__round_trips_gid_and_qp_number) {
  const dp::NetAddr a = verbs_address(0x1234);
  IbUdName name{};
  ASSERT_EQ(encode_name(a, &name, sizeof(name)), sizeof(IbUdName));
  EXPECT_EQ(name.qpn, 0x1234u);
  EXPECT_EQ(name.pkey, 0xffff);
  EXPECT_EQ(name_length(FI_ADDR_IB_UD, &name), sizeof(IbUdName));
  dp::NetAddr back;
  ASSERT_TRUE(decode_name(FI_ADDR_IB_UD, &name, back));
  EXPECT_EQ(back, a);
  EXPECT_EQ(name_to_string(FI_ADDR_IB_UD, &name), "spray://ib-ud/fe80::1:2:3:4/qpn=4660");
}

TEST(EndpointName, ib_ud__a_name_without_a_valid_qp_number_is_refused) {
  IbUdName name{};
  encode_name(verbs_address(7), &name, sizeof(name));
  dp::NetAddr out;
  name.qpn = 0;  // QP0 (SMI) carries no datagrams of ours
  EXPECT_FALSE(decode_name(FI_ADDR_IB_UD, &name, out));
  name.qpn = 1u << 24;  // QP numbers are 24 bits
  EXPECT_FALSE(decode_name(FI_ADDR_IB_UD, &name, out));
  EXPECT_EQ(name_to_string(FI_ADDR_IB_UD, &name), "spray://?");
}

TEST(EndpointName, encode__reports_the_size_needed_and_writes_nothing_into_too_little) {
  uint8_t small[8];
  std::memset(small, 0xab, sizeof(small));
  EXPECT_EQ(encode_name(verbs_address(9), small, sizeof(small)), sizeof(IbUdName));
  dp::NetAddr v4;
  v4.family = dp::NetAddr::Family::kIpv4;
  v4.port = 4800;
  EXPECT_EQ(encode_name(v4, small, sizeof(small)), sizeof(sockaddr_in));
  for (uint8_t b : small) EXPECT_EQ(b, 0xab);
}

TEST(EndpointName, sockaddr__both_families_round_trip_and_others_are_refused) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(4800);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  dp::NetAddr a;
  ASSERT_TRUE(decode_name(FI_SOCKADDR_IN, &in, a));
  EXPECT_EQ(a.family, dp::NetAddr::Family::kIpv4);
  EXPECT_EQ(a.port, 4800);
  EXPECT_EQ(name_to_string(FI_SOCKADDR_IN, &in), "spray://127.0.0.1:4800");
  sockaddr_in back{};
  ASSERT_EQ(encode_name(a, &back, sizeof(back)), sizeof(sockaddr_in));
  EXPECT_EQ(std::memcmp(&back, &in, sizeof(in)), 0);

  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(4801);
  in6.sin6_addr = in6addr_loopback;
  EXPECT_EQ(name_length(FI_SOCKADDR_IN, &in6), sizeof(sockaddr_in6));  // either family
  ASSERT_TRUE(decode_name(FI_SOCKADDR_IN, &in6, a));
  EXPECT_EQ(a.family, dp::NetAddr::Family::kIpv6);
  EXPECT_EQ(name_to_string(FI_SOCKADDR_IN6, &in6), "spray://[::1]:4801");

  sockaddr_in unix_family{};
  unix_family.sin_family = AF_UNIX;
  EXPECT_EQ(name_length(FI_SOCKADDR_IN, &unix_family), 0u);
  EXPECT_FALSE(decode_name(FI_SOCKADDR_IN, &unix_family, a));
  EXPECT_EQ(name_length(FI_ADDR_PSMX2, &in), 0u);  // a format we never write
}

}  // namespace
}  // namespace spray::fi
