#!/usr/bin/env bash
# Collectives over spray when an endpoint may hold 2 PDCs (FI_SPRAY_MAX_PDCS=2), fewer
# than each of its 3 peers needs: PDCs are closed and reopened all the time
# (transport/pds/pds_reclaim.cc). Every element must be right and every rank succeed.
# Usage: small_pdc_tables.sh SPRAY_RUN SPRAY_COLL_PERF DATAPATH
set -euo pipefail
run=$1 perf=$2
export FI_SPRAY_DATAPATH=$3 FI_SPRAY_MAX_PDCS=2
for coll in alltoall allreduce; do
  out=$("$run" -n 4 --provider spray --timeout 120 "$perf" --coll "$coll" --sizes 4K,1M,8M --check)
  # Rank 0's rows: "[0] size count type op time algbw busbw wrong algorithm".
  rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/' <<<"$out")
  if [[ $(wc -l <<<"$rows") != 3 ]] || awk '$9 != 0 {bad = 1} END {exit !bad}' <<<"$rows"; then
    echo "FAIL: $coll with 2 PDCs an endpoint over $3"; echo "$out"; exit 1
  fi
  echo "$rows"
done
echo "PASS collectives with 2 PDCs an endpoint over $3"
