#!/usr/bin/env bash
# One-way streaming bandwidth through libfabric, side by side in one run (these machines
# are shared and noisy: compare ratios, not absolutes): spray-fi-rate --bytes streams
# 64 KiB and 1 MiB messages, 16 in flight, between two domains of one process over
# `spray` (its default datapath, auto: shared memory here; and kernel UDP only, udp),
# libfabric's `tcp` and `udp;ofi_rxd`. Each round also measures the kernel's own stream
# ceilings between two processes (spray-dp-bench --stream: bare TCP, and bare UDP with
# GSO/GRO whose drops are not resent), so spray:udp's distance to what kernel UDP carries
# at all is in the same run, with what each ceiling's sending process spent (the share of
# a core, CPU time per MB): on loopback the sending core pays for both ends of the kernel's
# stack and bounds the stream. Rows marked @1cpu run spray:udp and tcp with both threads on
# one CPU (--shared-core), as when processes outnumber cores. Providers run in turn,
# ROUNDS times; each figure is the median of its rounds.
# Usage: scripts/fi-stream-compare.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
export FI_PROVIDER_PATH=$(cd "$build/provider/lib" && pwd)
rate="$build/tools/spray-fi-rate"
run() {  # provider[:datapath][@1cpu] bytes messages -> MB/s
  local name=${1%@1cpu} shared=()
  [[ $1 == *@1cpu ]] && shared=(--shared-core)
  export FI_SPRAY_DATAPATH=auto
  [[ $name == *:* ]] && FI_SPRAY_DATAPATH=${name#*:}
  timeout 120 "$rate" --provider "${name%%:*}" --bytes "$2" --window 16 --messages "$3" \
    "${shared[@]}" | awk '{print $(NF-1)}'
}
providers=(spray spray:udp tcp "udp;ofi_rxd" spray:udp@1cpu tcp@1cpu)
# One line per provider and round: "PROVIDER MB/s_64KiB MB/s_1MiB".
for ((r = 1; r <= rounds; ++r)); do
  (( rounds > 1 )) && echo "round $r/$rounds" >&2
  for prov in "${providers[@]}"; do
    scale=1
    [[ $prov == "udp;ofi_rxd" || $prov == *@1cpu ]] && scale=10  # slower: fewer messages
    echo "$prov $(run "$prov" 65536 $((30000 / scale))) $(run "$prov" 1048576 $((3000 / scale)))"
  done
  # Read when it has ended: a parser starting beside it would take CPU from its processes.
  ceilings=$("$build/tools/spray-dp-bench" --stream 65536 1048576 --seconds 1 --json)
  python3 -c '
import json, sys
r = {row["bytes"]: row for row in json.load(sys.stdin)}
for kind in ("tcp", "udp"):
    for figure, name in (("mb_per_s", "plain-%s"), ("sender_busy", "sender-busy:plain-%s"),
                         ("sender_us_per_mb", "sender-us/MB:plain-%s")):
        key = kind + "_" + figure
        print(name % kind, r[65536][key], r[1048576][key])' <<<"$ceilings"
done | python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    prov, *values = line.split()
    rows.setdefault(prov, []).append([float(v) for v in values])
med = {p: [statistics.median(r[i] for r in rs) for i in range(2)] for p, rs in rows.items()}
print("%-14s %14s %14s   (MB/s, medians of %d rounds)" % (
    "provider", "64KiB", "1MiB", len(next(iter(rows.values())))))
for p, (bw64, bw1m) in med.items():
    if not p.startswith("sender-"):
        print("%-14s %14.1f %14.1f" % (p, bw64, bw1m))
# The sending process of each ceiling: the share of a core it kept busy, and its CPU time
# per delivered MB. Busy near 1.0 means the sending core is what bounds the stream.
for kind in ("tcp", "udp"):
    busy, cost = med["sender-busy:plain-" + kind], med["sender-us/MB:plain-" + kind]
    print("plain-%s sender: busy %.2f / %.2f of a core, %.0f / %.0f CPU us per MB (64KiB / 1MiB)"
          % (kind, busy[0], busy[1], cost[0], cost[1]))
t = med["tcp"]
for p in ("spray", "spray:udp", "udp;ofi_rxd"):
    print("%s/tcp: 64KiB %.2fx, 1MiB %.2fx (issue 3 target: spray:udp >= 1.5x at 1MiB)" % (
        p, med[p][0] / t[0], med[p][1] / t[1]))
s1, t1 = med["spray:udp@1cpu"], med["tcp@1cpu"]
print("one CPU for both threads, spray:udp/tcp: 64KiB %.2fx, 1MiB %.2fx" % (
    s1[0] / t1[0], s1[1] / t1[1]))
u, s = med["plain-udp"], med["spray:udp"]
print("kernel ceilings: plain-udp/plain-tcp 64KiB %.2fx, 1MiB %.2fx; spray:udp reaches %.0f%% / "
      "%.0f%% of plain-udp" % (u[0] / med["plain-tcp"][0], u[1] / med["plain-tcp"][1],
                               100 * s[0] / u[0], 100 * s[1] / u[1]))
'
