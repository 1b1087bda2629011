#!/usr/bin/env bash
# Issue 5's bandwidth target, measured fairly on a shared, noisy machine: 4 local ranks,
# all-reduce and all-to-all (f32) at 1 MiB and 64 MiB, through spray::coll over `spray`
# and over libfabric's `tcp`, and through Open MPI over its default path (shared memory
# between local ranks) and over its own TCP path (btl tcp: the same kind of transport as
# libfabric's tcp), and, for all-reduce, a ring over bare loopback TCP with no library
# (bare-tcp). They run in turn, ROUNDS times, so drift hits all alike; the summary gives
# each one's median time and the ratios that matter, then spray's and tcp's ratio to Open
# MPI round by round (its range, and how many rounds met the target).
# Usage: scripts/coll-compare.sh [BUILD_DIR] [ROUNDS] [RANKS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
ranks=${3:-4}
export FI_PROVIDER_PATH=$(cd "$build/provider/lib" && pwd)
command -v mpirun >/dev/null || { echo "mpirun (Open MPI) is not installed"; exit 1; }
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
# Rows of both programs: "size count type op time(us) ..." under a "# ... allreduce|
# alltoall ..." header. Prints "COLL SIZE USEC" per row.
rows() {
  awk '/^#.*allreduce/ {c = "allreduce"} /^#.*alltoall/ {c = "alltoall"}
       /^ *[0-9]/ && c != "" {print c, $1, $5}'
}
# 4 KiB first, as in Open MPI's run: the first size of a run pays for first contact.
coll_perf() {  # provider
  for coll in allreduce alltoall; do
    SPRAY_COLL_TUNING=$models/$1.json \
      "$build/tools/spray-run" -n "$ranks" --provider "$1" --timeout 600 \
      "$build/tools/spray-coll-perf" --coll "$coll" --sizes 4K,1M,64M | sed -n 's/^\[0\] //p'
  done
}
open_mpi() {  # extra mpirun arguments
  timeout 600 mpirun "${root_flag[@]}" --oversubscribe -np "$ranks" "$@" \
    "$build/tests/mpi_transport_test" --coll-bench 2>/dev/null | grep -v '^PASS'
}
# A ring all-reduce over bare loopback TCP between the same number of processes, with no
# library at all (spray-dp-bench --tcp-allreduce): what kernel TCP alone allows, beside
# Open MPI's shared-memory path. Prints "allreduce SIZE USEC".
bare_tcp_allreduce() {
  local size iterations json
  for size in 1048576 67108864; do
    iterations=$(( size > 1048576 ? 4 : 200 ))
    # Read when it has ended: a parser starting beside it took CPU from its ranks.
    json=$("$build/tools/spray-dp-bench" --tcp-allreduce "$size" --ranks "$ranks" \
      --allreduce-iterations "$iterations" --json)
    python3 -c 'import json, sys; r = json.load(sys.stdin)[0]; print("allreduce", r["bytes"], r["mean_us"])' <<<"$json"
  done
}
# The tuner's cost model is measured on each fabric first, as coll-demo does.
for provider in spray tcp; do
  "$build/tools/spray-run" -n "$ranks" --provider "$provider" --timeout 600 \
    "$build/tools/spray-coll-perf" --calibrate "$models/$provider.json" >/dev/null
done
for ((r = 1; r <= rounds; ++r)); do
  echo "round $r/$rounds" >&2
  coll_perf spray | rows | sed 's/^/spray /'
  coll_perf tcp | rows | sed 's/^/tcp /'
  open_mpi | rows | sed 's/^/ompi /'
  open_mpi --mca btl tcp,self | rows | sed 's/^/ompi-tcp /'
  bare_tcp_allreduce | sed 's/^/bare-tcp /'
done | python3 -c '
import statistics, sys
times = {}
for line in sys.stdin:
    path, coll, size, usec = line.split()
    if size in ("1048576", "67108864"):
        times.setdefault((coll, size, path), []).append(float(usec))
paths = ("spray", "tcp", "ompi", "ompi-tcp", "bare-tcp")
print("median time (us) over %d rounds; ratio > 1: the first is faster" % len(
    next(iter(times.values()))))
print("%-10s %9s " % ("coll", "bytes") + " ".join("%11s" % p for p in paths)
      + "  tcp/ompi-tcp  tcp/ompi  spray/ompi  bare-tcp/ompi")
for coll in ("allreduce", "alltoall"):
    for size in ("1048576", "67108864"):
        med = {p: statistics.median(times.get((coll, size, p), [float("nan")])) for p in paths}
        print("%-10s %9s " % (coll, size) + " ".join("%11.1f" % med[p] for p in paths)
              + "  %12.2f  %8.2f  %10.2f  %13.2f" % (med["ompi-tcp"] / med["tcp"],
                                                     med["ompi"] / med["tcp"],
                                                     med["ompi"] / med["spray"],
                                                     med["ompi"] / med["bare-tcp"]))
# The same ratios round by round (each path against Open MPI of the same round, minutes
# apart): how far the machine swung them, and in how many rounds the target was met.
print("per round, ratio to ompi (range; rounds at or above 1.0):")
for coll in ("allreduce", "alltoall"):
    for size in ("1048576", "67108864"):
        ompi = times.get((coll, size, "ompi"), [])
        cells = []
        for p in ("spray", "tcp"):
            mine = times.get((coll, size, p), [])
            ratios = [o / t for o, t in zip(ompi, mine)]
            if ratios:
                cells.append("%s/ompi %.2f-%.2fx (%d of %d)" % (
                    p, min(ratios), max(ratios), sum(r >= 1.0 for r in ratios), len(ratios)))
        print("%-10s %9s  %s" % (coll, size, "   ".join(cells)))
'
