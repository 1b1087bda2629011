#!/usr/bin/env bash
# Runs the MPI test program with Open MPI over the `spray` provider: pml cm, mtl ofi,
# only spray allowed. Passes when the program prints PASS on rank 0 AND every rank's
# OFI MTL log says it initialised over spray (so nothing fell back to another path).
# With FI_SPRAY_TSS_KEY_FILE set, every rank's packets are sealed (UET TSS), and every
# rank's endpoint must log that it sealed and opened packets and refused none.
# Usage: mpi_over_spray.sh PROVIDER_DIR PROGRAM RANKS
#        (FI_SPRAY_DATAPATH, FI_SPRAY_FABRIC and FI_SPRAY_TSS_KEY_FILE are passed on)
set -euo pipefail
dir=$1
program=$2
ranks=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun (openmpi-bin) not installed"; exit 77; }
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)
export FI_PROVIDER_PATH=$dir FI_SPRAY_DATAPATH=${FI_SPRAY_DATAPATH:-auto}
fabric=()
[[ -n ${FI_SPRAY_FABRIC:-} ]] && fabric=(-x FI_SPRAY_FABRIC)  # through spray-fabric
secured=()
if [[ -n ${FI_SPRAY_TSS_KEY_FILE:-} ]]; then
  export FI_LOG_LEVEL=info  # each endpoint logs its TSS counters when it closes
  secured=(-x FI_SPRAY_TSS_KEY_FILE -x FI_LOG_LEVEL)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# More ranks than cores: ranks yield when idle, and blocking waits sleep in the provider.
status=0
timeout 600 mpirun "${root_flag[@]}" --oversubscribe -np "$ranks" -x FI_PROVIDER_PATH -x FI_SPRAY_DATAPATH "${fabric[@]}" "${secured[@]}" \
  --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include spray --mca btl self \
  --mca mtl_base_verbose 10 --mca mpi_yield_when_idle 1 "$program" > "$log" 2>&1 || status=$?
grep -v "mca: base\|mca:base\|^libfabric:" "$log" | grep -v "^\[.*\] select:" || true
selected=$(grep -c "mtl:ofi:provider: spray" "$log" || true)
if [[ $status != 0 ]] || ! grep -qx PASS "$log"; then
  echo "FAIL: the MPI program failed (exit $status)"; exit 1
fi
if [[ $selected != "$ranks" ]]; then
  echo "FAIL: $selected of $ranks ranks report the OFI MTL over spray"; cat "$log"; exit 1
fi
if ((${#secured[@]})); then
  pattern='TSS sealed [1-9][0-9]* opened [1-9][0-9]*, refused: not secured 0 other domain 0 replayed 0 forged 0'
  sealed=$(grep -c "$pattern" "$log" || true)
  if ((sealed < ranks)); then
    echo "FAIL: $sealed of $ranks ranks logged TSS sealing with nothing refused"
    grep -o "TSS sealed.*" "$log" || true
    exit 1
  fi
  echo "TSS: $sealed endpoints sealed and opened, refused nothing"
fi
echo "PASS: $ranks ranks, Open MPI's OFI MTL over spray ($FI_SPRAY_DATAPATH) on every rank"
