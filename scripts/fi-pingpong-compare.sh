#!/usr/bin/env bash
# fi_pingpong latency and bandwidth of `spray` (its default datapath, auto: shared memory
# between these local processes; then kernel UDP over loopback only, and shared memory
# only) beside libfabric's own providers, measured in one run (these machines are shared:
# compare ratios, not absolutes).
# Usage: scripts/fi-pingpong-compare.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
build=${1:-build}
iters=${2:-2000}
export FI_PROVIDER_PATH=$(cd "$build/provider/lib" && pwd)
port=31000
run() {  # provider[:datapath] endpoint size -> usec/xfer and MB/s of the client
  local prov=${1%%:*} ep=$2 size=$3 n=$iters
  local datapath=auto
  [[ $1 == *:* ]] && datapath=${1#*:}
  export FI_SPRAY_DATAPATH=$datapath
  # 1 MiB runs a quarter as many rounds: enough for tcp to reach its steady rate (its
  # 1 MiB figure grew from 2.6 to 4.0 GB/s between 200 and 500 rounds; ours did not).
  (( size >= 1048576 )) && n=$(( iters / 4 > 20 ? iters / 4 : 20 ))
  port=$((port + 1))
  timeout 120 fi_pingpong -p "$prov" -e "$ep" -I "$n" -S "$size" -B "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  local line
  line=$(timeout 120 fi_pingpong -p "$prov" -e "$ep" -I "$n" -S "$size" -P "$port" 127.0.0.1 2>/dev/null | tail -1)
  wait "$server" 2>/dev/null || true
  awk '{print $7, $6}' <<<"$line"
}
printf "%-14s %12s %14s %14s\n" provider "8B usec" "64KiB MB/s" "1MiB MB/s"
declare -A lat bw64 bw1m
for prov in spray spray:udp spray:shm tcp "udp;ofi_rxd" sockets; do
  read -r lat[$prov] _ <<<"$(run "$prov" rdm 8)"
  read -r _ bw64[$prov] <<<"$(run "$prov" rdm 65536)"
  read -r _ bw1m[$prov] <<<"$(run "$prov" rdm 1048576)"
  printf "%-14s %12s %14s %14s\n" "$prov" "${lat[$prov]}" "${bw64[$prov]}" "${bw1m[$prov]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
for prov in spray spray:udp spray:shm; do
  echo "$prov/tcp: latency $(ratio "${lat[$prov]}" "${lat[tcp]}")x (target <= 0.8)," \
       "64KiB bandwidth $(ratio "${bw64[$prov]}" "${bw64[tcp]}")x," \
       "1MiB bandwidth $(ratio "${bw1m[$prov]}" "${bw1m[tcp]}")x (target >= 1.5)"
done
