#!/usr/bin/env bash
# The collectives demonstration (README's main job): 4 local ranks run all-reduce and
# all-to-all with spray::coll through `spray` (default datapath auto: shared memory between
# these local ranks) and spray over loopback UDP only (spray:udp), then through
# libfabric's `tcp` and `shm` (shared memory: the same kind of path Open MPI takes
# between local ranks), then Open MPI's MPI_Allreduce / MPI_Alltoall over its default
# path and over its own TCP path, all in one run (these machines are shared: compare
# side by side, not absolute numbers).
# Usage: scripts/coll-demo.sh [BUILD_DIR] [RANKS]
set -euo pipefail
build=${1:-build}
ranks=${2:-4}
export FI_PROVIDER_PATH=$(cd "$build/provider/lib" && pwd)
# First the tuner's cost model is measured on each fabric (spray-coll-perf --calibrate:
# alpha, beta, gamma and every algorithm's time at four sizes, printed with the tuner's
# pick per size); the runs then use it, and their last column shows the algorithm picked.
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
# A provider is NAME or spray:DATAPATH (FI_SPRAY_DATAPATH for that run).
run_ranks() {  # provider, then spray-run's program and arguments
  local provider=$1
  shift
  FI_SPRAY_DATAPATH=$([[ $provider == *:* ]] && echo "${provider#*:}" || echo auto) \
    "$build/tools/spray-run" -n "$ranks" --provider "${provider%%:*}" --timeout 600 "$@"
}
providers="spray spray:udp tcp shm"
for provider in $providers; do
  echo "# tuner calibration over $provider"
  run_ranks "$provider" "$build/tools/spray-coll-perf" --calibrate "$models/$provider.json" |
    sed -n 's/^\[0\] # cost model written to .*): /# /p; s/^\[0\] //p'
done
for coll in allreduce alltoall; do
  for provider in $providers; do
    echo "# $coll over $provider"
    SPRAY_COLL_TUNING=$models/$provider.json \
      run_ranks "$provider" "$build/tools/spray-coll-perf" --coll "$coll" --sizes 4K,1M,64M \
      --check | sed -n 's/^\[0\] //p'
  done
done
# The quantised all-reduce (INT8, groups of 64) over spray: wire bytes saved per row.
"$build/tools/spray-run" -n "$ranks" --provider spray --timeout 600 \
  "$build/tools/spray-coll-perf" --coll allreduce --sizes 4K,1M,64M --check \
  --algo compressed_int8 | sed -n 's/^\[0\] //p'
if command -v mpirun >/dev/null && [[ -x $build/tests/mpi_transport_test ]]; then
  root_flag=()
  [[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)
  open_mpi() {  # extra mpirun arguments
    timeout 600 mpirun "${root_flag[@]}" --oversubscribe -np "$ranks" "$@" \
      "$build/tests/mpi_transport_test" --coll-bench 2>/dev/null | grep -v '^PASS'
  }
  echo "# Open MPI, default path (shared memory between local ranks)"
  open_mpi
  # The same kind of transport as libfabric's tcp: Open MPI's own TCP path.
  echo "# Open MPI over its own TCP path (btl tcp)"
  open_mpi --mca btl tcp,self
fi
