#!/usr/bin/env bash
# Real multipath over kernel UDP, in network namespaces this script creates and always
# deletes (trap on EXIT, even on failure):
#
#          +-- r1 --+
#    h1 ---|        |--- h2        h1: 10.9.0.1 (on lo), h2: 10.9.0.2 (on lo)
#          +-- r2 --+              h1 and h2 route to each other over both routers
#                                  (ECMP, fib_multipath_hash_policy=1: L4 hashing)
#
# The same over IPv6 with FAMILY ipv6 (h1 fd09::1, h2 fd09::2; links fd01:N::/64 between
# h1 and router N, fd02:N::/64 between router N and h2); IPv4 stays configured beside it,
# idle but for fi_pingpong's own TCP exchange.
#
# Usage: netns_multipath.sh BUILD_DIR TEST [ipv4|ipv6]
#   spray     every path carries a share of the traffic (interface counters)
#   linkdown  h1's link to r1 goes down mid-transfer; the transfer completes intact
#   nftdrop   r1 drops a random 5 % of what it forwards; transfers complete intact
#   ecn       r1 marks CE on every datagram it forwards (ECT(0) -> CE), as a congested
#             switch would; the receiver reads the marks from the IP header, PDS echoes
#             them in ACKs, the sender moves most traffic to the unmarked path, and the
#             transfer completes intact
#   provider_mtu  the provider, bound to h1's address on lo, sizes its datagrams for the
#             1500-byte links they leave by, not for lo (fi_info's DGRAM max_msg_size),
#             and fi_pingpong between the hosts' lo addresses moves 1 MiB messages,
#             data checked, with no IP fragment made anywhere
#   jumbo     datagrams of 8972 bytes (spray-endpoint --mtu) on the 1500-byte path: the
#             kernel refuses them as GSO runs (EMSGSIZE), the datapath turns GSO off
#             after the first refusal and the kernel fragments them one by one; the
#             transfer completes intact, losing at most that first burst
# Exit 77 (ctest: skipped) when not root or namespaces are unavailable.
set -euo pipefail
build=$1
test=$2
family=${3:-ipv4}
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
# A run killed outright (ctest's timeout sends SIGKILL, which no trap sees) leaves its
# namespaces behind: delete those of runs whose process is gone.
for stale in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^sp[0-9]+(h1|h2|r1|r2)$'); do
  pid=${stale#sp}
  pid=${pid%??}
  kill -0 "$pid" 2>/dev/null || ip netns del "$stale" 2>/dev/null || true
done
# No duplicate address detection on the links to come: their IPv6 link-local addresses
# would stay tentative for about two seconds, and until then most datagrams from h2 back
# to h1 were lost (a UDP echo over each of 32 source ports right after setup: 7 sent in
# the first 2.1 s got no reply), so the first transfer's ACKs did not come back.
for n in h1 h2 r1 r2; do
  ip netns add "$(ns $n)" 2>/dev/null || skip "cannot create network namespaces here"
  ip -n "$(ns $n)" link set lo up
  ip netns exec "$(ns $n)" sysctl -qw net.ipv6.conf.all.accept_dad=0 \
    net.ipv6.conf.default.accept_dad=0
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

for n in h1 h2 r1 r2; do
  x $n sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
done
for n in r1 r2; do
  x $n sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
done
for n in h1 h2; do
  for v in 4 6; do
    x $n sysctl -qw net.ipv$v.fib_multipath_hash_policy=1        # hash on the UDP ports
    x $n sysctl -qw net.ipv$v.conf.all.ignore_routes_with_linkdown=1
  done
done

# configure ipv4|ipv6: the addresses and routes of one family (see the picture above).
# Sets h1 and h2, the hosts' addresses in it. Hosts speak from their lo address (src), as
# routed hosts do: a socket that binds none (fi_pingpong's TCP exchange) is then
# answerable, since the far host routes only to that address.
configure() {
  local host_prefix link_prefix ipv nodad=()
  local h1r1 r1h1 h1r2 r2h1 h2r1 r1h2 h2r2 r2h2
  if [[ $1 == ipv4 ]]; then
    h1=10.9.0.1 h2=10.9.0.2 host_prefix=32 link_prefix=24 ipv=4
    h1r1=10.1.1.1 r1h1=10.1.1.2 h1r2=10.1.2.1 r2h1=10.1.2.2
    h2r1=10.2.1.1 r1h2=10.2.1.2 h2r2=10.2.2.1 r2h2=10.2.2.2
  elif [[ $1 == ipv6 ]]; then
    h1=fd09::1 h2=fd09::2 host_prefix=128 link_prefix=64 ipv=6 nodad=(nodad)  # see accept_dad
    h1r1=fd01:1::1 r1h1=fd01:1::2 h1r2=fd01:2::1 r2h1=fd01:2::2
    h2r1=fd02:1::1 r1h2=fd02:1::2 h2r2=fd02:2::1 r2h2=fd02:2::2
  else
    echo "unknown address family '$1'"; exit 2
  fi
  addr() { ip -n "$(ns $1)" addr add "$3" dev "$2" "${nodad[@]}"; }
  route() { local n=$1; shift; ip -$ipv -n "$(ns $n)" route add "$@"; }
  addr h1 h1r1 $h1r1/$link_prefix; addr r1 r1h1 $r1h1/$link_prefix
  addr h1 h1r2 $h1r2/$link_prefix; addr r2 r2h1 $r2h1/$link_prefix
  addr h2 h2r1 $h2r1/$link_prefix; addr r1 r1h2 $r1h2/$link_prefix
  addr h2 h2r2 $h2r2/$link_prefix; addr r2 r2h2 $r2h2/$link_prefix
  addr h1 lo $h1/$host_prefix
  addr h2 lo $h2/$host_prefix
  route h1 $h2/$host_prefix src $h1 nexthop via $r1h1 dev h1r1 nexthop via $r2h1 dev h1r2
  route h2 $h1/$host_prefix src $h2 nexthop via $r1h2 dev h2r1 nexthop via $r2h2 dev h2r2
  route r1 $h1/$host_prefix via $h1r1
  route r1 $h2/$host_prefix via $h2r1
  route r2 $h1/$host_prefix via $h1r2
  route r2 $h2/$host_prefix via $h2r2
}
# IPv4 always (fi_pingpong's own exchange needs it: h2_ipv4), the family under test last.
configure ipv4
h2_ipv4=$h2
[[ $family == ipv4 ]] || configure "$family"

# Source ports per endpoint. The kernel hashes each onto a path; with 8 ports all of them
# land on one of two paths once in 128 runs, with 32 once in 2^31.
ENTROPY_PORTS=32

tx_packets() { x "$1" cat "/sys/class/net/$2/statistics/tx_packets"; }

# start_transfer MESSAGES BYTES [OPTION...] (options for both ends), then finish_transfer:
# server in h2, client in h1; both must succeed.
# The bound only stops a stuck run: a release build moves the 600 MB of the link-down
# case in about 8 s, AddressSanitizer builds in about 30 s, and one CI run under ASan
# moved only 335 of the 600 messages in 60 s (it was still progressing: ACKs are
# sprayed over every entropy value, so with a dead return path about half die, and
# ASan slows the rest), so the bound is 150 s.
transfer_timeout=150
start_transfer() {
  local messages=$1 bytes=$2
  shift 2
  x h2 "$tool" server --bind "[$h2]:4800" --messages "$messages" --bytes "$bytes" --timeout "$transfer_timeout" \
    --entropy-ports "$ENTROPY_PORTS" "$@" \
    > "$workdir/server.json" &
  server_pid=$!
  sleep 0.3
  x h1 "$tool" client --bind "$h1" --connect "[$h2]:4800" --messages "$messages" \
    --entropy-ports "$ENTROPY_PORTS" "$@" \
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
    ip=ip; [[ $family == ipv6 ]] && ip=ip6
    r1_forward_rule spray_ecn "meta l4proto udp $ip ecn ect0 counter $ip ecn set ce"
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
  provider_mtu)
    export FI_PROVIDER_PATH=$build/provider/lib FI_PROVIDER=spray FI_SPRAY_DATAPATH=udp
    [[ -e $FI_PROVIDER_PATH/libspray-fi.so ]] || { echo "FAIL: provider not built"; exit 1; }
    command -v fi_info >/dev/null || skip "fi_info (libfabric-bin) is not installed"
    # What the provider offers a DGRAM endpoint is one datagram's payload.
    largest=$(FI_SPRAY_ADDRESS=$h1 x h1 timeout 60 fi_info -p spray -t FI_EP_DGRAM -v |
              awk '/max_msg_size/ {print $2; exit}')
    echo "provider bound to $h1 on lo: DGRAM max_msg_size $largest"
    [[ -n $largest ]] || { echo "FAIL: fi_info found no spray DGRAM endpoint"; exit 1; }
    (( largest < 1500 - 48 )) || { echo "FAIL: datagrams sized past the 1500-byte links"; exit 1; }
    # Its exchange goes over IPv4 (h2_ipv4) whatever the family; the endpoints bind $h1/$h2.
    FI_SPRAY_ADDRESS=$h2 x h2 timeout 60 fi_pingpong -e rdm -S 1048576 -I 20 -c \
      -B 47592 > "$workdir/pp_server.log" 2>&1 &
    pp_server=$!
    sleep 0.5
    FI_SPRAY_ADDRESS=$h1 x h1 timeout 60 fi_pingpong -e rdm -S 1048576 -I 20 -c -P 47592 \
      "$h2_ipv4" > "$workdir/pp_client.log" 2>&1 || { cat "$workdir"/pp_*.log; echo "FAIL: client"; exit 1; }
    wait "$pp_server" || { cat "$workdir"/pp_*.log; echo "FAIL: server"; exit 1; }
    tail -1 "$workdir/pp_client.log"
    for n in h1 h2 r1 r2; do
      made=$(x $n nstat -az IpFragCreates Ip6FragCreates | awk '/FragCreates/ {s += $2} END {print s + 0}')
      (( made == 0 )) || { echo "FAIL: $n made $made IP fragments"; exit 1; }
    done
    ;;
  jumbo)
    start_transfer 50 262144 --mtu 8972
    finish_transfer || { echo "FAIL: the transfer did not complete with oversized datagrams"; exit 1; }
    dropped=$(grep -o '"tx_dropped":[0-9]*' "$workdir/client.json" | cut -d: -f2)
    echo "client: $dropped datagrams refused by the kernel"
    (( dropped <= 64 )) || { echo "FAIL: GSO runs kept being refused ($dropped datagrams)"; exit 1; }
    ;;
  *)
    echo "unknown test '$test'"; exit 2 ;;
esac
echo "PASS: $test"
