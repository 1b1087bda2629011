#!/usr/bin/env bash
# The tuner calibrated on the running fabric, end to end: `spray-coll-perf --calibrate`
# over 3 ranks (not a power of two) times every all-reduce and all-to-all algorithm at
# its four sizes and prints one table per collective with the tuner's pick per size; a
# run given that file (SPRAY_COLL_TUNING) then names the same pick in its 1 MiB row, and
# its results are checked (--check); on another of spray's datapaths the same file is used
# with a warning naming both. A file whose measured times name no algorithm is
# refused with an error naming it (spray-run then stops the other ranks), and so is a
# calibration into a path that cannot be written, before it measures anything.
# Usage: calibrate.sh SPRAY_RUN SPRAY_COLL_PERF
set -euo pipefail
run=$1 perf=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$run" -n 3 --provider spray --timeout 300 "$perf" --calibrate "$dir/model.json" \
  >"$dir/calibrate.out" 2>&1 || { cat "$dir/calibrate.out"; fail "calibration failed"; }
cat "$dir/calibrate.out"
# Rows: "[0]   SIZE  T1 .. Tk  PICK", k = 5 for all-reduce, 3 for all-to-all.
rows() {  # rows TITLE COLUMNS
  awk -v title="$1" -v k="$2" '/ ranks: measured time/ {within = index($0, "# " title ",") > 0}
    within && $1 == "[0]" && $2 ~ /^[0-9]+$/ && NF == k + 3' "$dir/calibrate.out"
}
[[ $(rows all-reduce 5 | wc -l) -eq 4 ]] || fail "the all-reduce table has not 4 full rows"
[[ $(rows all-to-all 3 | wc -l) -eq 4 ]] || fail "the all-to-all table has not 4 full rows"
for algo in ring recursive_doubling rabenseifner double_binary_tree two_shot pairwise bruck \
  spread_out; do
  grep -q "\"$algo\"" "$dir/model.json" || fail "model.json holds no times of $algo"
done
pick=$(rows all-reduce 5 | awk '$2 == 1048576 {print $NF}')
[[ -n $pick ]] || fail "no tuner's pick at 1 MiB"

SPRAY_COLL_TUNING=$dir/model.json "$run" -n 3 --provider spray --timeout 300 "$perf" \
  --sizes 4K,1M -n 3 -w 1 --check >"$dir/run.out" 2>&1 ||
  { cat "$dir/run.out"; fail "the calibrated run failed"; }
cat "$dir/run.out"
fabric=spray:${FI_SPRAY_DATAPATH:-auto}
grep -q "cost model: spray-coll-perf --calibrate: 3 ranks over '$fabric'" "$dir/run.out" ||
  fail "the run did not use the calibrated model"
ran=$(awk '$1 == "[0]" && $2 == 1048576 {print $NF}' "$dir/run.out")
[[ $ran == "$pick" ]] || fail "1 MiB ran $ran where calibration picked $pick"
grep -q "warning: cost model" "$dir/run.out" && fail "a warning on the fabric it was measured on"

# The same file on another of spray's datapaths: used, with a warning naming both.
other=udp
[[ ${FI_SPRAY_DATAPATH:-auto} == udp ]] && other=auto
FI_SPRAY_DATAPATH=$other SPRAY_COLL_TUNING=$dir/model.json "$run" -n 3 --provider spray \
  --timeout 120 "$perf" --sizes 4K -n 2 -w 1 --check >"$dir/other.out" 2>&1 ||
  { cat "$dir/other.out"; fail "the run on another datapath failed"; }
cat "$dir/other.out"
grep -q "warning: cost model $dir/model.json was measured over '$fabric', this run is over 'spray:$other'" \
  "$dir/other.out" || fail "no warning that the model was measured over another datapath"

# A file that cannot be written fails at once, on every rank, and says so.
rc=0
"$run" -n 3 --provider spray --timeout 60 "$perf" --calibrate /nonexistent/dir/model.json \
  >"$dir/unwritable.out" 2>&1 || rc=$?
cat "$dir/unwritable.out"
[[ $rc -ne 0 ]] || fail "calibrating into an unwritable path succeeded"
grep -q "cannot write '/nonexistent/dir/model.json'" "$dir/unwritable.out" ||
  fail "the unwritable path is not named"
grep -q "measured time per call" "$dir/unwritable.out" && fail "it measured before failing"

# A measured time under a name that is no algorithm: refused, and the error names it.
sed 's/"two_shot"/"butterfly"/' "$dir/model.json" >"$dir/bad.json"
rc=0
SPRAY_COLL_TUNING=$dir/bad.json "$run" -n 3 --provider spray --timeout 60 "$perf" --sizes 4K \
  >"$dir/bad.out" 2>&1 || rc=$?
cat "$dir/bad.out"
[[ $rc -ne 0 ]] || fail "a model naming no algorithm was accepted"
grep -q 'CollectiveError: .*unusable cost model: .*"butterfly" is not an algorithm' "$dir/bad.out" ||
  fail "the error does not name the bad entry"
echo "PASS: calibrated tuner picks what it measured"
