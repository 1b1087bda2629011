// MPI one-sided atomics whose remote operations are spray's libfabric atomics (Open
// MPI's osc/rdma through btl/ofi; MPICH's ch4:ofi, with FI_ORDER_ATOMIC_*): every rank
// fetch-and-adds rank 0's counter, compare-and-swaps one of its words and accumulates into another,
// in a passive-target epoch; rank 0 checks the words and prints PASS. Each rank also reads the
// counter back with MPI_Get_accumulate(MPI_NO_OP) to see every increment it made.
//
// Rank 0 leaves its own window alone: Open MPI 4.1.4's osc/rdma hands btl/ofi a null
// registration handle for a compare-and-swap on the calling rank's own window (it
// crashes in mca_btl_ofi_acswap), so only the other ranks aim at rank 0.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

namespace {

constexpr int kAdds = 100;  // fetch-and-adds per rank

int check(bool ok, const char* what) {
  if (!ok) std::printf("FAIL: %s\n", what);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Memory of the process's own (MPI_Win_create), so the window is not shared memory
  // between the ranks of this host and every access from another rank is remote.
  int64_t* words = nullptr;
  MPI_Alloc_mem(4 * sizeof(int64_t), MPI_INFO_NULL, &words);
  for (int i = 0; i < 4; ++i) words[i] = 0;
  // MPICH (ch4:ofi) does an accumulate with the provider's atomics only when the window
  // says no rank updates it through shared memory; otherwise it carries every accumulate
  // as an active message. Open MPI ignores the key.
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "disable_shm_accumulate", "true");
  MPI_Win win;
  MPI_Win_create(words, 4 * sizeof(int64_t), sizeof(int64_t), info, MPI_COMM_WORLD, &win);
  MPI_Info_free(&info);
  MPI_Barrier(MPI_COMM_WORLD);

  int failures = 0;
  MPI_Win_lock_all(0, win);
  if (rank != 0) {
    const int64_t one = 1;
    std::set<int64_t> seen;  // counter values this rank fetched: each one distinct
    for (int i = 0; i < kAdds; ++i) {
      int64_t old = -1;
      MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, win);
      MPI_Win_flush(0, win);
      seen.insert(old);
    }
    failures += check(seen.size() == static_cast<size_t>(kAdds), "a fetched value repeated");
    // Word 1 goes from 0 to the rank that swaps first; the others see that rank's value.
    const int64_t zero = 0, mine = rank;
    int64_t before = -1;
    MPI_Compare_and_swap(&mine, &zero, &before, MPI_INT64_T, 0, 1, win);
    MPI_Win_flush(0, win);
    failures += check(before >= 0 && before < size, "compare-and-swap fetched a stranger");
    const int64_t add = rank;
    MPI_Accumulate(&add, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, MPI_SUM, win);
    MPI_Win_flush(0, win);
    int64_t counter = -1;
    MPI_Get_accumulate(nullptr, 0, MPI_INT64_T, &counter, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T,
                       MPI_NO_OP, win);
    MPI_Win_flush(0, win);
    failures += check(counter >= kAdds && counter <= int64_t{kAdds} * (size - 1),
                      "the counter read back is out of range");
  }
  MPI_Win_unlock_all(win);
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0) {
    const int64_t others = size - 1;
    failures += check(words[0] == kAdds * others, "counter != fetch-and-adds made");
    failures += check(words[1] >= 1 && words[1] < size, "no rank's compare-and-swap landed");
    failures += check(words[2] == others * (others + 1) / 2, "accumulated sum is wrong");
    std::printf("counter %lld (want %lld), swapped in by rank %lld, sum %lld (want %lld)\n",
                static_cast<long long>(words[0]), static_cast<long long>(kAdds * others),
                static_cast<long long>(words[1]), static_cast<long long>(words[2]),
                static_cast<long long>(others * (others + 1) / 2));
  }
  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && total == 0) std::printf("PASS\n");
  MPI_Win_free(&win);
  MPI_Free_mem(words);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
