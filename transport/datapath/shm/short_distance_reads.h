// Whether a cross-memory read whose destination lies a few bytes past its source modulo
// 4 KiB is faster through a bounce buffer, on the CPU this process runs on.
//
// The kernel copies for process_vm_readv with `rep movsb`, which some CPUs run several
// times slower at such a distance (transport/base/copy_bytes.h). A bounce buffer placed at
// the source's offset in its page turns the kernel's copy into an aligned one and adds a
// copy of our own, by vector instructions. Whether that pays depends on the CPU: on the
// AMD EPYC of 2026-11-28 a 256 KiB kernel copy at distance 16 ran 1.8 against 9.8 GB/s at
// distance 0, and the bounce doubled a 1 MiB shared-memory stream (spray-fi-rate, 1591
// -> 3581 MB/s); on the AMD EPYC (family 25, model 17) of 2026-12-06 the kernel's copy ran
// about 12 GB/s at both distances and the bounce made the same stream slower (medians of
// eight interleaved pairs: 2980 against 4894 MB/s direct). So each process measures both
// ways once, the first time it needs to know.
#pragma once

namespace spray::dp {

// True when the bounce buffer was the faster way to read 128 KiB from this process into
// itself at distance 16 by a clear margin (best of 8 tries each way, about 0.6 ms in all
// with the buffers' setup, on the first call; later calls return the answer). True as
// well when the kernel refuses the reads, which then never happen.
bool bounce_short_distance_reads();

}  // namespace spray::dp
