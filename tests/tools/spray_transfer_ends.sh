#!/usr/bin/env bash
# spray-transfer's outcomes end to end: every byte intact where paths survive (exit 0),
# and where they cannot - plain ECMP keeps each flow on its one path, and that path dies
# mid-run - every operation still ends, with an error (exit 1), never runs to the
# 60 s virtual-time limit (exit 2). Seed 1052 is a case that ran to the limit before
# a PDS that gave a peer up also forgot the PDCs that peer had opened to it: the peer's
# probes were answered while the answers it waited for were lost.
# Usage: spray_transfer_ends.sh SPRAY_TRANSFER
set -uo pipefail
transfer=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--hosts 4 --paths 4 --messages 20 --reorder 0.1 --duplicate 0.02 --corrupt 0.01
        --trim 0.02 --path-down)
"$transfer" "${common[@]}" --bytes 230789 --loss 0.07 --path-selection reps --seed 1052 \
  >"$out" 2>&1
rc=$?
[[ $rc == 0 ]] || { cat "$out"; fail "reps over a dying path: exit $rc, not 0"; }
for seed in 1012 1032 1052; do
  "$transfer" "${common[@]}" --bytes $(( (seed * 7919) % 300000 + 1 )) --loss 0.0$((seed % 9)) \
    --path-selection ecmp --seed "$seed" >"$out" 2>&1
  rc=$?
  if [[ $rc != 1 ]]; then
    tail -n 8 "$out"
    fail "ecmp over a dying path, seed $seed: exit $rc, not 1 (ended with errors)"
  fi
  grep -q "peer unreachable" "$out" ||
    fail "ecmp seed $seed: no operation reported 'peer unreachable'"
done
echo "PASS: spray-transfer ends every operation"
