#!/usr/bin/env bash
# Over libfabric's `tcp`, the collectives ask ofi_rxm to pass their calls straight to
# tcp's own RDM endpoint (fabric_link.cc: prefer_tcp_passthru), and a user's own
# FI_OFI_RXM_ENABLE_PASSTHRU, 0 included, is kept. spray-coll-perf's header names the
# endpoint protocol libfabric opened: FI_PROTO_RXM_TCP for the direct path, FI_PROTO_RXM
# for rxm's own protocol. Each way, every result is checked (--check: a wrong element
# fails the run).
# Usage: tcp_passthru.sh SPRAY_RUN SPRAY_COLL_PERF
set -euo pipefail
run=$1 perf=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
expect() {  # expect PROTOCOL [ENV...]
  local protocol=$1
  shift
  local rc=0
  env "$@" "$run" -n 3 --provider tcp --timeout 120 "$perf" --sizes 4K,1M -n 5 -w 1 --check \
    >"$out" 2>&1 || rc=$?
  cat "$out"
  [[ $rc -eq 0 ]] || { echo "FAIL: exit status $rc ($*)"; exit 1; }
  grep -q "over 'tcp' (tcp;ofi_rxm, $protocol)" "$out" ||
    { echo "FAIL: the header does not name $protocol ($*)"; exit 1; }
}
expect FI_PROTO_RXM_TCP -u FI_OFI_RXM_ENABLE_PASSTHRU
expect FI_PROTO_RXM FI_OFI_RXM_ENABLE_PASSTHRU=0
echo "PASS: tcp takes the direct path unless the user says otherwise; results correct both ways"
