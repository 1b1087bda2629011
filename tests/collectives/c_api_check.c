/* The C API from C: a blocking all-reduce, all-to-all and broadcast, a non-blocking
 * all-reduce polled with spray_coll_test, an ibarrier, and the error path (an invalid
 * root gives -1 and a message, and the communicator still works since nothing was
 * sent). Start under spray-run; rank 0 prints "PASS C API". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collectives/spray_coll.h"

#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "rank %d: ", rank);                              \
      fprintf(stderr, __VA_ARGS__);                                    \
      fprintf(stderr, " (last error: %s)\n", spray_coll_last_error()); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main(void) {
  spray_coll_comm* comm = NULL;
  int rank = -1;
  CHECK(spray_coll_init(&comm) == 0, "spray_coll_init failed");
  rank = spray_coll_rank(comm);
  const int size = spray_coll_size(comm);

  double sum[100], mine[100];
  for (int i = 0; i < 100; ++i) mine[i] = rank + i;
  CHECK(spray_coll_all_reduce(comm, mine, sum, 100, SPRAY_COLL_F64, SPRAY_COLL_SUM) == 0,
        "all_reduce");
  for (int i = 0; i < 100; ++i) {
    CHECK(sum[i] == size * (size - 1) / 2.0 + (double)size * i, "all_reduce[%d] = %g", i, sum[i]);
  }

  int out[64], in[64];
  for (int j = 0; j < size; ++j) out[j] = rank * 100 + j;
  CHECK(spray_coll_all_to_all(comm, out, in, 1, SPRAY_COLL_I32) == 0, "all_to_all");
  for (int j = 0; j < size; ++j) CHECK(in[j] == j * 100 + rank, "all_to_all[%d] = %d", j, in[j]);

  long long value = rank == size - 1 ? 4242 : 0;
  CHECK(spray_coll_broadcast(comm, &value, 1, SPRAY_COLL_I64, size - 1) == 0, "broadcast");
  CHECK(value == 4242, "broadcast got %lld", value);

  float f = 1.5f, total = 0;
  spray_coll_request* request = NULL;
  CHECK(spray_coll_iall_reduce(comm, &f, &total, 1, SPRAY_COLL_F32, SPRAY_COLL_MAX, &request) == 0,
        "iall_reduce");
  int done = 0;
  while (!done) CHECK(spray_coll_test(request, &done) == 0, "test");
  CHECK(total == 1.5f, "iall_reduce got %g", total);
  CHECK(spray_coll_ibarrier(comm, &request) == 0, "ibarrier");
  CHECK(spray_coll_wait(request) == 0, "wait");

  /* Misuse: a root outside the group fails at once, before anything is sent. */
  CHECK(spray_coll_broadcast(comm, &value, 1, SPRAY_COLL_I64, size) == -1, "bad root accepted");
  CHECK(strstr(spray_coll_last_error(), "root") != NULL, "no message naming the root");
  CHECK(spray_coll_all_reduce(comm, mine, sum, 1, SPRAY_COLL_I32, SPRAY_COLL_AVG) == -1,
        "an integer average was accepted");
  /* Counts no buffer can hold (a negative int passed as size_t, a count that wraps when
   * multiplied by the element size or the rank count) fail with a message, not a crash. */
  CHECK(spray_coll_all_reduce(comm, mine, sum, (size_t)-1, SPRAY_COLL_F64, SPRAY_COLL_SUM) == -1,
        "a count of SIZE_MAX was accepted");
  CHECK(strstr(spray_coll_last_error(), "larger than any buffer") != NULL,
        "no message naming the count: %s", spray_coll_last_error());
  CHECK(spray_coll_all_reduce(comm, mine, sum, (SIZE_MAX >> 3) + 1, SPRAY_COLL_F64,
                              SPRAY_COLL_SUM) == -1,
        "a count whose bytes wrap to 0 was accepted");
  CHECK(
      spray_coll_all_gather(comm, mine, sum, SIZE_MAX / 8 / (size_t)size + 1, SPRAY_COLL_F64) == -1,
      "an all-gather whose output wraps was accepted");
  CHECK(spray_coll_all_to_all(comm, out, in, (SIZE_MAX >> 2) / (size_t)size + 1, SPRAY_COLL_I32) ==
            -1,
        "an all-to-all whose blocks wrap was accepted");
  CHECK(spray_coll_all_reduce(comm, NULL, sum, 1, SPRAY_COLL_F64, SPRAY_COLL_SUM) == -1,
        "a null send buffer was accepted");
  CHECK(spray_coll_barrier(comm) == 0, "barrier after rejected calls");

  spray_coll_finalize(comm);
  if (rank == 0) printf("PASS C API over %d ranks\n", size);
  return 0;
}
