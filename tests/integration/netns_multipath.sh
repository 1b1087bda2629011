#!/usr/bin/env bash
# Real multipath over kernel UDP, in network namespaces this script creates and always
# deletes (trap on EXIT, even on failure):
#
#          +-- r1 --+
#    h1 ---|        |--- h2        h1: 10.9.0.1 (on lo), h2: 10.9.0.2 (on lo)
#          +-- r2 --+              h1 and h2 route to each other over both routers
#                                  (ECMP, fib_multipath_hash_policy=1: L4 hashing)
#
# Usage: netns_multipath.sh BUILD_DIR TEST
#   spray     every path carries a share of the traffic (interface counters)
#   linkdown  h1's link to r1 goes down mid-transfer; the transfer completes intact
#   nftdrop   r1 drops a random 5 % of what it forwards; transfers complete intact
#   ecn       r1 marks CE on every datagram it forwards (ECT(0) -> CE), as a congested
#             switch would; the receiver reads the marks from the IP header, PDS echoes
#             them in ACKs, the sender moves most traffic to the unmarked path, and the
#             transfer completes intact
# Exit 77 (ctest: skipped) when not root or namespaces are unavailable.
set -euo pipefail
build=$1
test=$2
skip() { echo "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
tool="$build/tools/spray-endpoint"
[[ -x $tool ]] || { echo "FAIL: $tool not built"; exit 1; }

tag="sp$$"
ns() { echo "${tag}$1"; }
cleanup() {
  for n in h1 h2 r1 r2; do ip netns del "$(ns $n)" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in h1 h2 r1 r2; do
  ip netns add "$(ns $n)" 2>/dev/null || skip "cannot create network namespaces here"
  ip -n "$(ns $n)" link set lo up
done
x() { local n=$1; shift; ip netns exec "$(ns $n)" "$@"; }

# link A B: a veth pair, end "A-B" in namespace A and "B-A" in namespace B.
link() {
  ip link add "${tag}x" type veth peer name "${tag}y"
  ip link set "${tag}x" netns "$(ns $1)"
  ip link set "${tag}y" netns "$(ns $2)"
  ip -n "$(ns $1)" link set "${tag}x" name "$1$2" up
  ip -n "$(ns $2)" link set "${tag}y" name "$2$1" up
}
link h1 r1; link h1 r2; link r1 h2; link r2 h2

ip -n "$(ns h1)" addr add 10.1.1.1/24 dev h1r1
ip -n "$(ns h1)" addr add 10.1.2.1/24 dev h1r2
ip -n "$(ns r1)" addr add 10.1.1.2/24 dev r1h1
ip -n "$(ns r2)" addr add 10.1.2.2/24 dev r2h1
ip -n "$(ns r1)" addr add 10.2.1.2/24 dev r1h2
ip -n "$(ns r2)" addr add 10.2.2.2/24 dev r2h2
ip -n "$(ns h2)" addr add 10.2.1.1/24 dev h2r1
ip -n "$(ns h2)" addr add 10.2.2.1/24 dev h2r2
ip -n "$(ns h1)" addr add 10.9.0.1/32 dev lo
ip -n "$(ns h2)" addr add 10.9.0.2/32 dev lo

for n in h1 h2 r1 r2; do
  x $n sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
done
for n in r1 r2; do x $n sysctl -qw net.ipv4.ip_forward=1; done
for n in h1 h2; do
  x $n sysctl -qw net.ipv4.fib_multipath_hash_policy=1        # hash on the UDP ports
  x $n sysctl -qw net.ipv4.conf.all.ignore_routes_with_linkdown=1
done
ip -n "$(ns h1)" route add 10.9.0.2/32 nexthop via 10.1.1.2 dev h1r1 nexthop via 10.1.2.2 dev h1r2
ip -n "$(ns h2)" route add 10.9.0.1/32 nexthop via 10.2.1.2 dev h2r1 nexthop via 10.2.2.2 dev h2r2
ip -n "$(ns r1)" route add 10.9.0.1/32 via 10.1.1.1
ip -n "$(ns r1)" route add 10.9.0.2/32 via 10.2.1.1
ip -n "$(ns r2)" route add 10.9.0.1/32 via 10.1.2.1
ip -n "$(ns r2)" route add 10.9.0.2/32 via 10.2.2.1

# Source ports per endpoint. The kernel hashes each onto a path; with 8 ports all of them
# land on one of two paths once in 128 runs, with 32 once in 2^31.
ENTROPY_PORTS=32

tx_packets() { x "$1" cat "/sys/class/net/$2/statistics/tx_packets"; }

# transfer MESSAGES BYTES [extra...]: server in h2, client in h1; both must succeed.
# The bound only stops a stuck run: a release build moves the 600 MB of the link-down
# case in about 8 s, AddressSanitizer builds in about 30 s, and one CI run under ASan
# moved only 335 of the 600 messages in 60 s (it was still progressing: ACKs are
# sprayed over every entropy value, so with a dead return path about half die, and
# ASan slows the rest), so the bound is 150 s.
transfer_timeout=150
start_transfer() {
  local messages=$1 bytes=$2
  x h2 "$tool" server --bind 10.9.0.2:4800 --messages "$messages" --bytes "$bytes" --timeout "$transfer_timeout" \
    --entropy-ports "$ENTROPY_PORTS" \
    > "$workdir/server.json" &
  server_pid=$!
  sleep 0.3
  x h1 "$tool" client --bind 10.9.0.1 --connect 10.9.0.2:4800 --messages "$messages" \
    --entropy-ports "$ENTROPY_PORTS" \
    --bytes "$bytes" --timeout "$transfer_timeout" > "$workdir/client.json" &
  client_pid=$!
}
finish_transfer() {
  local rc=0
  wait "$client_pid" || rc=1
  wait "$server_pid" || rc=1
  echo "client: $(cat "$workdir/client.json")"
  echo "server: $(cat "$workdir/server.json")"
  return $rc
}
# r1_forward_rule TABLE RULE: r1 applies RULE (with a counter) to everything it forwards.
r1_forward_rule() {
  command -v nft >/dev/null || skip "nftables (nft) is not installed"
  x r1 nft -f - <<NFT
table inet $1 {
  chain forward {
    type filter hook forward priority 0; policy accept;
    $2
  }
}
NFT
}
# r1_counted TABLE: the packets TABLE's counter has seen.
r1_counted() { x r1 nft list table inet "$1" | grep -o 'packets [0-9]*' | awk '{print $2}'; }
workdir=$(mktemp -d)
trap 'cleanup; rm -rf "$workdir"' EXIT

case $test in
  spray)
    a0=$(tx_packets h1 h1r1); b0=$(tx_packets h1 h1r2)
    start_transfer 100 262144
    finish_transfer || { echo "FAIL: transfer failed"; exit 1; }
    a=$(( $(tx_packets h1 h1r1) - a0 )); b=$(( $(tx_packets h1 h1r2) - b0 ))
    echo "h1 -> r1: $a packets, h1 -> r2: $b packets"
    total=$((a + b))
    (( a * 5 >= total && b * 5 >= total )) || { echo "FAIL: a path carried under 20 %"; exit 1; }
    ;;
  linkdown)
    base=$(tx_packets h1 h1r1)
    start_transfer 600 1048576
    # Cut the link once traffic is flowing on it (a few thousand packets in), not after
    # a fixed time: the transfer's speed varies with the machine.
    for _ in $(seq 200); do
      (( $(tx_packets h1 h1r1) - base > 3000 )) && break
      sleep 0.01
    done
    kill -0 "$client_pid" 2>/dev/null || { echo "FAIL: transfer ended before the link went down"; exit 1; }
    ip -n "$(ns h1)" link set h1r1 down
    before=$(tx_packets h1 h1r1)
    echo "h1r1 down after $before packets"
    finish_transfer || { echo "FAIL: transfer did not survive the link going down"; exit 1; }
    after=$(tx_packets h1 h1r1)
    [[ $after -eq $before ]] || { echo "FAIL: packets left on the dead link"; exit 1; }
    ;;
  nftdrop)
    r1_forward_rule spray_loss 'numgen random mod 100 < 5 counter drop'
    start_transfer 100 262144
    finish_transfer || { echo "FAIL: transfer failed under 5 % loss"; exit 1; }
    dropped=$(r1_counted spray_loss)
    echo "r1 dropped $dropped packets"
    (( dropped > 0 )) || { echo "FAIL: nftables dropped nothing"; exit 1; }
    ;;
  ecn)
    # Only datagrams sent ECN-capable may be marked (RFC 3168).
    r1_forward_rule spray_ecn 'meta l4proto udp ip ecn ect0 counter ip ecn set ce'
    a0=$(tx_packets h1 h1r1); b0=$(tx_packets h1 h1r2)
    start_transfer 100 262144
    finish_transfer || { echo "FAIL: transfer failed with CE marks"; exit 1; }
    a=$(( $(tx_packets h1 h1r1) - a0 )); b=$(( $(tx_packets h1 h1r2) - b0 ))
    marked=$(r1_counted spray_ecn)
    field() { grep -o "\"$2\":[0-9]*" "$workdir/$1.json" | head -1 | cut -d: -f2; }
    ce=$(field server rx_ecn_ce); rx_marked=$(field server rx_ecn_marked)
    echoed=$(field client ecn_acks_received)
    echo "r1 marked $marked ECT(0) datagrams CE; server saw $ce CE datagrams, $rx_marked" \
         "marked requests; client got $echoed ECN-echo ACKs; h1 -> r1: $a, h1 -> r2: $b packets"
    (( marked > 0 )) || { echo "FAIL: nothing left h1 marked ECT(0) (nftables marked nothing)"; exit 1; }
    (( ce > 0 && rx_marked > 0 )) || { echo "FAIL: the receiver did not read the CE marks"; exit 1; }
    (( echoed > 0 )) || { echo "FAIL: no ACK echoed a CE mark to the sender"; exit 1; }
    # REPS recycles only entropy values that came back unmarked, so the sender moves off
    # the marking path: r1 carried 4-27 % of h1's packets in five runs here (about half
    # without marks, see `spray`).
    (( a < b )) || { echo "FAIL: the marking path still carries the larger share"; exit 1; }
    ;;
  *)
    echo "unknown test '$test'"; exit 2 ;;
esac
echo "PASS: $test"
