// An MPI program that checks what MPI asks of a transport, run by mpirun over Open MPI's
// OFI MTL (tests/mpi/mpi_over_spray.sh). Every check verifies the bytes it receives.
//
//   mpi_transport_test            the checks: tagged point-to-point with any source and
//                                 any tag (per-sender order kept), probe/iprobe, mprobe/
//                                 improbe with mrecv, synchronous sends, 0 B to 64 MiB,
//                                 Allreduce, Alltoall. Prints PASS/FAIL on rank 0; exit 1
//                                 when any rank saw a failure.
//   mpi_transport_test --bench N  pingpong latency (8 B) and streaming bandwidth (64 KiB,
//                                 1 MiB) between ranks 0 and 1, N iterations; one JSON
//                                 line on rank 0.
//   mpi_transport_test --coll-bench MPI_Allreduce (f32 sum) and MPI_Alltoall at 4 KiB,
//                                 1 MiB and 64 MiB per rank, in spray-coll-perf's row
//                                 format (time = the slowest rank's mean; nccl-tests busbw).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_rank = 0;
int g_size = 0;
int g_failures = 0;  // on this rank

void fail(const char* check, const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, check, what.c_str());
}

// The byte at offset i of a message identified by (sender, seed): any misplaced, lost or
// duplicated byte shows.
uint8_t pattern_byte(int sender, uint64_t seed, size_t i) {
  return static_cast<uint8_t>(sender * 31 + seed * 17 + i + (i >> 8) * 3);
}
std::vector<uint8_t> pattern(int sender, uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(sender, seed, i);
  return v;
}
bool matches(const uint8_t* p, int sender, uint64_t seed, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != pattern_byte(sender, seed, i)) return false;
  }
  return true;
}
int count_bytes(const MPI_Status& st) {
  int n = -1;
  MPI_Get_count(&st, MPI_BYTE, &n);
  return n;
}

// Every other rank sends kPerSender messages of varying size to rank 0 with distinct
// tags; rank 0 receives them all with MPI_ANY_SOURCE and MPI_ANY_TAG and checks source,
// tag, length, bytes, and that each sender's messages arrive in the order sent.
void check_any_source_any_tag() {
  constexpr int kPerSender = 40;
  auto size_of = [](int i) { return static_cast<size_t>((i * 997) % 5000); };
  if (g_rank != 0) {
    for (int i = 0; i < kPerSender; ++i) {
      const auto buf = pattern(g_rank, static_cast<uint64_t>(i), size_of(i));
      MPI_Send(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, 0, g_rank * 1000 + i,
               MPI_COMM_WORLD);
    }
    return;
  }
  std::vector<int> next(static_cast<size_t>(g_size), 0);
  std::vector<uint8_t> buf(8192);
  for (int n = 0; n < kPerSender * (g_size - 1); ++n) {
    MPI_Status st;
    MPI_Recv(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
             MPI_COMM_WORLD, &st);
    const int src = st.MPI_SOURCE;
    if (src <= 0 || src >= g_size) {
      fail("any_source", "bad source " + std::to_string(src));
      continue;
    }
    const int i = st.MPI_TAG - src * 1000;
    if (i != next[static_cast<size_t>(src)]) {
      fail("any_source", "from " + std::to_string(src) + " got message " + std::to_string(i) +
                             ", expected " + std::to_string(next[static_cast<size_t>(src)]));
    }
    next[static_cast<size_t>(src)] = i + 1;
    if (count_bytes(st) != static_cast<int>(size_of(i)) ||
        !matches(buf.data(), src, static_cast<uint64_t>(i), size_of(i))) {
      fail("any_source", "message " + std::to_string(i) + " from " + std::to_string(src) +
                             " has wrong length or bytes");
    }
  }
}

// MPI_Probe/MPI_Iprobe learn a message's size before receiving it; MPI_Mprobe/MPI_Improbe
// claim it so that a receive posted meanwhile takes the next message instead.
void check_probe_and_mprobe() {
  const int to = (g_rank + 1) % g_size;
  const int from = (g_rank + g_size - 1) % g_size;
  const size_t sizes[] = {0, 333, 70000, 1 << 20};  // eager and rendezvous
  for (size_t k = 0; k < std::size(sizes); ++k) {
    const size_t n = sizes[k];
    const auto a = pattern(g_rank, 100 + k, n);
    const auto b = pattern(g_rank, 200 + k, n);
    MPI_Request req[2];
    MPI_Isend(a.data(), static_cast<int>(n), MPI_BYTE, to, 7, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(b.data(), static_cast<int>(n), MPI_BYTE, to, 7, MPI_COMM_WORLD, &req[1]);

    // Probe (blocking), then receive exactly what it announced.
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    if (st.MPI_SOURCE != from || st.MPI_TAG != 7 || count_bytes(st) != static_cast<int>(n)) {
      fail("probe", "announced source/tag/size wrong for " + std::to_string(n) + " bytes");
    }
    // Mprobe claims the first message; a plain receive then gets the second; the claimed
    // one arrives through Mrecv.
    MPI_Message msg;
    MPI_Mprobe(from, 7, MPI_COMM_WORLD, &msg, &st);
    std::vector<uint8_t> first(n + 1), second(n + 1);
    MPI_Recv(second.data(), static_cast<int>(n), MPI_BYTE, from, 7, MPI_COMM_WORLD, &st);
    MPI_Mrecv(first.data(), static_cast<int>(n), MPI_BYTE, &msg, &st);
    if (!matches(first.data(), from, 100 + k, n) || !matches(second.data(), from, 200 + k, n)) {
      fail("mprobe", "claimed and later messages mixed up at " + std::to_string(n) + " bytes");
    }
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);

    // Iprobe reports nothing for a tag nobody sent, then finds one that was sent.
    int flag = 1;
    MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, &st);
    if (flag) fail("iprobe", "found a message with a tag nobody sent");
    MPI_Request r;
    MPI_Isend(a.data(), static_cast<int>(n), MPI_BYTE, to, 8, MPI_COMM_WORLD, &r);
    MPI_Message m2 = MPI_MESSAGE_NULL;
    for (flag = 0; !flag;) MPI_Improbe(from, 8, MPI_COMM_WORLD, &flag, &m2, &st);
    MPI_Request rr;
    MPI_Imrecv(first.data(), static_cast<int>(n), MPI_BYTE, &m2, &rr);
    MPI_Wait(&rr, &st);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (count_bytes(st) != static_cast<int>(n) || !matches(first.data(), from, 100 + k, n)) {
      fail("improbe", "wrong message at " + std::to_string(n) + " bytes");
    }
  }
}

// A synchronous send completes only once its receive has started: rank 0's Issend to
// rank 1 must stay incomplete until rank 1 posts the receive after a barrier.
void check_ssend() {
  if (g_rank == 0) {
    const auto buf = pattern(0, 55, 4096);
    MPI_Request r;
    MPI_Issend(buf.data(), 4096, MPI_BYTE, 1, 55, MPI_COMM_WORLD, &r);
    for (int i = 0; i < 200; ++i) {
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (done) {
        fail("ssend", "completed before the receive was posted");
        break;
      }
      usleep(100);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 1) {
      std::vector<uint8_t> in(4096);
      MPI_Recv(in.data(), 4096, MPI_BYTE, 0, 55, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!matches(in.data(), 0, 55, 4096)) fail("ssend", "wrong bytes");
    }
  }
  // And a ring of blocking Ssends with the receives pre-posted.
  const int to = (g_rank + 1) % g_size;
  const int from = (g_rank + g_size - 1) % g_size;
  std::vector<uint8_t> in(100000);
  MPI_Request r;
  MPI_Irecv(in.data(), 100000, MPI_BYTE, from, 56, MPI_COMM_WORLD, &r);
  const auto out = pattern(g_rank, 56, 100000);
  MPI_Ssend(out.data(), 100000, MPI_BYTE, to, 56, MPI_COMM_WORLD);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (!matches(in.data(), from, 56, 100000)) fail("ssend_ring", "wrong bytes");
}

// Every size from 0 B to 64 MiB around a ring, byte-checked, with a guard byte after the
// message that must stay untouched.
void check_sizes() {
  const int to = (g_rank + 1) % g_size;
  const int from = (g_rank + g_size - 1) % g_size;
  const size_t sizes[] = {0,     1,     7,     8,       1023,    1024,    4096,
                          65535, 65536, 65537, 1 << 20, 8 << 20, 64 << 20};
  for (const size_t n : sizes) {
    const auto out = pattern(g_rank, n, n);
    std::vector<uint8_t> in(n + 1, 0xee);
    MPI_Status st;
    MPI_Sendrecv(out.data(), static_cast<int>(n), MPI_BYTE, to, 9, in.data(),
                 static_cast<int>(n + 1), MPI_BYTE, from, 9, MPI_COMM_WORLD, &st);
    if (count_bytes(st) != static_cast<int>(n) || !matches(in.data(), from, n, n) ||
        in[n] != 0xee) {
      fail("sizes", std::to_string(n) + " bytes arrived wrong");
    }
  }
}

void check_collectives() {
  // Allreduce: sums of integers (exact) and a max, over vectors long enough to be split.
  for (const int n : {1, 1000, 1 << 20}) {
    std::vector<int64_t> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = int64_t{g_rank + 1} * (i + 1);
    MPI_Allreduce(in.data(), out.data(), n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    const int64_t ranks_sum = int64_t{g_size} * (g_size + 1) / 2;
    for (int i = 0; i < n; ++i) {
      if (out[static_cast<size_t>(i)] != ranks_sum * (i + 1)) {
        fail("allreduce", "sum wrong at element " + std::to_string(i) + " of " + std::to_string(n));
        break;
      }
    }
    int mx = 0;
    MPI_Allreduce(&g_rank, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (mx != g_size - 1) fail("allreduce", "max wrong");
  }
  // Alltoall: element j of rank i's send buffer goes to rank j; tagged with both.
  for (const int per : {1, 4096, 65536}) {
    std::vector<int32_t> out(static_cast<size_t>(per) * g_size),
        in(static_cast<size_t>(per) * g_size, -1);
    for (int j = 0; j < g_size; ++j) {
      for (int e = 0; e < per; ++e)
        out[static_cast<size_t>(j * per + e)] = g_rank * 1000000 + j * 10000 + e % 10000;
    }
    MPI_Alltoall(out.data(), per, MPI_INT32_T, in.data(), per, MPI_INT32_T, MPI_COMM_WORLD);
    for (int i = 0; i < g_size; ++i) {
      for (int e = 0; e < per; ++e) {
        if (in[static_cast<size_t>(i * per + e)] != i * 1000000 + g_rank * 10000 + e % 10000) {
          fail("alltoall", "block from rank " + std::to_string(i) + " wrong (" +
                               std::to_string(per) + " per rank)");
          e = per;
          i = g_size;
        }
      }
    }
  }
}

// --- benchmark mode -------------------------------------------------------------------

double pingpong_usec(size_t bytes, int iters) {
  std::vector<uint8_t> buf(bytes);
  const int peer = 1 - g_rank;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (g_rank == 0) {
      MPI_Send(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - start) * 1e6 / iters / 2;  // one way
}

// Rank 0 streams windows of kWindow messages to rank 1, which acknowledges each window.
double bandwidth_mb_s(size_t bytes, int iters) {
  constexpr int kWindow = 16;
  std::vector<uint8_t> buf(bytes * kWindow);
  std::vector<MPI_Request> req(kWindow);
  const int peer = 1 - g_rank;
  const int windows = iters / kWindow > 0 ? iters / kWindow : 1;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < kWindow; ++i) {
      uint8_t* p = buf.data() + bytes * static_cast<size_t>(i);
      if (g_rank == 0) {
        MPI_Isend(p, static_cast<int>(bytes), MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                  &req[static_cast<size_t>(i)]);
      } else {
        MPI_Irecv(p, static_cast<int>(bytes), MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                  &req[static_cast<size_t>(i)]);
      }
    }
    MPI_Waitall(kWindow, req.data(), MPI_STATUSES_IGNORE);
    char ack = 0;
    if (g_rank == 0) {
      MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Send(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
    }
  }
  const double seconds = MPI_Wtime() - start;
  return static_cast<double>(bytes) * kWindow * windows / seconds / 1e6;
}

void bench(int iters) {
  if (g_size != 2) {
    if (g_rank == 0) std::fprintf(stderr, "--bench needs exactly 2 ranks\n");
    g_failures = 1;
    return;
  }
  pingpong_usec(8, iters / 10 + 1);  // warm up: PDCs open, buffers touched
  const double lat = pingpong_usec(8, iters);
  const double bw64 = bandwidth_mb_s(64 << 10, std::max(iters / 4, 64));
  const double bw1m = bandwidth_mb_s(1 << 20, std::max(iters / 40, 64));
  if (g_rank == 0) {
    std::printf(
        "{\"latency_8B_usec\": %.2f, \"bandwidth_64KiB_MBps\": %.1f, "
        "\"bandwidth_1MiB_MBps\": %.1f}\n",
        lat, bw64, bw1m);
  }
}

// Mean seconds per call of `op` over `reps` calls, the slowest rank's.
template <class Op>
double seconds_per_call(int reps, Op op) {
  for (int i = 0; i < 2; ++i) op();  // warm up
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < reps; ++i) op();
  double t = (MPI_Wtime() - start) / reps;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

void coll_bench() {
  const double n = g_size;
  for (const char* coll : {"allreduce", "alltoall"}) {
    if (g_rank == 0) std::printf("# MPI %s f32 sum, %d ranks\n", coll, g_size);
    for (size_t bytes : {size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
      std::vector<float> send(bytes / 4, 1.0f), recv(bytes / 4);
      const int reps = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / bytes, 2, 50));
      const bool allreduce = std::strcmp(coll, "allreduce") == 0;
      const int block = static_cast<int>(bytes / 4 / static_cast<size_t>(g_size));
      const double t = seconds_per_call(reps, [&] {
        if (allreduce) {
          MPI_Allreduce(send.data(), recv.data(), static_cast<int>(send.size()), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        } else {
          MPI_Alltoall(send.data(), block, MPI_FLOAT, recv.data(), block, MPI_FLOAT,
                       MPI_COMM_WORLD);
        }
      });
      const double algbw = static_cast<double>(bytes) / t / 1e9;
      const double busbw = algbw * (allreduce ? 2 * (n - 1) / n : (n - 1) / n);
      if (g_rank == 0) {
        std::printf("  %12zu %12zu %6s %5s %11.1f %9.3f %9.3f\n", bytes, bytes / 4, "f32", "sum",
                    t * 1e6, algbw, busbw);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc >= 2 && std::strcmp(argv[1], "--bench") == 0) {
    bench(argc >= 3 ? std::atoi(argv[2]) : 10000);
  } else if (argc >= 2 && std::strcmp(argv[1], "--coll-bench") == 0) {
    coll_bench();
  } else if (g_size < 2) {
    if (g_rank == 0) std::fprintf(stderr, "needs at least 2 ranks\n");
    g_failures = 1;
  } else {
    struct Check {
      const char* name;
      void (*run)();
    };
    const Check checks[] = {{"any_source_any_tag", check_any_source_any_tag},
                            {"probe_and_mprobe", check_probe_and_mprobe},
                            {"ssend", check_ssend},
                            {"sizes_0B_to_64MiB", check_sizes},
                            {"allreduce_alltoall", check_collectives}};
    for (const Check& c : checks) {
      const int before = g_failures;
      c.run();
      MPI_Barrier(MPI_COMM_WORLD);
      int bad = g_failures - before, any = 0;
      MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      if (g_rank == 0) std::printf("%s %s (%d ranks)\n", any ? "FAIL" : "ok  ", c.name, g_size);
    }
  }
  int total = 0;
  MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s\n", total ? "FAIL" : "PASS");
  MPI_Finalize();
  return total ? 1 : 0;
}
