#!/usr/bin/env bash
# Open MPI (pml cm, mtl ofi) over `spray` (default datapath auto: shared memory between
# local ranks; and kernel UDP on loopback only) beside Open MPI over libfabric's `tcp`
# and `udp;ofi_rxd`, in one run: 8 B pingpong latency, 64 KiB and 1 MiB streaming
# bandwidth, from the MPI test program's --bench mode. Ratios are what to compare
# (shared, noisy machines). Each round also measures the kernel's own stream ceilings
# (spray-dp-bench --stream: bare TCP and bare UDP with GSO/GRO between two processes, no
# transport), so spray:udp's distance to what kernel UDP carries at all is in the same run.
# Usage: scripts/mpi-compare.sh [BUILD_DIR] [ITERATIONS] [ROUNDS]
set -euo pipefail
build=${1:-build}
iters=${2:-20000}
rounds=${3:-2}
export FI_PROVIDER_PATH=$(cd "$build/provider/lib" && pwd)
root_flag=()
[[ $(id -u) == 0 ]] && root_flag=(--allow-run-as-root)
run() {  # provider[:datapath]
  export FI_SPRAY_DATAPATH=auto
  [[ $1 == *:* ]] && FI_SPRAY_DATAPATH=${1#*:}
  timeout 600 mpirun "${root_flag[@]}" -np 2 -x FI_PROVIDER_PATH -x FI_SPRAY_DATAPATH \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "${1%%:*}" --mca btl self \
    "$build/tests/mpi_transport_test" \
    --bench "$iters" 2>/dev/null | grep '^{'
}
for ((r = 1; r <= rounds; ++r)); do  # alternate providers so drift hits both alike
  for prov in spray spray:udp tcp "udp;ofi_rxd"; do echo "$prov $(run "$prov")"; done
  # Read when it has ended: a parser starting beside it would take CPU from its processes.
  ceilings=$("$build/tools/spray-dp-bench" --stream 65536 1048576 --seconds 1 --json)
  python3 -c '
import json, sys
r = {row["bytes"]: row for row in json.load(sys.stdin)}
for kind in ("tcp", "udp"):
    print("plain-%s {\"bandwidth_64KiB_MBps\": %.1f, \"bandwidth_1MiB_MBps\": %.1f}"
          % (kind, r[65536][kind + "_mb_per_s"], r[1048576][kind + "_mb_per_s"]))' <<<"$ceilings"
done | tee /dev/stderr | python3 -c '
import json, sys
best = {}
for line in sys.stdin:
    prov, js = line.split(" ", 1)
    r = json.loads(js)
    b = best.setdefault(prov, {"lat": 1e9, "bw64": 0, "bw1m": 0})
    b["lat"] = min(b["lat"], r.get("latency_8B_usec", 1e9))
    b["bw64"] = max(b["bw64"], r["bandwidth_64KiB_MBps"])
    b["bw1m"] = max(b["bw1m"], r["bandwidth_1MiB_MBps"])
t = best["tcp"]
for prov in ("spray", "spray:udp"):
    s = best[prov]
    print("best of each: %s/tcp latency %.2fx, 64KiB bandwidth %.2fx, 1MiB bandwidth %.2fx"
          % (prov, s["lat"] / t["lat"], s["bw64"] / t["bw64"], s["bw1m"] / t["bw1m"]))
r, s = best["udp;ofi_rxd"], best["spray:udp"]
print("best of each: spray:udp/udp;ofi_rxd 64KiB bandwidth %.2fx, 1MiB bandwidth %.2fx"
      % (s["bw64"] / r["bw64"], s["bw1m"] / r["bw1m"]))
u, k = best["plain-udp"], best["plain-tcp"]
print("kernel stream ceilings (no transport): plain-udp/plain-tcp 64KiB %.2fx, 1MiB %.2fx; "
      "spray:udp reaches %.0f%% / %.0f%% of plain-udp"
      % (u["bw64"] / k["bw64"], u["bw1m"] / k["bw1m"], 100 * s["bw64"] / u["bw64"],
         100 * s["bw1m"] / u["bw1m"]))
'
