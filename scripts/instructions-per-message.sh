#!/usr/bin/env bash
# Instructions per delivered 64 B message (both engines, ACKs included), counted by
# callgrind: repeatable on a shared, noisy machine where wall-clock rates are not.
# Usage: scripts/instructions-per-message.sh [build-dir]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
valgrind --tool=callgrind --callgrind-out-file="$out" "$build/tests/transport_bench" \
  --benchmark_filter='FixedWork64' 2>/dev/null |
  grep -o 'messages=[0-9.k]*' | tail -1 > "$out.msgs"
python3 - "$out" "$out.msgs" <<'PY'
import re, subprocess, sys
ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", sys.argv[1]], capture_output=True, text=True).stdout
def cost(pattern):
    for line in ann.splitlines():
        if re.search(pattern, line):
            return int(line.split()[0].replace(",", ""))
    return 0
bench = cost(r"BM_SmallMessagePacketRate\(benchmark::State&\)")
setup = cost(r"Pair::Pair\(\)")
m = open(sys.argv[2]).read().strip().split("=")[1]
msgs = float(m[:-1]) * 1000 if m.endswith("k") else float(m)
print(f"{(bench - setup) / msgs:.0f} instructions per message ({msgs:.0f} messages)")
PY
