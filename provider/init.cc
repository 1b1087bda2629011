// Provider entry: fi_prov_ini (what libfabric looks up in libspray-fi.so), the runtime
// parameters, and helpers every object shares.
#include <cstring>

#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

void cleanup() {}

Params load_params() {
  Params p;
  fi_param_define(&provider, "datapath", FI_PARAM_STRING,
                  "Datapath under the transport: udp (kernel UDP sockets). Default: udp");
  fi_param_define(&provider, "address", FI_PARAM_STRING,
                  "Local IPv4/IPv6 address endpoints bind when the application names none "
                  "(fi_getinfo node with FI_SOURCE). Default: 127.0.0.1");
  fi_param_define(&provider, "entropy_ports", FI_PARAM_INT,
                  "UDP source ports per endpoint (entropy values for ECMP spraying); a "
                  "power of two <= 64, the same on every endpoint of a job. Default: 8");
  fi_param_define(&provider, "mtu", FI_PARAM_INT,
                  "UET bytes per datagram. Default: 1472 (a 1500-byte Ethernet MTU)");
  fi_param_define(&provider, "congestion", FI_PARAM_STRING,
                  "Congestion control: nscc or fixed. Default: nscc");
  fi_param_define(&provider, "path_selection", FI_PARAM_STRING,
                  "Path (entropy) selection: reps, oblivious or ecmp. Default: reps");
  fi_param_define(&provider, "rto_min_us", FI_PARAM_INT,
                  "Lowest retransmission timeout, microseconds. Default: 1000");
  fi_param_define(&provider, "rto_max_ms", FI_PARAM_INT,
                  "Highest retransmission timeout after backoff, milliseconds. Default: 100");
  fi_param_define(&provider, "retries", FI_PARAM_INT,
                  "Retransmissions of one packet before the peer is declared unreachable "
                  "and its operations complete in error. Default: 12");
  fi_param_define(&provider, "inject_size", FI_PARAM_INT,
                  "Largest fi_inject / FI_INJECT payload, bytes. Default: 1024");
  char* s = nullptr;
  if (fi_param_get_str(&provider, "datapath", &s) == FI_SUCCESS && s) p.datapath = s;
  if (fi_param_get_str(&provider, "address", &s) == FI_SUCCESS && s) p.address = s;
  if (fi_param_get_str(&provider, "congestion", &s) == FI_SUCCESS && s) p.congestion = s;
  if (fi_param_get_str(&provider, "path_selection", &s) == FI_SUCCESS && s) p.path_selection = s;
  fi_param_get_int(&provider, "entropy_ports", &p.entropy_ports);
  fi_param_get_int(&provider, "mtu", &p.mtu);
  fi_param_get_int(&provider, "rto_min_us", &p.rto_min_us);
  fi_param_get_int(&provider, "rto_max_ms", &p.rto_max_ms);
  fi_param_get_int(&provider, "retries", &p.retries);
  fi_param_get_int(&provider, "inject_size", &p.inject_size);
  return p;
}

Params& mutable_params() {
  static Params p;
  return p;
}

}  // namespace

fi_provider provider = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(1, 17),
    .context = {},
    .name = "spray",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = cleanup,
};

const Params& params() {
  return mutable_params();
}

int to_fi_errno(Status s) {
  switch (s) {
    case Status::kOk:
      return FI_SUCCESS;
    case Status::kTruncated:
      return FI_ETRUNC;
    case Status::kBadKey:
      return FI_EKEYREJECTED;
    case Status::kOutOfBounds:
      return FI_EINVAL;
    case Status::kAccessDenied:
      return FI_EACCES;
    case Status::kPeerUnreachable:
      return FI_EHOSTUNREACH;
    case Status::kNoPdcAvailable:
      return FI_EAGAIN;
    case Status::kCanceled:
      return FI_ECANCELED;
    case Status::kTooLong:
      return FI_EMSGSIZE;
    case Status::kAgain:
      return FI_EAGAIN;
    case Status::kInvalidArgument:
      return FI_EINVAL;
    case Status::kProtocolError:
      return FI_EIO;
  }
  return FI_EOTHER;
}

int no_bind(fid*, fid*, uint64_t) {
  return -FI_ENOSYS;
}
int no_control(fid*, int, void*) {
  return -FI_ENOSYS;
}
int no_ops_open(fid*, const char*, uint64_t, void**, void*) {
  return -FI_ENOSYS;
}

}  // namespace spray::fi

namespace spray::fi {
namespace {

// libfabric 1.x keeps {enum type; bool disable_logging; bool disable_layering;} in the
// provider's context (ofi_prov_context, internal) and sets disable_layering for core
// providers that have a native RDM endpoint (sockets, shm, efa, ...), so that utility
// providers do not stack on them unless asked. We have one too: without this, ofi_rxd
// stacks on our DGRAM endpoint and "spray;ofi_rxd" is listed before our own RDM
// endpoint, which applications then pick. The core only ever sets the flag, never
// clears it, so setting it before registration is enough.
struct CoreProviderContext {
  int type;
  bool disable_logging;
  bool disable_layering;
};
static_assert(sizeof(CoreProviderContext) <= sizeof(fi_context));

void disable_layering() {
  if (FI_MAJOR(fi_version()) != 1) return;  // layout known for 1.x only
  CoreProviderContext c{};
  std::memcpy(&c, &provider.context, sizeof(c));
  c.disable_layering = true;
  std::memcpy(&provider.context, &c, sizeof(c));
}

}  // namespace
}  // namespace spray::fi

extern "C" FI_EXT_INI {
  spray::fi::mutable_params() = spray::fi::load_params();
  spray::fi::disable_layering();
  return &spray::fi::provider;
}
