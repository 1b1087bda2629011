#!/usr/bin/env bash
# One rank in another job: spray-run gives its ranks one JobID (FI_SPRAY_JOB_ID), and
# here rank 1 alone changes it before it starts. Endpoints of different jobs ignore each
# other's packets (UET's JobID), so rank 1 is as good as dead to ranks 0 and 2, and they
# to it: every rank must fail with a clear CollectiveError, and no collective may
# complete. A rank that sends to the other job learns from spray that the peer is
# unreachable (after its retries: well under a second with these timeouts) and fails at
# once with that cause; one that only waits to receive from it fails at the collective
# timeout. Without the JobID check the run succeeds.
# Usage: foreign_job.sh SPRAY_RUN COLL_CHECK
set -euo pipefail
run=$1 check=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export SPRAY_COLL_TIMEOUT_MS=3000 FI_SPRAY_RTO_MAX_MS=50
start=$(date +%s)
rc=0
"$run" -n 3 --provider spray --keep-going --timeout 90 bash -c '
  if [[ $SPRAY_RANK == 1 ]]; then export FI_SPRAY_JOB_ID=$(( FI_SPRAY_JOB_ID % 16777215 + 1 )); fi
  exec "$0" "$@"' "$check" >"$out" 2>&1 || rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
[[ $rc -ne 0 ]] || { echo "FAIL: the run succeeded although rank 1 is in another job"; exit 1; }
[[ $rc -ne 124 ]] || { echo "FAIL: the ranks hung until spray-run's timeout"; exit 1; }
for r in 0 1 2; do
  # An error about traffic between ranks, not a provider that did not open.
  grep -Eq "^\[$r\] CollectiveError: .* (from|to) rank [0-9]" "$out" ||
    { echo "FAIL: rank $r reported no CollectiveError about its peers"; exit 1; }
done
grep -q "CollectiveError: .*(spray: peer unreachable)" "$out" ||
  { echo "FAIL: no rank was told by spray that a peer of the other job is unreachable"; exit 1; }
grep -q "completed without rank" "$out" &&
  { echo "FAIL: a collective completed without a member"; exit 1; }
echo "PASS: ranks of two jobs ignored each other and failed cleanly in ${elapsed}s"
