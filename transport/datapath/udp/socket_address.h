// Conversions between NetAddr and the kernel's socket addresses, and text parsing.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <optional>
#include <string>

#include "transport/datapath/net_addr.h"

namespace spray::dp {

// "10.0.0.1", "::1" (no port): nullopt when it is neither an IPv4 nor an IPv6 literal.
std::optional<NetAddr> parse_ip(const std::string& text, uint16_t port = 0);
// "10.0.0.1:4793", "[::1]:4793".
std::optional<NetAddr> parse_ip_port(const std::string& text);
// The address alone, as parse_ip accepts it: "10.0.0.1", "::1".
std::string ip_to_string(const NetAddr& a);

socklen_t to_sockaddr(const NetAddr& a, sockaddr_storage& out);

// Why bind() to `addr` failed with `err`, for the user: a port in use, an address that
// is not this host's (`text` is the address as they gave it), or the system's words.
std::string explain_bind_error(int err, const NetAddr& addr, const std::string& text);
NetAddr from_sockaddr(const sockaddr_storage& in);

}  // namespace spray::dp
