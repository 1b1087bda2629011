#!/usr/bin/env bash
# The simulator benchmarks of issue 6 (4 KiB MTU, 64 entropy values), one after the
# other, with the wall time of each. Not a test: it prints what it measures.
# Usage: scripts/sim-bench.sh [BUILD_DIR]
set -euo pipefail
sim=${1:-build}/tools/spray-sim
run() {
  echo "## $1"
  shift
  /usr/bin/time -f "# wall %e s, peak RSS %M KB" "$sim" --no-progress "$@"
  echo
}
run "1. k=16 fat-tree, 400G, permutation, 2 MB flows" \
  --topology fat_tree --k 16 --traffic permutation --flow-bytes 2000000 \
  --paths ecmp,ecmp_repath,oblivious,reps
run "2. incast 127->1, 2 MB each, 100G: NSCC alone, RCCC alone, both, DCQCN" \
  --topology leaf_spine --hosts 128 --hosts-per-leaf 32 --spines 8 --gbps 100 --fabric-gbps 100 \
  --traffic incast --incast-senders 127 --flow-bytes 2000000 --paths reps --cc nscc,rccc,nscc_rccc,dcqcn
run "3. the same fat-tree with 8 core links at 10 % of their rate" \
  --topology fat_tree --k 16 --traffic permutation --flow-bytes 2000000 --paths oblivious,reps \
  --fail 0:2:8:0.1
run "4. a core link failing at 20 us (400G): how long senders keep using it" \
  --topology fat_tree --k 16 --traffic permutation --flow-bytes 2000000 --paths oblivious,reps \
  --fail 20:2:1:0
run "5. simulator cost: 8192-host leaf-spine, 400G, permutation, 1 MB flows" \
  --topology leaf_spine --hosts 8192 --hosts-per-leaf 64 --spines 64 --traffic permutation \
  --flow-bytes 1000000 --paths reps
