#!/usr/bin/env bash
# Collectives over spray with UET TSS (FI_SPRAY_TSS_KEY_FILE): every packet sealed.
#  1. `spray-run --secure` gives the ranks a key of the launch's own, in a 0600 file that
#     is gone afterwards; with it 4 ranks' all-to-all and all-reduce are right to the
#     element, and the endpoints sealed and opened packets and refused none.
#  2. Two ranks with different keys cannot reach each other: the collective fails with
#     "peer unreachable" within its retries, and the receivers counted forged packets.
#  3. A key file that holds no key: the endpoint is refused with the reason.
# Usage: secured_ranks.sh SPRAY_RUN SPRAY_COLL_PERF DATAPATH
set -euo pipefail
run=$1 perf=$2
export FI_SPRAY_DATAPATH=$3 FI_LOG_LEVEL=info
unset FI_SPRAY_TSS_KEY_FILE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $1"; [[ -n ${2:-} ]] && echo "$2"; exit 1; }

# 1. One launch, one key: a file of mode 600 that is gone when the launch ends.
key_out=$("$run" -n 1 --secure bash -c 'echo "key $FI_SPRAY_TSS_KEY_FILE $(stat -c %a "$FI_SPRAY_TSS_KEY_FILE") $(wc -c <"$FI_SPRAY_TSS_KEY_FILE")"')
read -r _ _ key_file mode bytes <<<"$key_out"
[[ $mode == 600 && $bytes == 65 ]] || fail "the launch's key file is not a 0600 file of 64 hex digits" "$key_out"
[[ ! -e $key_file ]] || fail "spray-run --secure left its key file $key_file behind"
for coll in alltoall allreduce; do
  out=$("$run" -n 4 --secure --provider spray --timeout 120 "$perf" --coll "$coll" --sizes 4K,1M \
        --check 2>&1)
  rows=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/' <<<"$out")
  if [[ $(wc -l <<<"$rows") != 2 ]] || awk '$9 != 0 {bad = 1} END {exit !bad}' <<<"$rows"; then
    fail "$coll over secured $3" "$out"
  fi
  # Each endpoint logs its TSS counters when it closes (FI_LOG_LEVEL=info).
  sealed=$(grep -o 'TSS sealed [0-9]* opened [0-9]*, refused: not secured [0-9]* other domain [0-9]* replayed [0-9]* forged [0-9]*' <<<"$out" || true)
  [[ $(wc -l <<<"$sealed") -ge 4 ]] || fail "$coll: fewer than 4 secured endpoints logged" "$out"
  if awk '$3 == 0 || $5 == 0 || $9 + $12 + $14 + $16 != 0 {bad = 1} END {exit !bad}' <<<"$sealed"; then
    fail "$coll: an endpoint sealed or opened nothing, or refused packets" "$sealed"
  fi
  echo "$rows"
  head -1 <<<"$sealed"  # no pipe: bash writes echo's lines one by one, and a head that
  # exited after the first would fail the test with SIGPIPE under pipefail
done

# 2. Two keys: rank r reads key r.
for r in 0 1; do
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/key$r"
  chmod 600 "$work/key$r"
done
cat >"$work/own_key.sh" <<EOS
#!/usr/bin/env bash
export FI_SPRAY_TSS_KEY_FILE=$work/key\$SPRAY_RANK
exec "\$@"
EOS
chmod +x "$work/own_key.sh"
start=$SECONDS
status=0
out=$(FI_SPRAY_RETRIES=6 "$run" -n 2 --provider spray --timeout 60 --keep-going "$work/own_key.sh" \
      "$perf" --coll allreduce --sizes 64 --check 2>&1) || status=$?
((status != 0)) || fail "ranks of different keys completed a collective" "$out"
grep -q "peer unreachable" <<<"$out" || fail "no 'peer unreachable' from ranks of different keys" "$out"
grep -Eq 'forged [1-9]' <<<"$out" || fail "the ranks counted no forged packets" "$out"
echo "different keys: failed as unreachable after $((SECONDS - start)) s"

# 3. Not a key.
echo "not a key" >"$work/bad"
chmod 600 "$work/bad"
status=0
out=$(FI_SPRAY_TSS_KEY_FILE=$work/bad "$run" -n 2 --provider spray --timeout 60 "$perf" \
      --coll allreduce --sizes 64 2>&1) || status=$?
((status != 0)) || fail "ranks ran with a key file that holds no key" "$out"
grep -q "does not hold a key" <<<"$out" || fail "the bad key file was not named as the cause" "$out"
echo "a bad key file: refused"
echo "PASS secured collectives over $3"
