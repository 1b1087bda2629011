// The objects the NCCL net plugin hands NCCL: listen, send and receive comms and their
// requests, and how a connection is named on the wire (handle, hello, tags).
//
// A connection is one-way. The receiving side listens: its handle carries the endpoint's
// name and a listen id. The sending side connects: it enters that name into its AV and
// sends a hello (its own name and a send-comm id) tagged for the listen id; accept() on
// the receiving side takes the hello, enters the sender's name and makes a receive comm.
// Data then goes as tagged messages whose tag is the send-comm id (high 32 bits) and
// NCCL's tag (low 32 bits), received from that sender only (FI_DIRECTED_RECV): a
// send-comm id is unique within its process, so (sender, id) names the connection. The
// provider keeps tagged messages from one sender in order (FI_ORDER_SAS), which is the
// order NCCL requires sends and receives of a connection to match in.
//
// Requests: each comm owns a fixed pool made when it is created (no allocation per
// message). A request is one send, or one grouped receive of up to kMaxRecvs buffers,
// each buffer an Operation the provider completes on its own.
//
// Sends up to the provider's inject size are injected: the provider copies the payload,
// so NCCL may reuse the buffer at once and test() reports the send done on its first
// call, where a reliable provider would otherwise complete it only once the peer
// acknowledged it (a round trip per small step, which NCCL's LL protocols feel). The
// request returns to the pool when the provider's completion arrives; if that is an
// error, the comm fails and says so on its next call.
//
// Ownership: NCCL owns a request from isend/irecv until test() reports it done or failed;
// the provider owns each posted Operation until its completion has been read. A comm is
// freed only once the provider has handed back every Operation it holds.
#pragma once

#include <rdma/fabric.h>

#include <array>
#include <cstdint>
#include <vector>

#include "provider/nccl/nccl_net_v8.h"

namespace spray::nccl {

class NetEndpoint;

constexpr int kMaxRecvs = 8;  // maxRecvs: the largest grouped receive
// Tags with this bit set carry hellos; data tags never have it (send-comm ids < 2^31).
constexpr uint64_t kHelloTagBit = uint64_t{1} << 63;
constexpr uint32_t kMaxCommId = (uint32_t{1} << 31) - 1;
// Bytes of an endpoint name a handle or hello can carry (spray's names take 16-32).
constexpr size_t kMaxNameBytes = 96;

inline uint64_t data_tag(uint32_t send_comm_id, int nccl_tag) {
  return (uint64_t{send_comm_id} << 32) | static_cast<uint32_t>(nccl_tag);
}
inline uint64_t hello_tag(uint32_t listen_id) {
  return kHelloTagBit | listen_id;
}

// What listen() writes into NCCL's handle buffer.
struct ListenHandle {
  static constexpr uint32_t kMagic = 0x53504e48;  // "SPNH"
  uint32_t magic;
  uint32_t listen_id;
  uint32_t name_bytes;
  uint8_t name[kMaxNameBytes];
};
static_assert(sizeof(ListenHandle) <= NCCL_NET_HANDLE_MAXSIZE);

// The first message of a connection, from the sender to the listener.
struct Hello {
  static constexpr uint32_t kMagic = 0x53504e43;  // "SPNC"
  uint32_t magic;
  uint32_t send_comm_id;
  uint32_t name_bytes;
  uint8_t name[kMaxNameBytes];
};

struct Request;

// One libfabric operation; the provider hands `context` back as the completion's
// op_context, which leads to the request.
struct Operation {
  fi_context2 context{};  // first: op_context points here
  Request* request = nullptr;
  int index = 0;  // which buffer of the request
};

// A receive buffer not yet handed to the provider (it answered -FI_EAGAIN).
struct PendingReceive {
  void* data = nullptr;
  size_t capacity = 0;
  uint64_t tag = 0;
};

struct Comm;

struct Request {
  static constexpr uint32_t kMagic = 0x53505251;  // "SPRQ"
  enum class State : uint8_t {
    free,    // in its comm's pool
    active,  // NCCL's: posted, not yet reported done
    // NCCL's no longer (reported done or failed): back to the pool once the provider
    // returns its operations.
    abandoned,
  };
  uint32_t magic = kMagic;
  State state = State::free;
  int count = 0;                     // operations (buffers) in this request
  int posted = 0;                    // handed to the provider so far, in buffer order
  int returned = 0;                  // completions read back, successful or not
  ncclResult_t error = ncclSuccess;  // the first failure of any operation
  bool injected = false;             // a send whose payload the provider copied: done once posted
  Comm* comm = nullptr;
  Operation* operations = nullptr;    // count of them, owned by the comm
  int* sizes = nullptr;               // bytes sent / received per buffer, owned by the comm
  PendingReceive* pending = nullptr;  // receives only: what each buffer posts

  bool outstanding() const { return returned < posted; }
  // A completion for buffer `index`: `bytes` moved, or `failure` (ncclSuccess if none).
  void complete(int index, size_t bytes, ncclResult_t failure);
};

// What every comm shares: its kind (checked on every call, since NCCL passes void*), the
// endpoint and the request pool.
struct Comm {
  enum class Kind : uint32_t { listen = 0x53504c43, send = 0x53505343, receive = 0x53505243 };
  Kind kind;
  NetEndpoint& endpoint;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  // The failure of an operation NCCL had already been told was done (an injected send):
  // every later call on the comm returns it.
  ncclResult_t failed = ncclSuccess;

  // `requests` requests of `width` operations each.
  Comm(Kind k, NetEndpoint& e, int requests, int width);
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  // A free request of `count` operations, or null when all are in use.
  Request* take(int count);
  void give_back(Request& r);
  // True while the provider holds any operation of this comm.
  bool provider_holds_operations() const;
  // Asks the provider to give back every posted receive (fi_cancel).
  void cancel_receives();

  std::vector<Request> requests;

 private:
  std::vector<Operation> operations_;
  std::vector<int> sizes_;
  std::vector<PendingReceive> pending_;
  std::vector<Request*> free_;
};

struct ListenComm : Comm {
  ListenComm(NetEndpoint& e, uint32_t listen_id) : Comm(Kind::listen, e, 1, 1), id(listen_id) {}
  uint32_t id;
  Hello hello{};                     // where the posted hello receive lands
  Request* hello_receive = nullptr;  // posted while listening; null if it must be (re)posted
};

struct SendComm : Comm {
  // NCCL may have kMaxRequests grouped receives outstanding, each matching up to
  // kMaxRecvs sends; one more request carries the hello.
  SendComm(NetEndpoint& e, uint32_t comm_id)
      : Comm(Kind::send, e, NCCL_NET_MAX_REQUESTS * kMaxRecvs + 1, 1), id(comm_id) {}
  uint32_t id;
  Hello hello{};
};

struct ReceiveComm : Comm {
  ReceiveComm(NetEndpoint& e, fi_addr_t sender, uint32_t sender_comm_id)
      : Comm(Kind::receive, e, NCCL_NET_MAX_REQUESTS, kMaxRecvs), send_comm_id(sender_comm_id) {
    peer = sender;
  }
  uint32_t send_comm_id;
  // The request whose buffers are not all posted yet; later receives wait behind it so
  // that buffers reach the provider in NCCL's order.
  Request* partly_posted = nullptr;
};

// The comm behind NCCL's pointer if it is one of `kind`, else null.
Comm* comm_of(void* p, Comm::Kind kind);

}  // namespace spray::nccl
