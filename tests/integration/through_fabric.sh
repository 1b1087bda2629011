#!/usr/bin/env bash
# Runs a command with every spray packet going through spray-fabric, the software switch
# fabric: starts the daemon with the fault options given, runs the command with
# FI_SPRAY_DATAPATH=fabric and FI_SPRAY_FABRIC pointing at it, stops the daemon, and
# passes only if the command passed, the daemon refused no datagram, and every fault
# asked for really happened (so a run that met no fault cannot pass for one that
# survived them).
# Usage: through_fabric.sh SPRAY_FABRIC [FABRIC OPTIONS...] -- COMMAND [ARGS...]
set -euo pipefail
fabric_bin=$1
shift
fabric_args=()
while [[ $# -gt 0 && $1 != -- ]]; do
  fabric_args+=("$1")
  shift
done
[[ ${1:-} == -- ]] || { echo "usage: through_fabric.sh SPRAY_FABRIC [OPTIONS] -- COMMAND"; exit 2; }
shift

work=$(mktemp -d)
fabric_pid=""
cleanup() {
  [[ -n $fabric_pid ]] && kill "$fabric_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$fabric_bin" --port 0 --port-file "$work/port" --seconds 600 \
  "${fabric_args[@]}" > "$work/fabric.log" 2>&1 &
fabric_pid=$!
for _ in $(seq 100); do
  [[ -s $work/port ]] && break
  kill -0 "$fabric_pid" 2>/dev/null || break
  sleep 0.05
done
[[ -s $work/port ]] || { echo "FAIL: spray-fabric did not start:"; cat "$work/fabric.log"; exit 1; }
export FI_SPRAY_DATAPATH=fabric FI_SPRAY_FABRIC
FI_SPRAY_FABRIC=$(cat "$work/port")
echo "spray-fabric at $FI_SPRAY_FABRIC: ${fabric_args[*]}"

status=0
"$@" || status=$?

kill -TERM "$fabric_pid"
wait "$fabric_pid" || { echo "FAIL: spray-fabric exited with $?"; cat "$work/fabric.log"; exit 1; }
fabric_pid=""
grep -v "listening on" "$work/fabric.log"
(( status == 0 )) || { echo "FAIL: the command exited with $status"; exit "$status"; }

# Every fault asked for happened; nothing was refused at the door. Read from the
# daemon's closing line: "... lost N duplicated N corrupted N reordered N trimmed N ECN N;
# dropped with a path down N, queue full N; refused N".
summary=$(grep "packets in" "$work/fabric.log")
count() { grep -o "$1 [0-9]*" <<<"$summary" | head -1 | awk '{print $NF}'; }
check_happened() {  # OPTION COUNTER
  local option=$1 counter=$2 arg
  for arg in "${fabric_args[@]}"; do
    if [[ $arg == "$option" ]] && (( $(count "$counter") == 0 )); then
      echo "FAIL: $option was asked for but never happened"
      exit 1
    fi
  done
}
check_happened --loss lost
check_happened --duplicate duplicated
check_happened --corrupt corrupted
check_happened --reorder reordered
check_happened --trim trimmed
check_happened --path-down "path down"
(( $(count refused) == 0 )) || { echo "FAIL: spray-fabric refused datagrams"; exit 1; }
echo "PASS: through spray-fabric"
