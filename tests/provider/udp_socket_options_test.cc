// FI_SPRAY_IFACE and FI_SPRAY_SOCKET_BUFFER seen from an application: libfabric loads
// the provider with them set (ctest sets them per test, see tests/CMakeLists.txt), and
// the test looks at the provider's UDP sockets among its own process's descriptors.
//
//   bound_sockets_*: FI_SPRAY_IFACE=lo and FI_SPRAY_SOCKET_BUFFER set, FI_SPRAY_ADDRESS
//     not: every socket of an endpoint is bound to device lo, at lo's address, with the
//     buffers asked for, and a message crosses.
//   unknown_iface_*: FI_SPRAY_IFACE names no interface: fi_getinfo offers nothing and the
//     warning names the interface.
#include <dirent.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "provider/client/rdm_endpoint.h"
#include "tests/provider/client/tagged_exchange.h"

namespace spray::fi_client {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// What one of this process's UDP sockets is bound to, as the kernel says.
struct BoundSocket {
  sockaddr_in address{};
  std::string device;      // SO_BINDTODEVICE; empty when none
  uint32_t receive_bytes;  // SO_RCVBUF, halved back to what was asked (the kernel doubles)
  uint32_t send_bytes;     // SO_SNDBUF, likewise
};

// This process's IPv4 UDP sockets (every open descriptor that is one).
std::vector<BoundSocket> udp_sockets() {
  std::vector<BoundSocket> found;
  DIR* fds = ::opendir("/proc/self/fd");
  if (!fds) return found;
  while (const dirent* e = ::readdir(fds)) {
    const int fd = std::atoi(e->d_name);
    int type = 0;
    socklen_t len = sizeof(type);
    if (fd <= 2 || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
    BoundSocket s;
    len = sizeof(s.address);
    if (type != SOCK_DGRAM ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&s.address), &len) != 0 ||
        s.address.sin_family != AF_INET) {
      continue;
    }
    char device[IFNAMSIZ] = {};
    len = sizeof(device);
    if (::getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, device, &len) == 0) s.device = device;
    int bytes = 0;
    len = sizeof(bytes);
    ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, &len);
    s.receive_bytes = static_cast<uint32_t>(bytes) / 2;
    ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len);
    s.send_bytes = static_cast<uint32_t>(bytes) / 2;
    found.push_back(s);
  }
  ::closedir(fds);
  return found;
}

uint32_t proc_value(const char* path) {
  std::ifstream f(path);
  uint32_t v = 0;
  f >> v;
  return v;
}

RdmEndpointSpec spray_over_udp() {
  RdmEndpointSpec spec;
  spec.provider = "spray";
  return spec;
}

TEST(UdpSocketOptions, bound_sockets__are_on_the_interface_at_its_address_with_the_buffer_asked) {
  if (env("FI_SPRAY_IFACE") != "lo" || env("FI_SPRAY_SOCKET_BUFFER").empty() ||
      env("FI_SPRAY_ENTROPY_PORTS").empty() || env("FI_SPRAY_DATAPATH") != "udp" ||
      !env("FI_SPRAY_ADDRESS").empty()) {
    GTEST_SKIP() << "run by ctest with FI_SPRAY_DATAPATH=udp FI_SPRAY_IFACE=lo "
                    "FI_SPRAY_SOCKET_BUFFER=<bytes> FI_SPRAY_ENTROPY_PORTS=<n> and no "
                    "FI_SPRAY_ADDRESS";
  }
  const auto asked = static_cast<uint32_t>(std::stoul(env("FI_SPRAY_SOCKET_BUFFER")));
  const uint32_t ports = static_cast<uint32_t>(std::stoul(env("FI_SPRAY_ENTROPY_PORTS")));
  std::string error;
  auto a = RdmEndpoint::open(spray_over_udp(), error);
  ASSERT_TRUE(a) << error;
  auto b = RdmEndpoint::open(spray_over_udp(), error);
  ASSERT_TRUE(b) << error;

  // The endpoint's name is its address (lo's, taken from the interface) and base port.
  const std::vector<uint8_t> name = a->name();
  ASSERT_EQ(name.size(), sizeof(sockaddr_in));
  sockaddr_in named{};
  std::memcpy(&named, name.data(), sizeof(named));
  EXPECT_EQ(ntohl(named.sin_addr.s_addr), INADDR_LOOPBACK);
  const uint16_t base = ntohs(named.sin_port);

  const bool may_exceed_cap = ::geteuid() == 0;  // CAP_NET_ADMIN: SO_RCVBUFFORCE
  const uint32_t receive_want =
      may_exceed_cap ? asked : std::min(asked, proc_value("/proc/sys/net/core/rmem_max"));
  const uint32_t send_want =
      may_exceed_cap ? asked : std::min(asked, proc_value("/proc/sys/net/core/wmem_max"));
  uint32_t seen = 0;
  for (const BoundSocket& s : udp_sockets()) {
    const uint16_t port = ntohs(s.address.sin_port);
    if (s.address.sin_addr.s_addr != named.sin_addr.s_addr || port < base || port >= base + ports) {
      continue;
    }
    ++seen;
    EXPECT_EQ(s.device, "lo") << "port " << port;
    EXPECT_EQ(s.receive_bytes, receive_want) << "port " << port;
    EXPECT_EQ(s.send_bytes, send_want) << "port " << port;
  }
  EXPECT_EQ(seen, ports) << "one socket per entropy port";
  exchange_one_tagged(*a, *b);
}

TEST(UdpSocketOptions, unknown_iface__offers_no_endpoints_and_the_warning_names_it) {
  const std::string iface = env("FI_SPRAY_IFACE");
  if (iface.empty() || ::if_nametoindex(iface.c_str()) != 0 || env("FI_LOG_LEVEL") != "warn") {
    GTEST_SKIP() << "run by ctest with FI_SPRAY_IFACE=<no such interface> FI_LOG_LEVEL=warn";
  }
  fi_info* hints = fi_allocinfo();
  ASSERT_NE(hints, nullptr);
  hints->fabric_attr->prov_name = strdup("spray");
  fi_info* info = nullptr;
  ::testing::internal::CaptureStderr();
  const int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  const std::string log = ::testing::internal::GetCapturedStderr();
  fi_freeinfo(hints);
  fi_freeinfo(info);
  EXPECT_EQ(rc, -FI_ENODATA);
  EXPECT_NE(log.find("FI_SPRAY_IFACE=" + iface + ": no network interface is named '" + iface),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace spray::fi_client
