#!/usr/bin/env bash
# FI_SPRAY_IFACE end to end: libfabric's fi_pingpong over spray's UDP datapath between two
# network namespaces this script creates and always deletes (trap on EXIT):
#
#          va1 10.66.1.1 ---- vb1 10.66.1.2
#     a                                        b     server address 10.66.9.2 (on b's lo)
#          va2 10.66.2.1 ---- vb2 10.66.2.2
#
# a routes 10.66.9.2 over both links, the route by va1 preferred (metric 10 against 20).
#   1. control: the client binds va2's address (FI_SPRAY_ADDRESS) but no device: its
#      packets leave by the preferred route, va1;
#   2. FI_SPRAY_IFACE=va2 and no address: the client takes va2's address and its sockets
#      are bound to va2, so its packets leave by va2 whatever the metrics say.
# Each run checks its data (-c); the interface counters tell which link carried it.
# Usage: netns_iface.sh PROVIDER_DIR
# Exit 77 (ctest: skipped) when not root, or namespaces or fi_pingpong are unavailable.
set -euo pipefail
dir=$1
skip() { echo "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v fi_pingpong >/dev/null || skip "fi_pingpong (libfabric-bin) is not installed"

tag="spi$$"
a="${tag}a" b="${tag}b"
logs=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$logs"
}
trap cleanup EXIT
ip netns add "$a" 2>/dev/null || skip "cannot create network namespaces here"
ip netns add "$b"
for n in "$a" "$b"; do
  ip -n "$n" link set lo up
  # Replies reach a by va2 from an address a routes by va1: no reverse-path filtering.
  ip netns exec "$n" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
done
for i in 1 2; do
  ip link add "${tag}x" type veth peer name "${tag}y"
  ip link set "${tag}x" netns "$a"
  ip link set "${tag}y" netns "$b"
  ip -n "$a" link set "${tag}x" name "va$i" up
  ip -n "$b" link set "${tag}y" name "vb$i" up
  ip -n "$a" addr add "10.66.$i.1/24" dev "va$i"
  ip -n "$b" addr add "10.66.$i.2/24" dev "vb$i"
done
ip -n "$b" addr add 10.66.9.2/32 dev lo
ip -n "$a" route add 10.66.9.2/32 via 10.66.1.2 dev va1 metric 10
ip -n "$a" route add 10.66.9.2/32 via 10.66.2.2 dev va2 metric 20

tx_packets() { ip netns exec "$a" cat "/sys/class/net/$1/statistics/tx_packets"; }

export FI_PROVIDER_PATH=$dir FI_PROVIDER=spray FI_SPRAY_DATAPATH=udp
iters=400
# pingpong CLIENT_ENV...: one fi_pingpong run, the server in b on 10.66.9.2, the client in
# a with the given environment; sets via1 and via2 to the packets each of a's links sent.
pingpong() {
  local before1 before2
  before1=$(tx_packets va1) before2=$(tx_packets va2)
  ip netns exec "$b" env FI_SPRAY_ADDRESS=10.66.9.2 \
    timeout 60 fi_pingpong -p spray -e rdm -I "$iters" -S 1024 -c -B 47000 > "$logs/server.log" 2>&1 &
  local server=$!
  for _ in $(seq 100); do
    [[ -n $(ip netns exec "$b" ss -Htln "sport = :47000") ]] && break
    sleep 0.1
  done
  if ! ip netns exec "$a" env "$@" timeout 60 fi_pingpong -p spray -e rdm -I "$iters" -S 1024 -c \
      -P 47000 10.66.9.2 > "$logs/client.log" 2>&1; then
    echo "FAIL: fi_pingpong client ($*)"; cat "$logs/client.log" "$logs/server.log"
    kill "$server" 2>/dev/null; exit 1
  fi
  wait "$server" || { echo "FAIL: fi_pingpong server ($*)"; cat "$logs/server.log"; exit 1; }
  via1=$(( $(tx_packets va1) - before1 )) via2=$(( $(tx_packets va2) - before2 ))
}

pingpong FI_SPRAY_ADDRESS=10.66.2.1
echo "control (address 10.66.2.1, no device): va1 sent $via1 packets, va2 $via2"
if (( via1 < iters || via2 >= iters / 10 )); then
  echo "FAIL: without a device the route by va1 should have carried the pingpong"; exit 1
fi
pingpong FI_SPRAY_IFACE=va2
echo "FI_SPRAY_IFACE=va2: va1 sent $via1 packets, va2 $via2"
if (( via2 < iters || via1 >= iters / 10 )); then
  echo "FAIL: sockets bound to va2 should have sent by va2"; exit 1
fi
echo "PASS: FI_SPRAY_IFACE binds the endpoint to its interface and takes its address"
