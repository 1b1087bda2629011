/* spray_coll.h: the C API of spray::coll (collectives over any libfabric provider).
 *
 * A communicator comes from the environment that spray-run sets (SPRAY_RANK,
 * SPRAY_SIZE, SPRAY_STORE, SPRAY_PROVIDER, ...; see collectives/communicator.h). Every
 * call returns 0 on success and -1 on failure; spray_coll_last_error() then says why
 * (per thread). After a failed collective the communicator must be finalised.
 *
 * Non-blocking calls return a request; its buffers must stay untouched until
 * spray_coll_test() reports it complete or spray_coll_wait() returns. Both free the
 * request once it is complete (also when it failed).
 *
 * Link with -lspray-coll. Counts are in elements; types and ops below. */
#ifndef SPRAY_COLL_H
#define SPRAY_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spray_coll_comm spray_coll_comm;
typedef struct spray_coll_request spray_coll_request;

typedef enum {
  SPRAY_COLL_F32,
  SPRAY_COLL_F64,
  SPRAY_COLL_F16,
  SPRAY_COLL_BF16,
  SPRAY_COLL_I8,
  SPRAY_COLL_U8,
  SPRAY_COLL_I32,
  SPRAY_COLL_U32,
  SPRAY_COLL_I64,
  SPRAY_COLL_U64
} spray_coll_type;

typedef enum {
  SPRAY_COLL_SUM,
  SPRAY_COLL_PROD,
  SPRAY_COLL_MIN,
  SPRAY_COLL_MAX,
  SPRAY_COLL_AVG
} spray_coll_op;

/* The last error of this thread, or "" if none. */
const char* spray_coll_last_error(void);

int spray_coll_init(spray_coll_comm** comm);
/* Completes queued calls, then closes the communicator. NULL is ignored. */
void spray_coll_finalize(spray_coll_comm* comm);
int spray_coll_rank(const spray_coll_comm* comm);
int spray_coll_size(const spray_coll_comm* comm);

int spray_coll_all_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type, spray_coll_op op);
int spray_coll_reduce_scatter(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                              spray_coll_type type, spray_coll_op op);
int spray_coll_all_gather(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type);
int spray_coll_broadcast(spray_coll_comm* comm, void* buffer, size_t count, spray_coll_type type,
                         int root);
int spray_coll_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                      spray_coll_type type, spray_coll_op op, int root);
int spray_coll_all_to_all(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                          spray_coll_type type);
int spray_coll_barrier(spray_coll_comm* comm);

int spray_coll_iall_reduce(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                           spray_coll_type type, spray_coll_op op, spray_coll_request** request);
int spray_coll_iall_to_all(spray_coll_comm* comm, const void* send, void* recv, size_t count,
                           spray_coll_type type, spray_coll_request** request);
int spray_coll_ibarrier(spray_coll_comm* comm, spray_coll_request** request);
/* *done = 1 once complete (the request is then freed), 0 otherwise. */
int spray_coll_test(spray_coll_request* request, int* done);
/* Blocks until complete; frees the request. */
int spray_coll_wait(spray_coll_request* request);

#ifdef __cplusplus
}
#endif

#endif /* SPRAY_COLL_H */
