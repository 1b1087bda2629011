#!/usr/bin/env bash
# spray-transfer's outcomes end to end: every byte intact where paths survive (exit 0),
# and where they cannot - plain ECMP keeps each flow on its one path, and that path dies
# mid-run - every operation still ends, with an error (exit 1), never runs to the
# 60 s virtual-time limit (exit 2). Seed 1052 is a case that ran to the limit before
# a PDS that gave a peer up also forgot the PDCs that peer had opened to it: the peer's
# probes were answered while the answers it waited for were lost.
# Usage: spray_transfer_ends.sh SPRAY_TRANSFER
set -uo pipefail
transfer=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
common=(--paths 4 --messages 20 --reorder 0.1 --duplicate 0.02 --corrupt 0.01
        --trim 0.02 --path-down)
"$transfer" "${common[@]}" --hosts 4 --bytes 230789 --loss 0.07 --path-selection reps --seed 1052 \
  >"$out" 2>&1
rc=$?
[[ $rc == 0 ]] || { cat "$out"; fail "reps over a dying path: exit $rc, not 0"; }
# All-to-all among 5 hosts with three PDCs per engine, where each talks to 4 peers:
# idle PDCs close for room all the time, and still every byte arrives.
"$transfer" "${common[@]}" --hosts 5 --bytes 150001 --loss 0.05 --path-selection reps \
  --max-pdcs 3 --all-to-all --seed 3 >"$out" 2>&1
rc=$?
[[ $rc == 0 ]] || { cat "$out"; fail "all-to-all with three PDCs per engine: exit $rc, not 0"; }
grep -Eq "PDCs .* [1-9][0-9]* closed for room" "$out" ||
  { cat "$out"; fail "three PDCs per engine: no PDC was closed for room"; }
for seed in 1012 1032 1052; do
  "$transfer" "${common[@]}" --hosts 4 --bytes $(( (seed * 7919) % 300000 + 1 )) --loss 0.0$((seed % 9)) \
    --path-selection ecmp --seed "$seed" >"$out" 2>&1
  rc=$?
  if [[ $rc != 1 ]]; then
    tail -n 8 "$out"
    fail "ecmp over a dying path, seed $seed: exit $rc, not 1 (ended with errors)"
  fi
  grep -q "peer unreachable" "$out" ||
    fail "ecmp seed $seed: no operation reported 'peer unreachable'"
done
# All-to-all with four PDCs per engine over two paths, one dying, and a selector that
# keeps using it: a peer closed its PDC for room while our answers on it failed, and
# waited for them forever through the PDC its probe opened next (before the PDS told a
# peer whose answers it gave up, pds_lost_answers.cc).
"$transfer" --hosts 6 --max-pdcs 4 --path-selection bitmap --loss 0 --bytes 1048576 \
  --messages 17 --path-down --paths 2 --trim 0.01 --seed 9 --all-to-all >"$out" 2>&1
rc=$?
[[ $rc == 1 || $rc == 0 ]] || { tail -n 12 "$out"; fail "all-to-all, bitmap, seed 9: exit $rc"; }
# Hosts 0 and 1 each had a send fail as path 0 died, and each one's MSG_ERR (telling the
# other to skip that send id) failed once on the dead path. Counted as a lost answer,
# that made each refuse the other's SYNs, so every later MSG_ERR was refused as well,
# and host 0's sends acknowledged after the failed one waited at host 1 for good.
"$transfer" --seed 21411 --hosts 3 --max-pdcs 4 --path-selection ecmp --cc nscc --loss 0.03 \
  --trim 0.02 --reorder 0.28 --duplicate 0.05 --corrupt 0.005 --bytes 1000 --messages 10 \
  --all-to-all --paths 2 --path-down >"$out" 2>&1
rc=$?
[[ $rc == 1 || $rc == 0 ]] || { tail -n 12 "$out"; fail "MSG_ERRs both ways, seed 21411: exit $rc"; }
# Small SES message tables (the transfer sweep's, 2026-11-28), where the order in which
# hosts issue matters: these were found with one order over all hosts' messages, which
# stops at the first full table (`--issue-order global`), and replay in it. Two hosts full of
# rendezvous sends to each other refused each other's read requests for good, with no
# fault at all (seed 80009 at its simplest), until a rendezvous send brought a promised
# slot for its read response.
"$transfer" --hosts 2 --message-slots 4 --bytes 70000 --messages 2 --loss 0 --reorder 0 \
  --duplicate 0 --corrupt 0 --issue-order global >"$out" 2>&1
rc=$?
[[ $rc == 0 ]] || { tail -n 12 "$out"; fail "rendezvous both ways, 4-slot tables: exit $rc"; }
# Sends refused by a target full of sends waiting behind failed ones filled the user's
# share of the tx table, and the failed ones' MSG_ERRs waited for room in it (seed
# 80352); then a newer MSG_ERR took the one slot beyond the share, refused for good
# while the target waited for an older one (seed 81037).
failing_msg_errs=(
  "--seed 80352 --hosts 9 --max-pdcs 6 --path-selection ecmp --cc fixed --loss 0.05 --trim 0.02
   --reorder 0.08 --duplicate 0.08 --corrupt 0.006 --bytes 4097 --messages 14 --paths 3
   --path-down --message-slots 5 --issue-order global"
  "--seed 81037 --hosts 6 --max-pdcs 3 --path-selection ecmp --cc nscc --loss 0.01 --trim 0.01
   --reorder 0.23 --duplicate 0.04 --corrupt 0.004 --bytes 0 --messages 9 --paths 2
   --path-down --message-slots 4 --issue-order global")
for args in "${failing_msg_errs[@]}"; do
  # shellcheck disable=SC2086  # the words of one command line
  "$transfer" $args >"$out" 2>&1
  rc=$?
  [[ $rc == 1 || $rc == 0 ]] || { tail -n 12 "$out"; fail "MSG_ERRs, small tables ($args): exit $rc"; }
done
# Injects one at a time (--inject), under every fault and a path dying: each goes alone
# on its PDC without ACK-requested, the receiver holds its ACK, and still every
# byte arrives; the ACKs must have been held (one for nearly every message).
"$transfer" "${common[@]}" --hosts 3 --bytes 1000 --loss 0.05 --path-selection reps --seed 5 \
  --inject >"$out" 2>&1
rc=$?
[[ $rc == 0 ]] || { tail -n 12 "$out"; fail "injects over a dying path: exit $rc, not 0"; }
held=$(awk '/ACKs held/ {print $3}' "$out")
((held >= 30)) || { cat "$out"; fail "injects: ${held:-no} ACKs held of 60 messages"; }
# Each host issues its own messages whatever holds up the others: with 8-slot tables the
# same all-to-all ends sooner in virtual time than in the one global order that stops at
# the first full table (0.85 against 1.38 ms on 2026-11-28; deterministic for a seed).
virtual_us() {  # virtual_us ORDER: the run's virtual time in microseconds, or nothing
  "$transfer" --seed 7 --hosts 8 --message-slots 8 --messages 32 --bytes 65536 --loss 0 \
    --all-to-all --issue-order "$1" --json 2>/dev/null |
    awk -F'[:,]' '/"ok": true/ {ok = 1} /"virtual_seconds"/ {v = $2} END {if (ok) printf "%d", v * 1e6}'
}
global_us=$(virtual_us global)
per_host_us=$(virtual_us per-host)
[[ -n $global_us && -n $per_host_us ]] || fail "issue orders: a run did not deliver everything"
((per_host_us < global_us)) ||
  fail "issue orders: per-host took ${per_host_us} us, not less than global's ${global_us}"
echo "PASS: spray-transfer ends every operation"
