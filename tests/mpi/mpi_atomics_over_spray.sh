#!/usr/bin/env bash
# MPI one-sided atomics over spray: Open MPI's osc/rdma on btl/ofi, only spray allowed
# (two-sided traffic over btl/tcp). Passes when the program prints PASS on rank 0 AND
# spray's endpoints report, as they close, that they applied at least the atomics the
# other ranks aimed at rank 0 (so osc/rdma did not do them some other way).
# Usage: mpi_atomics_over_spray.sh PROVIDER_DIR PROGRAM RANKS   (FI_SPRAY_DATAPATH is passed on)
set -euo pipefail
dir=$1
program=$2
ranks=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun (openmpi-bin) not installed"; exit 77; }
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)
export FI_PROVIDER_PATH=$dir FI_SPRAY_DATAPATH=${FI_SPRAY_DATAPATH:-auto}
export FI_LOG_LEVEL=info FI_LOG_PROV=spray  # the endpoints' closing lines carry their counts
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
timeout 600 mpirun "${root_flag[@]}" --oversubscribe -np "$ranks" \
  -x FI_PROVIDER_PATH -x FI_SPRAY_DATAPATH -x FI_LOG_LEVEL -x FI_LOG_PROV \
  --mca pml ob1 --mca btl self,tcp,ofi --mca btl_ofi_provider_include spray --mca osc rdma \
  --mca mpi_yield_when_idle 1 "$program" > "$log" 2>&1 || status=$?
grep -v "libfabric:" "$log" || true
if [[ $status != 0 ]] || ! grep -qx PASS "$log"; then
  echo "FAIL: the MPI program failed (exit $status)"; grep "libfabric:.*warn" "$log" || true; exit 1
fi
# Per other rank: 100 fetch-and-adds, a compare-and-swap and an accumulate (osc/rdma
# reads the counter back with an RMA read, not an atomic).
want=$(( (ranks - 1) * 102 ))
applied=$(grep -o "atomics applied [0-9]*" "$log" | awk '{s += $3} END {print s + 0}')
if (( applied < want )); then
  echo "FAIL: spray applied $applied atomics, fewer than the $want the ranks made"; exit 1
fi
echo "PASS: $ranks ranks, MPI one-sided atomics through osc/rdma, btl/ofi and spray" \
  "($FI_SPRAY_DATAPATH): $applied atomics applied"
