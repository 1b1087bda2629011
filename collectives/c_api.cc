// The C API (spray_coll.h) over spray::coll::Communicator: exceptions become -1 and a
// per-thread message; enum values are mapped explicitly, never cast.
#include "collectives/spray_coll.h"

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "collectives/communicator.h"

using spray::coll::CollectiveError;
using spray::coll::CollectiveRequest;
using spray::coll::Communicator;
using spray::coll::DataType;
using spray::coll::ReduceOp;

struct spray_coll_comm {
  std::unique_ptr<Communicator> comm;
};
struct spray_coll_request {
  CollectiveRequest request;
};

namespace {

thread_local std::string last_error;

DataType to_type(spray_coll_type t) {
  switch (t) {
    case SPRAY_COLL_F32:
      return DataType::kF32;
    case SPRAY_COLL_F64:
      return DataType::kF64;
    case SPRAY_COLL_F16:
      return DataType::kF16;
    case SPRAY_COLL_BF16:
      return DataType::kBF16;
    case SPRAY_COLL_I8:
      return DataType::kI8;
    case SPRAY_COLL_U8:
      return DataType::kU8;
    case SPRAY_COLL_I32:
      return DataType::kI32;
    case SPRAY_COLL_U32:
      return DataType::kU32;
    case SPRAY_COLL_I64:
      return DataType::kI64;
    case SPRAY_COLL_U64:
      return DataType::kU64;
  }
  throw CollectiveError("unknown spray_coll_type " + std::to_string(static_cast<int>(t)));
}

ReduceOp to_op(spray_coll_op op) {
  switch (op) {
    case SPRAY_COLL_SUM:
      return ReduceOp::kSum;
    case SPRAY_COLL_PROD:
      return ReduceOp::kProd;
    case SPRAY_COLL_MIN:
      return ReduceOp::kMin;
    case SPRAY_COLL_MAX:
      return ReduceOp::kMax;
    case SPRAY_COLL_AVG:
      return ReduceOp::kAvg;
  }
  throw CollectiveError("unknown spray_coll_op " + std::to_string(static_cast<int>(op)));
}

Communicator& use(spray_coll_comm* c) {
  if (!c || !c->comm) throw CollectiveError("null communicator");
  return *c->comm;
}

// Runs `body`, turning any exception into -1 and the thread's last error.
template <typename Body>
int guarded(Body body) {
  try {
    body();
    last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return -1;
}

// Hands out a request for a started call.
int hand_out(CollectiveRequest r, spray_coll_request** out) {
  if (!out) throw CollectiveError("null request pointer");
  *out = new spray_coll_request{std::move(r)};
  return 0;
}

}  // namespace

extern "C" {

const char* spray_coll_last_error(void) {
  return last_error.c_str();
}

int spray_coll_init(spray_coll_comm** comm) {
  return guarded([&] {
    if (!comm) throw CollectiveError("null communicator pointer");
    *comm = new spray_coll_comm{Communicator::from_environment()};
  });
}

void spray_coll_finalize(spray_coll_comm* comm) {
  guarded([&] { delete comm; });
}

int spray_coll_rank(const spray_coll_comm* comm) {
  return comm && comm->comm ? comm->comm->rank() : -1;
}

int spray_coll_size(const spray_coll_comm* comm) {
  return comm && comm->comm ? comm->comm->size() : -1;
}

int spray_coll_all_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type, spray_coll_op op) {
  return guarded([&] { use(comm).all_reduce(send, recv, count, to_type(type), to_op(op)); });
}

int spray_coll_reduce_scatter(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                              spray_coll_type type, spray_coll_op op) {
  return guarded([&] { use(comm).reduce_scatter(send, recv, count, to_type(type), to_op(op)); });
}

int spray_coll_all_gather(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type) {
  return guarded([&] { use(comm).all_gather(send, recv, count, to_type(type)); });
}

int spray_coll_broadcast(spray_coll_comm* comm, void* buffer, size_t count, spray_coll_type type,
                         int root) {
  return guarded([&] { use(comm).broadcast(buffer, count, to_type(type), root); });
}

int spray_coll_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                      spray_coll_type type, spray_coll_op op, int root) {
  return guarded([&] { use(comm).reduce(send, recv, count, to_type(type), to_op(op), root); });
}

int spray_coll_all_to_all(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type) {
  return guarded([&] { use(comm).all_to_all(send, recv, count, to_type(type)); });
}

int spray_coll_barrier(spray_coll_comm* comm) {
  return guarded([&] { use(comm).barrier(); });
}

int spray_coll_iall_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                           spray_coll_type type, spray_coll_op op, spray_coll_request** request) {
  return guarded([&] {
    hand_out(use(comm).iall_reduce(send, recv, count, to_type(type), to_op(op)), request);
  });
}

int spray_coll_iall_to_all(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                           spray_coll_type type, spray_coll_request** request) {
  return guarded(
      [&] { hand_out(use(comm).iall_to_all(send, recv, count, to_type(type)), request); });
}

int spray_coll_ibarrier(spray_coll_comm* comm, spray_coll_request** request) {
  return guarded([&] { hand_out(use(comm).ibarrier(), request); });
}

int spray_coll_test(spray_coll_request* request, int* done) {
  return guarded([&] {
    if (!request || !done) throw CollectiveError("spray_coll_test: null argument");
    *done = 0;
    std::unique_ptr<spray_coll_request> owned(request);
    try {
      if (!owned->request.test()) {
        owned.release();  // still running: the caller keeps it
        return;
      }
    } catch (...) {
      *done = 1;  // complete, with an error: freed here, reported by guarded()
      throw;
    }
    *done = 1;
  });
}

int spray_coll_wait(spray_coll_request* request) {
  return guarded([&] {
    if (!request) throw CollectiveError("spray_coll_wait: null request");
    std::unique_ptr<spray_coll_request> owned(request);
    owned->request.wait();
  });
}

}  // extern "C"
