#!/usr/bin/env bash
# fi_pingpong latency and bandwidth of `spray` (its default datapath, auto: shared memory
# between these local processes; then kernel UDP over loopback only, and shared memory
# only) beside libfabric's own providers, measured in one run (these machines are shared:
# compare ratios, not absolutes). With ROUNDS > 1 the providers run in turn ROUNDS times
# and each figure is the median of its rounds, so one noisy moment does not decide a ratio.
# The last row, plain-udp, is no provider: two processes bouncing the message over bare
# kernel UDP sockets (spray-dp-bench --pingpong), the ceiling for any transport on
# kernel UDP, so spray:udp's distance to it is measured in the same run.
# Usage: scripts/fi-pingpong-compare.sh [BUILD_DIR] [ITERATIONS] [ROUNDS]
set -euo pipefail
build=${1:-build}
iters=${2:-2000}
rounds=${3:-1}
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
providers=(spray spray:udp spray:shm tcp "udp;ofi_rxd" sockets)
# One line per provider and round: "PROVIDER LATENCY_US BW64K_MBPS BW1M_MBPS".
for ((r = 1; r <= rounds; ++r)); do
  (( rounds > 1 )) && echo "round $r/$rounds" >&2
  for prov in "${providers[@]}"; do
    read -r lat _ <<<"$(run "$prov" rdm 8)"
    read -r _ bw64 <<<"$(run "$prov" rdm 65536)"
    read -r _ bw1m <<<"$(run "$prov" rdm 1048576)"
    echo "$prov ${lat:-nan} ${bw64:-nan} ${bw1m:-nan}"
  done
  # Read when it has ended: a parser starting beside it would take CPU from its processes.
  ceiling=$("$build/tools/spray-dp-bench" --pingpong 8 65536 1048576 \
    --pingpong-iterations "$iters" --json)
  python3 -c '
import json, sys
r = {row["bytes"]: row for row in json.load(sys.stdin)}
print("plain-udp %.2f %.2f %.2f" % (r[8]["one_way_us"], r[65536]["mb_per_s"],
                                   r[1048576]["mb_per_s"]))' <<<"$ceiling"
done | python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    prov, *values = line.split()
    rows.setdefault(prov, []).append([float(v) for v in values])
med = {p: [statistics.median(r[i] for r in rs) for i in range(3)] for p, rs in rows.items()}
print("%-14s %12s %14s %14s   (medians of %d rounds)" % (
    "provider", "8B usec", "64KiB MB/s", "1MiB MB/s", len(next(iter(rows.values())))))
for p, (lat, bw64, bw1m) in med.items():
    print("%-14s %12.2f %14.2f %14.2f" % (p, lat, bw64, bw1m))
t = med["tcp"]
for p in ("spray", "spray:udp", "spray:shm"):
    lat, bw64, bw1m = med[p]
    print("%s/tcp: latency %.2fx (target <= 0.8), 64KiB bandwidth %.2fx, 1MiB bandwidth %.2fx"
          " (target >= 1.5)" % (p, lat / t[0], bw64 / t[1], bw1m / t[2]))
u, s = med["plain-udp"], med["spray:udp"]
print("plain-udp/tcp (the kernel-UDP ceiling): 1MiB bandwidth %.2fx; spray:udp reaches %.0f%% "
      "of it" % (u[2] / t[2], 100 * s[2] / u[2]))
'
