// The UDP_SEGMENT control message that turns one sendmsg into a GSO super-datagram: the
// kernel (or the NIC) cuts the payload into datagrams of `segment` bytes, the last one
// possibly shorter.
#pragma once

#include <netinet/udp.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace spray::dp {

// Room for one UDP_SEGMENT control message.
struct alignas(cmsghdr) GsoControl {
  std::array<uint8_t, CMSG_SPACE(sizeof(uint16_t))> bytes{};
};

// Points `h`'s control data at `space` and writes the segment size there. `space` must
// outlive the send; it is zeroed first because the kernel reads the padding too.
inline void set_gso_segment(msghdr& h, GsoControl& space, uint16_t segment) {
  space = {};
  h.msg_control = space.bytes.data();
  h.msg_controllen = space.bytes.size();
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(segment));
  std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
}

}  // namespace spray::dp
