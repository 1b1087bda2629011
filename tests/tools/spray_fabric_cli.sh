#!/usr/bin/env bash
# spray-fabric's command line: what it refuses (with its reason, exit 2 for a bad option
# and 1 for one it cannot carry out), and that it stops by itself after --seconds with
# its closing line. Usage: spray_fabric_cli.sh SPRAY_FABRIC
set -euo pipefail
fabric=$1
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# expect_refusal STATUS TEXT ARGS...: spray-fabric ARGS exits with STATUS, saying TEXT.
expect_refusal() {
  local want=$1 text=$2 status=0
  shift 2
  timeout 10 "$fabric" --seconds 5 "$@" > "$work/out" 2>&1 || status=$?
  if [[ $status != "$want" ]] || ! grep -q -- "$text" "$work/out"; then
    echo "FAIL: spray-fabric $* exited $status (want $want, saying '$text'):"
    cat "$work/out"
    exit 1
  fi
}
expect_refusal 2 "PATH:FROM_MS" --port 0 --path-down 1
expect_refusal 2 "PATH:FROM_MS" --port 0 --path-down 1:50:20
expect_refusal 2 "PATH:FROM_MS" --port 0 --path-down 1:10abc
expect_refusal 2 "PATH:FROM_MS" --port 0 --path-down 1:10:20:30
expect_refusal 1 "path 9 cannot go down" --port 0 --paths 4 --path-down 9:10
expect_refusal 2 "--loss" --port 0 --loss 1.5
expect_refusal 2 "--host-idle-ms" --port 0 --host-idle-ms -5
expect_refusal 1 "not an IPv4 or IPv6 address" --address nowhere --port 0
expect_refusal 1 "192.0.2.1" --address 192.0.2.1 --port 0

# A port in use is named as such.
"$fabric" --port 0 --port-file "$work/port" --seconds 10 > /dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.05; done
[[ -s $work/port ]] || { echo "FAIL: spray-fabric did not write --port-file"; exit 1; }
port=$(sed 's/.*://' "$work/port")
expect_refusal 1 "in use" --port "$port"

# Bounded: it stops by itself and says what it carried (nothing here).
start=$(date +%s%N)
"$fabric" --port 0 --seconds 0.3 > "$work/out" 2>&1
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "packets in 0 out 0" "$work/out" || { echo "FAIL: no closing line:"; cat "$work/out"; exit 1; }
(( elapsed_ms < 5000 )) || { echo "FAIL: --seconds 0.3 ran ${elapsed_ms} ms"; exit 1; }
echo "PASS: spray-fabric refuses bad options and stops by itself"
