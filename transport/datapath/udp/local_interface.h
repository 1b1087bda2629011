// This host's network interfaces as the UDP datapath's configuration needs them: the
// largest UDP payload an address's interface carries unfragmented (what mtu_bytes should
// be when the user does not choose), and the address to bind when the user names an
// interface instead of an address (FI_SPRAY_IFACE).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/datapath/net_addr.h"

namespace spray::dp {

// Payload bytes per datagram for `address` (an IPv4 or IPv6 literal of a local
// interface): min(interface MTU, 9000) - IP header - 8. The cap is a jumbo frame:
// loopback's 64 KiB MTU would allow more, but no data-centre link does, and larger
// packets would only flatter loopback. An address that is not a loopback address but
// sits on the loopback device (a routed host's own address, reached over ECMP routes
// through its links) takes the smallest MTU of the host's other interfaces that are up
// and hold an address of its family, the links its packets leave by. 0 and `error` set
// when the address is not local or the MTU cannot be read.
uint32_t udp_payload_mtu(const std::string& address, std::string& error);

// The address an endpoint on interface `name` binds: its first IPv4 address, else its
// first IPv6 address that is not link-local (a link-local one cannot be named without a
// scope, which NetAddr does not carry). Empty and `error` set (naming the interface and
// what it lacks) when there is no such interface or it has no usable address.
std::string interface_address(const std::string& name, std::string& error);

// Every IPv4 and IPv6 address of this host's interfaces (port 0), loopback included;
// empty when they cannot be read.
std::vector<NetAddr> local_addresses();

}  // namespace spray::dp
