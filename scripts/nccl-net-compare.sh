#!/usr/bin/env bash
# The NCCL net plugin streaming one way between two local processes, the way NCCL's
# proxy drives it (8 messages in flight), over `spray` (its default datapath, auto:
# shared memory between these processes), spray over kernel UDP only, and libfabric's
# `tcp` under the same plugin code, measured in one run (these machines are shared:
# compare ratios, not absolutes). Providers run in turn ROUNDS times; each figure is the
# median of its rounds.
# Usage: scripts/nccl-net-compare.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
export FI_PROVIDER_PATH=$build/provider/lib
peer=$build/tests/nccl_net_peer
pair=$(dirname "$0")/../tests/nccl/nccl_net_pair.sh
sizes=(8 65536 1048576 4194304)
providers=(spray spray:udp tcp)
stream() {  # provider[:datapath] bytes -> MB/s
  local prov=${1%%:*} datapath=auto steps=20000
  [[ $1 == *:* ]] && datapath=${1#*:}
  (( $2 >= 1048576 )) && steps=2000
  SPRAY_NCCL_PROVIDER=$prov FI_SPRAY_DATAPATH=$datapath \
    bash "$pair" "$peer" stream --steps "$steps" --bytes "$2" |
    awk '/^STREAM/ {print $6}'
}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  echo "round $r/$rounds" >&2
  for size in "${sizes[@]}"; do
    for prov in "${providers[@]}"; do
      echo "$prov $size $(stream "$prov" "$size")" >>"$results"
    done
  done
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
printf '%-10s' "bytes"
for prov in "${providers[@]}"; do printf '%14s' "$prov MB/s"; done
for prov in "${providers[@]:0:2}"; do printf '%14s' "$prov/tcp"; done
echo
for size in "${sizes[@]}"; do
  printf '%-10s' "$size"
  declare -A m=()
  for prov in "${providers[@]}"; do
    m[$prov]=$(awk -v p="$prov" -v s="$size" '$1 == p && $2 == s {print $3}' "$results" | median)
    printf '%14.1f' "${m[$prov]}"
  done
  for prov in "${providers[@]:0:2}"; do
    awk -v a="${m[$prov]}" -v b="${m[tcp]}" 'BEGIN {printf "%13.2fx", a / b}'
  done
  echo
done
