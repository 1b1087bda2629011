#!/usr/bin/env bash
# The whole test suite:
#   0. every C/C++ source as clang-format makes it (scripts/check-format.sh; seconds)
#   1. release build: unit, protocol, chaos and negative tests (ctest)
#   2. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang)
#   3. libFuzzer targets (clang), each run for a short, bounded time, one a core
# All three keep line tables only (-DSPRAY_DEBUG_INFO=lines: names and lines in every
# backtrace and sanitizer report, no variables): the release build took 317 s on 2 cores
# against 424 with full debug information (2026-11-26).
# Set SPRAY_FUZZ_SECONDS to change the fuzz time per target (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
jobs=$(nproc)

# ctest with the given arguments, in a private mount namespace where /proc/kallsyms reads
# as empty. Why: every process that loads Debian 12's libfabric reads all of /proc/kallsyms
# twice in its first fi_getinfo (the verbs provider looking for the kernel's
# ib_umem_dmabuf_get, to tell whether it may register dma-bufs), about 0.2 s of CPU on
# these machines, and the suite starts hundreds of such processes. With nothing to read,
# the verbs provider finds no dma-buf support (there is no RDMA device here anyway) and
# nothing else changes. Release tests on 2 cores (2026-11-28, back to back): 303 s against
# 354 s, 3 min of system CPU against 4.6. Needs root (as the network-namespace tests do);
# where a mount namespace or the mount is refused, ctest runs as it is.
run_ctest() {
  if [[ $(id -u) == 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
    unshare --mount --propagation private sh -c \
      'mount --bind /dev/null /proc/kallsyms 2>/dev/null || true; exec "$@"' run_ctest ctest "$@"
  else
    ctest "$@"
  fi
}

echo "== format"
./scripts/check-format.sh

echo "== release build and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPRAY_DEBUG_INFO=lines >/dev/null
cmake --build build -j "$jobs"
# Two tests a core: the release tests wait on sockets, timers and child processes for
# about a quarter of their time (2 cores, 2026-12-06, two back-to-back pairs: -j2 took
# 229 and 238 s with the cores 72 % busy, -j4 194 and 204 s). The sanitizer tests keep
# the cores busy at one a core (-j2 416 s, -j4 400 s), so they stay there. Building
# the sanitizer tree behind the release tests at idle priority (SCHED_IDLE, 2026-12-07,
# one fresh-clone run) did not use that idle quarter: the release tests took 515 s
# against 377 and the sanitizer tests started 14 s later than with no overlap.
run_ctest --test-dir build --output-on-failure -j "$((jobs * 2))"

echo "== ASan + UBSan build and tests"
# Built by clang, at -O1 as every sanitizer build is (CMakeLists.txt). Clean builds and
# test runs on 2 cores, 2026-12-06:
#                                   20:45-21:20, idle     21:34-22:09 (a slower hour)
#   GCC 12 at -O0 (until then)      360 s + 482 s *       479 s + 557 s
#   clang 14 at -O0                 254 s + 581 s
#   clang 14 at -O1                 431 s + 244 s         577 s + 293 s (in .ci/run)
#   clang 14, libraries at -O1      314 s + 500 s
#     (tests and tools at -O0)
#   * from the fresh-clone run of 19:50. GCC at -O1 took 491 s + 401 s on 2026-11-26.
# clang's code at -O0 is slow, and the engine's templates are compiled into the test and
# tool executables, which is why the split left the tests slow. The release build above
# is GCC's, so each compiler's warnings hold (both with -Werror).
# A build-asan of GCC's (from before) starts afresh: CMake keeps a cache's compiler whatever
# CC says, and when told another it drops the cache's other settings, SPRAY_SANITIZE too.
if [[ -f build-asan/CMakeCache.txt ]] &&
  ! grep -Eq '^CMAKE_CXX_COMPILER:[A-Z]+=.*clang\+\+$' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPRAY_SANITIZE=ON \
  -DSPRAY_BENCH=OFF -DSPRAY_DEBUG_INFO=lines >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
  run_ctest --test-dir build-asan --output-on-failure -j "$jobs"

echo "== fuzz smoke (libFuzzer, ${SPRAY_FUZZ_SECONDS:-15}s per target)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSPRAY_FUZZ=ON -DSPRAY_BENCH=OFF -DSPRAY_FUZZ_SECONDS="${SPRAY_FUZZ_SECONDS:-15}" -DSPRAY_DEBUG_INFO=lines \
  >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz_targets
run_ctest --test-dir build-fuzz --output-on-failure -L fuzz -j "$jobs"
