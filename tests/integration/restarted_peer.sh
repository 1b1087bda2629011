#!/usr/bin/env bash
# A process that restarts at the same address, for real: two spray-endpoint clients, one
# after the other, bound to the same UDP port, send to one server over kernel UDP. The
# second is a new engine where the server knew the first (transport/ses/ses_incarnation.cc):
# the server must take its messages (every one intact, as the first client's were) and
# count one peer restarted. Until 2026-12-07 the server refused the second client's send
# ids as late copies of the first's, and the second client's sends failed.
#
# Runs in a network namespace of its own (unshare --net), so its fixed ports cannot meet
# another test's. Exit 77 (ctest: skipped) when not root or namespaces are unavailable.
# Usage: restarted_peer.sh BUILD_DIR
set -euo pipefail
build=$1
skip() { echo "SKIP: $*"; exit 77; }
tool="$build/tools/spray-endpoint"
[[ -x $tool ]] || { echo "FAIL: $tool not built"; exit 1; }
if [[ -z ${SPRAY_RESTARTED_PEER_NETNS:-} ]]; then
  [[ $(id -u) -eq 0 ]] || skip "needs root for a network namespace of its own"
  unshare --net true 2>/dev/null || skip "cannot create network namespaces here"
  SPRAY_RESTARTED_PEER_NETNS=1 exec unshare --net bash "$0" "$@"
fi
ip link set lo up
out=$(mktemp -d)
trap 'rm -rf "$out"; kill $(jobs -p) 2>/dev/null || true' EXIT

messages=20
bytes=20000  # 14 packets a message
common=(--bytes "$bytes" --window 8 --timeout 20)
"$tool" server --bind 127.0.0.1:4800 "${common[@]}" --messages $((2 * messages)) \
  >"$out/server.json" &
server=$!
sleep 0.2  # the server's socket is bound before the first datagram comes
for run in first second; do
  if ! "$tool" client --bind 127.0.0.1:5000 --connect 127.0.0.1:4800 "${common[@]}" \
      --messages "$messages" >"$out/$run.json"; then
    echo "FAIL: the $run client's sends did not all complete"
    cat "$out/$run.json"
    exit 1
  fi
done
if ! wait "$server"; then
  echo "FAIL: the server did not receive every message intact"
  cat "$out/server.json"
  exit 1
fi
cat "$out/server.json"
grep -q "\"received\":$((2 * messages))," "$out/server.json"
grep -q "\"intact\":$((2 * messages))," "$out/server.json"
grep -q '"peers_restarted":1,' "$out/server.json" || {
  echo "FAIL: the server did not count the second client as a restart of the first"
  exit 1
}
echo "PASS: a client restarted at the same address was heard, every message intact"
