// ECN over the kernel UDP datapath on loopback: what leaves is marked ECT(0), and a CE
// mark that a switch set on the way (here: a plain socket that sends with CE) is reported
// on every datagram it covers, with GRO and without, over IPv4 and IPv6.
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "tests/support/packet_burst.h"
#include "tests/transport/datapath/open_udp.h"
#include "transport/datapath/ecn.h"
#include "transport/datapath/udp/receive_control.h"
#include "transport/datapath/udp/socket_address.h"
#include "transport/datapath/udp/udp_datapath.h"

namespace spray::dp {
namespace {

// A plain UDP socket bound to an ephemeral port of `address`: stands in for a switch
// that marks (it sends with any ECN field) and for a receiver that reads the field.
class PlainSocket {
 public:
  explicit PlainSocket(const std::string& address) {
    NetAddr a = *parse_ip(address);
    v6_ = a.family == NetAddr::Family::kIpv6;
    fd_ = ::socket(v6_ ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    sockaddr_storage sa;
    const socklen_t len = to_sockaddr(a, sa);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), len), 0);
    sockaddr_storage bound{};
    socklen_t bound_len = sizeof(bound);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len);
    address_ = from_sockaddr(bound);
    const int on = 1;
    EXPECT_EQ(::setsockopt(fd_, v6_ ? IPPROTO_IPV6 : IPPROTO_IP, v6_ ? IPV6_RECVTCLASS : IP_RECVTOS,
                           &on, sizeof(on)),
              0);
    timeval second{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof(second));
  }
  ~PlainSocket() { ::close(fd_); }
  PlainSocket(const PlainSocket&) = delete;
  PlainSocket& operator=(const PlainSocket&) = delete;

  NetAddr address() const { return address_; }

  // Sends `segments` datagrams of `bytes` bytes to `to` with ECN field `field`; more than
  // one go as a single GSO super-datagram, as a burst from a real sender would.
  void send(const NetAddr& to, int field, size_t segments, uint16_t bytes) {
    ASSERT_EQ(::setsockopt(fd_, v6_ ? IPPROTO_IPV6 : IPPROTO_IP, v6_ ? IPV6_TCLASS : IP_TOS, &field,
                           sizeof(field)),
              0);
    std::vector<uint8_t> data(segments * bytes, 0x5a);
    sockaddr_storage sa;
    const socklen_t len = to_sockaddr(to, sa);
    iovec iov{data.data(), data.size()};
    msghdr h{};
    h.msg_name = &sa;
    h.msg_namelen = len;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) std::array<uint8_t, CMSG_SPACE(sizeof(uint16_t))> control{};
    if (segments > 1) {
      h.msg_control = control.data();
      h.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(bytes));
      std::memcpy(CMSG_DATA(c), &bytes, sizeof(bytes));
    }
    ASSERT_EQ(::sendmsg(fd_, &h, 0), static_cast<ssize_t>(data.size())) << std::strerror(errno);
  }

  // Receives one datagram and returns the ECN field it arrived with, or -1.
  int receive_ecn_field() {
    std::array<uint8_t, 2048> data;
    iovec iov{data.data(), data.size()};
    ReceiveControl control;
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control.bytes.data();
    h.msg_controllen = control.bytes.size();
    if (::recvmsg(fd_, &h, 0) < 0) return -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) return *CMSG_DATA(c) & ecn::kMask;
      if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
        int tclass = 0;
        std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
        return tclass & ecn::kMask;
      }
    }
    return -1;
  }

 private:
  int fd_ = -1;
  bool v6_ = false;
  NetAddr address_;
};

// Sends `n` packets of 100 bytes from `d` to `to`, one per entropy value.
void send_from(UdpDatapath& d, const NetAddr& to, size_t n) {
  std::vector<PacketBuf*> out(n);
  ASSERT_TRUE(test::make_burst(d, std::span(out), to, 100));
  d.tx_burst(out.data(), n);
}

// Receives until `want` packets are in (or a second passes); returns their flags in order.
std::vector<uint8_t> receive_flags(UdpDatapath& d, size_t want) {
  std::vector<uint8_t> flags;
  std::array<PacketBuf*, 64> in{};
  for (int tries = 0; tries < 100 && flags.size() < want; ++tries) {
    const size_t n = d.rx_burst(in.data(), in.size());
    for (size_t i = 0; i < n; ++i) flags.push_back(in[i]->flags);
    d.free(in.data(), n);
    if (n == 0) d.wait(Duration::milliseconds(10));
  }
  return flags;
}

class UdpEcn : public testing::TestWithParam<std::string> {};

TEST_P(UdpEcn, send__marks_every_datagram_ect0) {
  UdpConfig c;
  c.address = GetParam();
  auto d = open_ok(c);
  ASSERT_TRUE(d);
  PlainSocket receiver(GetParam());
  send_from(*d, receiver.address(), 8);  // from all eight source ports
  for (int i = 0; i < 8; ++i) EXPECT_EQ(receiver.receive_ecn_field(), ecn::kEct0) << i;
}

TEST_P(UdpEcn, send__without_ecn_marks_nothing) {
  UdpConfig c;
  c.address = GetParam();
  c.ecn = false;
  auto d = open_ok(c);
  ASSERT_TRUE(d);
  PlainSocket receiver(GetParam());
  send_from(*d, receiver.address(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(receiver.receive_ecn_field(), 0) << i;
}

// A GSO burst of 5 marked CE, then 3 unmarked (ECT(0)), then 1 marked: the marks land on
// exactly the datagrams that carried them, whether GRO hands them up as runs or not.
void expect_marks_reported(const std::string& address, bool gro) {
  UdpConfig c;
  c.address = address;
  c.gro = gro;
  auto d = open_ok(c);
  ASSERT_TRUE(d);
  PlainSocket marker(address);
  marker.send(d->local_address(), ecn::kCe, 5, 1000);
  marker.send(d->local_address(), ecn::kEct0, 3, 1000);
  marker.send(d->local_address(), ecn::kCe, 1, 1000);
  const std::vector<uint8_t> flags = receive_flags(*d, 9);
  ASSERT_EQ(flags.size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    const bool marked = i < 5 || i == 8;
    EXPECT_EQ((flags[i] & PacketBuf::kEcnCe) != 0, marked) << "datagram " << i;
  }
  EXPECT_EQ(d->stats().rx_ecn_ce, 6u);
  if (gro) {
    EXPECT_GE(d->stats().rx_gro_messages, 1u);  // the runs really came up merged
  }
}

TEST_P(UdpEcn, receive__reports_ce_on_each_marked_datagram_of_a_gro_run) {
  expect_marks_reported(GetParam(), true);
}

TEST_P(UdpEcn, receive__reports_ce_on_each_marked_datagram_without_gro) {
  expect_marks_reported(GetParam(), false);
}

INSTANTIATE_TEST_SUITE_P(Loopback, UdpEcn, testing::Values("127.0.0.1", "::1"),
                         [](const auto& param) { return param.param == "::1" ? "ipv6" : "ipv4"; });

}  // namespace
}  // namespace spray::dp
