// The control messages the kernel hands up beside a received UDP message: the GRO
// segment size (UDP_GRO) and the IP header's ECN field (IP_RECVTOS / IPV6_RECVTCLASS).
#pragma once

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "transport/datapath/ecn.h"

namespace spray::dp {

// Room for both control messages (each carries at most an int).
struct alignas(cmsghdr) ReceiveControl {
  std::array<uint8_t, 2 * CMSG_SPACE(sizeof(int))> bytes;  // the kernel writes it; not zeroed
};

struct ReceivedMessage {
  uint32_t segment = 0;  // bytes per datagram; the message's length without GRO
  bool ecn_ce = false;   // every datagram in it was marked CE (GRO merges only equal TOS)
};

// Reads the control messages of a message of `bytes` bytes that recvmmsg filled in.
inline ReceivedMessage read_receive_control(msghdr& h, uint32_t bytes) {
  ReceivedMessage m{bytes, false};
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof(size));
      if (size > 0) m.segment = static_cast<uint32_t>(size);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      uint8_t tos = 0;  // one byte for IPv4
      std::memcpy(&tos, CMSG_DATA(c), sizeof(tos));
      m.ecn_ce = ecn::congestion_experienced(tos);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      int tclass = 0;  // an int for IPv6
      std::memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
      m.ecn_ce = ecn::congestion_experienced(static_cast<uint32_t>(tclass));
    }
  }
  return m;
}

}  // namespace spray::dp
