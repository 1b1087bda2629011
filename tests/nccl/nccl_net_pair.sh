#!/usr/bin/env bash
# Runs two nccl_net_peer processes (a and b) against each other and passes when both
# print PASS. Usage: nccl_net_pair.sh PEER_BINARY SCENARIO [extra peer options...]
set -u
peer=$1
scenario=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 300 "$peer" --me a --dir "$dir" --scenario "$scenario" "$@" > "$dir/a.log" 2>&1 &
a=$!
timeout 300 "$peer" --me b --dir "$dir" --scenario "$scenario" "$@" > "$dir/b.log" 2>&1 &
b=$!
wait $a; ra=$?
wait $b; rb=$?
echo "--- a (exit $ra)"; cat "$dir/a.log"
echo "--- b (exit $rb)"; cat "$dir/b.log"
[ $ra -eq 0 ] && [ $rb -eq 0 ] || exit 1
grep -q '^PASS a' "$dir/a.log" || exit 1
# In peer-dies, b leaves without a word; in exchange it must pass too.
[ "$scenario" = peer-dies ] || grep -q '^PASS b' "$dir/b.log" || exit 1
echo "PASS nccl net pair ($scenario)"
