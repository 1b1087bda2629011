#!/usr/bin/env bash
# A rank that dies inside an all-reduce: every other rank must fail with a clear
# CollectiveError within the collective timeout, not hang. spray-run --keep-going lets
# the survivors run on, and its own --timeout bounds the test if they did hang.
# Usage: rank_dies.sh SPRAY_RUN COLL_CHECK PROVIDER
set -euo pipefail
run=$1 check=$2 provider=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export SPRAY_COLL_TIMEOUT_MS=3000
start=$(date +%s)
rc=0
"$run" -n 3 --provider "$provider" --keep-going --timeout 60 "$check" --die-rank 1 >"$out" 2>&1 || rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
[[ $rc -ne 0 ]] || { echo "FAIL: the run succeeded although rank 1 died"; exit 1; }
[[ $rc -ne 124 ]] || { echo "FAIL: the survivors hung until spray-run's timeout"; exit 1; }
for r in 0 2; do
  grep -q "^\[$r\] CollectiveError: " "$out" || { echo "FAIL: rank $r reported no CollectiveError"; exit 1; }
done
grep -q "completed without rank" "$out" && { echo "FAIL: a collective completed without a member"; exit 1; }
echo "PASS: survivors of a dead rank failed cleanly over $provider in ${elapsed}s"
