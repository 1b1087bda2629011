// One non-blocking UDP socket bound to an address: for what needs nothing more (the
// fabric datapath and the spray-fabric daemon; the UDP datapath sets more options before
// it binds its own, and shares set_socket_buffers).
#pragma once

#include <cstdint>
#include <string>

#include "transport/datapath/net_addr.h"

namespace spray::dp {

struct BoundSocket {
  int fd = -1;    // owned by the caller; -1 on failure
  NetAddr local;  // as bound: the port the system picked when `at` asked for 0
};

// Sets a socket's receive and send buffers to `bytes` each: past net.core.{r,w}mem_max
// when the process may (CAP_NET_ADMIN: the FORCE options), else as far as that cap
// allows. Best effort: callers that care read back what was granted (the UDP datapath's
// socket_buffers(), which the provider warns about when it falls short).
void set_socket_buffers(int fd, uint32_t bytes);

// Opens a UDP socket of `at`'s family with receive and send buffers of `buffer_bytes`
// (past net.core.{r,w}mem_max with CAP_NET_ADMIN, else up to them) and binds it to `at`.
// On failure fd is -1 and `error` names the cause; `text` is the address as the user
// wrote it, for that message (a port in use, an address not of this host).
BoundSocket open_bound_udp_socket(const NetAddr& at, uint32_t buffer_bytes, const std::string& text,
                                  std::string& error);

}  // namespace spray::dp
