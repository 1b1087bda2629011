#!/usr/bin/env bash
# spray-sim from the command line: a scenario file plus overriding options, two path
# selectors compared, and every output written (table, JSON, CSV, three SVG plots);
# bad input gets a clear error and exit status 2.
# Usage: spray_sim_cli.sh SPRAY_SIM
set -euo pipefail
sim=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/scenario.json" <<'JSON'
{"topology": {"kind": "fat_tree", "k": 4, "host_gbps": 100, "fabric_gbps": 100},
 "traffic": {"pattern": "permutation", "flow_bytes": 262144},
 "failures": [{"at_us": 10, "tier": 2, "links": 1, "rate": 0}], "seed": 7}
JSON
"$sim" --scenario "$dir/scenario.json" --paths ecmp,reps --flow-bytes 524288 --no-progress \
  --json "$dir/out.json" --csv "$dir/flows.csv" --svg "$dir/plot" | tee "$dir/table.txt"
grep -q "3-tier fat-tree k=4 (16 hosts" "$dir/table.txt" || { echo "FAIL: no header"; exit 1; }
grep -q "524288 B per flow" "$dir/table.txt" || { echo "FAIL: --flow-bytes did not override"; exit 1; }
grep -qE "^ +reps +nscc +16/16" "$dir/table.txt" || { echo "FAIL: reps did not complete every flow"; exit 1; }
[[ $(grep -c '"paths"' "$dir/out.json") == 2 ]] || { echo "FAIL: want two summaries"; exit 1; }
grep -q '"dead_path_use_us"' "$dir/out.json" || { echo "FAIL: no failure reaction in JSON"; exit 1; }
[[ $(wc -l <"$dir/flows.csv") == 33 ]] || { echo "FAIL: want a header and 2 x 16 flows"; exit 1; }
for plot in fct queue goodput; do
  grep -q "<polyline" "$dir/plot-$plot.svg" || { echo "FAIL: empty $plot plot"; exit 1; }
done
rc=0
"$sim" --topology fat_tree --k 5 2>"$dir/err" || rc=$?
[[ $rc == 2 ]] && grep -q "k must be even" "$dir/err" || { echo "FAIL: bad k not refused"; exit 1; }
rc=0
"$sim" --scenario "$dir/missing.json" 2>"$dir/err" || rc=$?
[[ $rc == 2 ]] && grep -q "cannot read" "$dir/err" || { echo "FAIL: missing file not reported"; exit 1; }
echo "PASS: spray-sim CLI"
