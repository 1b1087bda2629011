// The largest UDP payload a local address's network interface carries unfragmented: the
// interface MTU less the IP and UDP headers, capped at a jumbo frame. What the UDP
// datapath's mtu_bytes should be when the user does not choose.
#pragma once

#include <cstdint>
#include <string>

namespace spray::dp {

// Payload bytes per datagram for `address` (an IPv4 or IPv6 literal of a local
// interface): min(interface MTU, 9000) - IP header - 8. The cap is a jumbo frame:
// loopback's 64 KiB MTU would allow more, but no data-centre link does, and larger
// packets would only flatter loopback. 0 and `error` set when the address is not local
// or the MTU cannot be read.
uint32_t udp_payload_mtu(const std::string& address, std::string& error);

}  // namespace spray::dp
