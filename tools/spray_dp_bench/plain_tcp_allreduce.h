// What kernel TCP alone gives an all-reduce between processes of one host: `ranks`
// processes joined in a ring by loopback TCP connections run the bandwidth-optimal ring
// all-reduce (f32 sum; reduce-scatter, then all-gather, ranks - 1 steps each, one chunk
// sent and one received per step) with nothing else in the way: no library, no tag
// matching, no headers, no acknowledgements of our own. A waiting rank polls its two
// sockets and yields the CPU, so ranks may outnumber cores.
//
// It is a reference, not a proof of a ceiling (another algorithm over TCP could do
// somewhat better), for one question: can any all-reduce over kernel TCP keep up with
// Open MPI's shared-memory path? scripts/coll-compare.sh prints it beside both.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace spray::tools {

struct AllreduceResult {
  double mean_us = 0;  // rank 0's mean time per all-reduce
  double best_us = 0;  // rank 0's fastest
};

// `iterations` timed all-reduces of `bytes` (a multiple of 4) after ten untimed ones.
// Every rank checks the last result (each element must be the sum over ranks of what
// each put in). nullopt and `error` when a socket cannot be set up, a
// result is wrong, or a step makes no progress for 10 s (a rank died); every process it
// started has ended by the time it returns.
std::optional<AllreduceResult> plain_tcp_allreduce(int ranks, size_t bytes, int iterations,
                                                   std::string& error);

}  // namespace spray::tools
