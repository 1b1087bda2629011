#!/usr/bin/env bash
# Random spray-transfer configurations, one per seed: what fixed test cases miss. Every
# liveness and memory bug found in PDS and SES since spray-transfer gained all-to-all
# and small PDC tables came from sweeps like this one.
#   clean   no path dies: loss up to 10 %, trims, reordering, duplicates, corruption,
#           any path selector, nscc or fixed, ring or all-to-all, 2-9 PDCs an engine,
#           messages of 0 B to 1 MiB, message tables of 4-64 slots in a third of runs,
#           moved by sends, or in half of runs by RMA writes, reads or both; a third
#           of the runs with sends inject them, one at a time (held ACKs).
#           Every run must deliver everything (exit 0).
#   faults  as clean with 2-4 paths, path 0 dying in half the runs. A selector on a
#           dead path may fail operations (exit 1); every operation must still end
#           (exit 2 means one never did) and nothing may crash.
# In both, PDS may never report on a message SES has already ended (exit 3), and a send
# may never complete OK while its receive fails (exit 4).
# A run's configuration depends on its seed alone (xorshift32 here, not bash's RANDOM,
# whose sequence differs between bash versions), so a failure repeats from its line.
# Prints each run that broke its rule with its command and the end of its output;
# exits 1 if any did.
# Usage: scripts/transfer-sweep.sh SPRAY_TRANSFER clean|faults FIRST LAST
set -uo pipefail
transfer=$1
kind=$2
first=$3
last=$4
[[ $kind == clean || $kind == faults ]] || { echo "kind must be clean or faults"; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Under a sanitizer build a report must not pass for exit 1, which `faults` allows.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=99"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:exitcode=98"

state=1
draw() {  # draw N: r = a pseudo-random integer in [0, N); advances the state (xorshift32)
  state=$((state ^ ((state << 13) & 0xffffffff)))
  state=$((state ^ (state >> 17)))
  state=$((state ^ ((state << 5) & 0xffffffff)))
  r=$((state % $1))
}
seed_state() {  # seed_state SEED: a nonzero state that differs in every bit between seeds
  state=$(((($1 + 1) * 2654435761) & 0xffffffff))
  draw 2
  draw 2
}
pick() {  # pick WORD...: r = one of the words
  draw $#
  local words=("$@")
  r=${words[$r]}
}

broken=0
ended_in_error=0  # runs that exited 1: allowed in faults, where a path dies
for ((seed = first; seed <= last; ++seed)); do
  seed_state "$seed"
  args=(--seed "$seed")
  draw 9; args+=(--hosts $((2 + r)))
  draw 8; args+=(--max-pdcs $((2 + r)))
  pick reps reps oblivious ecmp ecmp_repath bitmap; selector=$r
  pick nscc nscc fixed; args+=(--path-selection "$selector" --cc "$r")
  draw 11; args+=(--loss "0.$(printf %02d $r)")
  draw 4; args+=(--trim "0.$(printf %02d $r)")
  draw 30; args+=(--reorder "0.$(printf %02d $r)")
  draw 10; args+=(--duplicate "0.$(printf %02d $r)")
  draw 10; args+=(--corrupt "0.$(printf %03d $r)")
  pick 0 1 1000 4097 70000 262144 1048576; args+=(--bytes "$r")
  draw 16; args+=(--messages $((1 + r)))
  draw 2; ((r == 0)) && args+=(--all-to-all)
  allowed="0"
  if [[ $kind == faults ]]; then
    draw 3; args+=(--paths $((2 + r)))
    draw 2
    if ((r == 0)); then
      args+=(--path-down)
      allowed="0 1"
    fi
  else
    draw 4; args+=(--paths $((1 + r)))
  fi
  # Drawn last, so that the draws above give each seed the configuration it had before
  # message tables (a third of runs: 4-64 slots for sends and for receives) and RMA
  # (half of runs: writes, reads or all three in turn instead of sends) were swept.
  draw 3
  if ((r == 0)); then
    pick 4 5 8 16 64; args+=(--message-slots "$r")
  fi
  pick send send send write read mixed; args+=(--operation "$r")
  # Drawn after everything else for the same reason: a third of the runs with sends
  # inject them one at a time, so held ACKs meet the faults (added 2026-11-29).
  if [[ $r == send || $r == mixed ]]; then
    draw 3
    ((r == 0)) && args+=(--inject)
  fi
  "$transfer" "${args[@]}" >"$out" 2>&1
  rc=$?
  ((rc == 1)) && ended_in_error=$((ended_in_error + 1))
  if [[ " $allowed " != *" $rc "* ]]; then
    broken=$((broken + 1))
    echo "exit $rc (allowed: $allowed): $transfer ${args[*]}"
    tail -n 12 "$out" | sed 's/^/    /'
  fi
done
echo "$kind seeds $first-$last: $broken broke their rule; $ended_in_error ended with some operations failed"
((broken == 0))
