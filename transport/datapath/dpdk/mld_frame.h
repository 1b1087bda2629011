// Multicast Listener Discovery (MLDv1, RFC 2710; MLDv2, RFC 3810) for a DPDK IPv6
// endpoint: the reports that tell snooping switches and routers that it listens on its
// solicited-node group, and the queries that ask for them again.
//
// Why an endpoint needs them: neighbour solicitations for its address go to that group,
// and a switch that snoops MLD forwards a group's frames only to ports that reported it.
// Without reports, a peer that sends first never resolves the endpoint.
//
// Pure functions on bytes, as in ethernet_frame.h.
#pragma once

#include <cstdint>

#include "transport/datapath/dpdk/ethernet_frame.h"

namespace spray::dp {

// A report's multicast address record type (RFC 3810, 5.2.12); we list no sources.
enum class MldRecord : uint8_t {
  kModeIsExclude = 2,    // we listen: the answer to a query
  kChangeToInclude = 3,  // we leave
  kChangeToExclude = 4,  // we join
};

// An MLDv2 report: Ethernet, IPv6, 8 bytes of hop-by-hop options, 8 of ICMPv6 header and
// one 20-byte record.
inline constexpr uint32_t kMldv2ReportFrameBytes = kEthernetHeaderBytes + kIpv6HeaderBytes + 36;
// An MLDv1 report or done: Ethernet, IPv6, hop-by-hop options, 24 bytes of ICMPv6.
inline constexpr uint32_t kMldv1FrameBytes = kEthernetHeaderBytes + kIpv6HeaderBytes + 32;

// The link-local address that RFC 4291's modified EUI-64 forms from `mac`. Reports come
// from it, since RFC 3810 wants a link-local source; the endpoint uses it for nothing else
// (it neither defends nor answers for it).
IpBytes link_local_address(const MacAddress& mac);

// An MLDv2 report of one record for `group`, to ff02::16 (all MLDv2 routers) with hop
// limit 1 and a router alert, as RFC 3810 requires.
void write_mldv2_report(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group,
                        MldRecord record);
// An MLDv1 report for `group`, sent to the group itself: the answer to an MLDv1 query
// (RFC 3810, 8.2: a host answers an older querier in its version).
void write_mldv1_report(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group);
// An MLDv1 done for `group`, to ff02::2 (all routers): the leave an MLDv1 querier knows.
void write_mldv1_done(uint8_t* frame, const MacAddress& our_mac, const IpBytes& group);

struct MldQuery {
  uint8_t version = 0;           // 1 (RFC 2710: 24 bytes) or 2 (RFC 3810: 28 or more)
  IpBytes group{};               // all zero: a general query
  uint32_t max_response_ms = 0;  // answer at a random time within this many milliseconds
};
// False unless the frame is an MLD query that RFC 3810 lets a host take: a link-local
// source, hop limit 1, a hop-by-hop options header holding a router alert, the ICMPv6
// checksum right, code 0, and 24 bytes (MLDv1) or at least 28 (MLDv2).
bool parse_mld_query(const uint8_t* frame, uint32_t length, MldQuery& out);

}  // namespace spray::dp
