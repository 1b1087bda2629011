// Endpoint names: how the provider writes a transport address (dp::NetAddr) for the
// application — fi_getname, fi_av_insert, fi_av_lookup, fi_av_straddr, fi_info's
// src_addr and dest_addr — in the address format of the datapath in use:
//
//   FI_SOCKADDR_IN / FI_SOCKADDR_IN6 (udp, auto, shm, dpdk): the endpoint's address and
//     base UDP port as a sockaddr_in / sockaddr_in6; either family is accepted.
//   FI_ADDR_IB_UD (verbs): 32 bytes laid out like the names of libfabric's own verbs
//     provider for UD endpoints (GID, QP number, LID, P_Key, service), so tools that
//     print such names read ours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/datapath/net_addr.h"

namespace spray::fi {

struct IbUdName {
  uint8_t gid[16];
  uint32_t qpn;  // host byte order, as libfabric's verbs provider keeps it
  uint16_t lid;  // 0: RoCE routes by GID
  uint16_t pkey;
  uint16_t service;
  uint8_t reserved[6];
};
static_assert(sizeof(IbUdName) == 32, "FI_ADDR_IB_UD names are uint64_t[4]");

// The address format (FI_SOCKADDR_IN, FI_ADDR_IB_UD, ...) of names on a datapath.
uint32_t address_format_of(const std::string& datapath);

// True for the formats whose names are socket addresses.
bool is_socket_format(uint32_t format);

// Bytes of the name at `name` in `format`; 0 when it is not a name of that format
// (a socket address of a family other than AF_INET / AF_INET6).
size_t name_length(uint32_t format, const void* name);
// Bytes a name of `format` usually takes, for stepping over one that is not valid:
// sockaddr_in6 for FI_SOCKADDR_IN6, sockaddr_in for the other socket formats.
size_t usual_name_length(uint32_t format);

// The transport address a name stands for; false when the name is not one (unknown
// family, a verbs name with no QP number).
bool decode_name(uint32_t format, const void* name, dp::NetAddr& out);

// Writes the name of `a` into `out` when `room` suffices; returns the bytes it needs.
size_t encode_name(const dp::NetAddr& a, void* out, size_t room);

// "spray://127.0.0.1:4800", "spray://[::1]:4800", "spray://ib-ud/<gid>/qpn=17".
std::string name_to_string(uint32_t format, const void* name);

}  // namespace spray::fi
