#!/usr/bin/env bash
# Ranks that disagree about a call must fail with a CollectiveError that says so, not
# hang and not compute garbage:
#  - count: rank 1 passes one more element; the message sizes differ, which the link
#    sees on its own ("bytes arrived where ... were expected").
#  - type:  rank 1 passes i32 where the others pass f32 (same size, invisible on the
#    wire); SPRAY_COLL_VERIFY=1 compares the calls first ("ranks disagree").
# Usage: mismatch.sh SPRAY_RUN COLL_CHECK PROVIDER
set -euo pipefail
run=$1 check=$2 provider=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export SPRAY_COLL_TIMEOUT_MS=3000
expect() {  # expect KIND PATTERN [ENV...]
  local kind=$1 pattern=$2
  shift 2
  local rc=0
  env "$@" "$run" -n 3 --provider "$provider" --timeout 60 "$check" --mismatch "$kind" >"$out" 2>&1 || rc=$?
  cat "$out"
  [[ $rc -eq 2 ]] || { echo "FAIL: $kind mismatch: exit status $rc, want 2 (a CollectiveError)"; exit 1; }
  grep -q "CollectiveError: .*$pattern" "$out" || { echo "FAIL: $kind mismatch not named ('$pattern')"; exit 1; }
  grep -q "mismatched all_reduce completed" "$out" && { echo "FAIL: a mismatched call completed"; exit 1; }
  return 0
}
expect count "were expected (do all ranks pass the same count and type"
expect type "ranks disagree: .*type f32.*type i32\|ranks disagree: .*type i32.*type f32" SPRAY_COLL_VERIFY=1
echo "PASS: mismatched counts and types fail cleanly over $provider"
