#include "transport/datapath/net_addr.h"

#include <fmt/format.h>

namespace spray::dp {

std::string NetAddr::to_string() const {
  switch (family) {
    case Family::kIpv4:
      return fmt::format("{}.{}.{}.{}:{}", ip[0], ip[1], ip[2], ip[3], port);
    case Family::kIpv6: {
      std::string s = "[";
      for (size_t i = 0; i < 16; i += 2) {
        if (i) s += ':';
        s += fmt::format("{:x}", (unsigned{ip[i]} << 8) | ip[i + 1]);
      }
      return s + fmt::format("]:{}", port);
    }
    case Family::kSim:
      return fmt::format("sim:{}", sim_host_id());
    case Family::kVerbs: {
      std::string s = "gid:";
      for (size_t i = 0; i < 16; i += 2) {
        if (i) s += ':';
        s += fmt::format("{:04x}", (unsigned{ip[i]} << 8) | ip[i + 1]);
      }
      return s + fmt::format("/qpn:{}", qpn);
    }
    case Family::kNone:
      break;
  }
  return "none";
}

}  // namespace spray::dp
