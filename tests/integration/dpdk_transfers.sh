#!/usr/bin/env bash
# Spray over the DPDK datapath, in processes and network namespaces this script creates
# and always deletes (trap on EXIT, even on failure). Every case moves messages whose
# bytes the receiver checks one by one.
#
#    ns A [dpdk on veth a0] ======= veth ======= [b0] ns B
#     10.77.0.1 (no kernel IP on a0)              10.77.0.2
#
# Usage: dpdk_transfers.sh BUILD_DIR TEST
#   afpacket-kernel   DPDK net_af_packet on a0 <-> kernel UDP endpoint in B (our framing,
#                     checksums and ARP, checked by the kernel)
#   afpacket-dpdk     DPDK net_af_packet on both ends of the veth (and the refusal of an
#                     MTU the PMD cannot take, with its reason)
#   afpacket-kernel-ipv6
#                     the same over IPv6 (fd77::1 <-> fd77::2): our IPv6 framing and UDP
#                     checksums checked by the kernel, neighbour discovery both ways, and
#                     the kernel's IPv6 neighbour table read at open
#   afpacket-bridge-mld
#                     DPDK on a0 and B's kernel joined by a Linux bridge in namespace S
#                     that snoops MLD and queries (MLDv2, then MLDv1), and floods no
#                     multicast to A's port: B's solicitations reach the DPDK endpoint only
#                     if it reported its group, kept it reported through queries of both
#                     versions, and left it when it ended (an MLDv1 done)
#   afpacket-nftdrop  as afpacket-kernel, with nftables in B dropping 5 % of our packets
#   afpacket-restart  a DPDK endpoint restarted at its address: two DPDK clients on a0,
#                     one after the other, bound to the same port, send to B's kernel
#                     endpoint, which takes every message of both and counts a restart
#   afxdp-kernel      DPDK net_af_xdp on a0 <-> kernel UDP in B (skipped when the kernel
#                     or libxdp cannot attach XDP here)
#   memif             two processes over net_memif, --no-huge (server first)
#   memif-hugepages   the same on 2 MiB hugepages (skipped when none can be reserved)
#   memif-jumbo       memif at MTU 8972 (9014-byte frames): refused with its reason while
#                     memif's buffers are smaller than a frame, then the transfer, all in
#                     jumbo frames, with buffers that hold one
# Exit 77 (ctest: skipped) when not root or namespaces are unavailable.
set -euo pipefail
build=$1
test=$2
skip() { echo "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root for network namespaces and raw sockets"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
tool="$build/tools/spray-endpoint"
[[ -x $tool ]] || { echo "FAIL: $tool not built"; exit 1; }

tag="sd$$"
workdir=$(mktemp -d)
hugepages_before=""
huge_mount=""
cleanup() {
  [[ -n $huge_mount ]] && umount "$huge_mount"
  ip netns del "${tag}a" 2>/dev/null || true
  ip netns del "${tag}b" 2>/dev/null || true
  ip netns del "${tag}s" 2>/dev/null || true
  [[ -n $hugepages_before ]] && echo "$hugepages_before" > /proc/sys/vm/nr_hugepages
  rm -rf "$workdir"
}
trap cleanup EXIT
xa() { ip netns exec "${tag}a" "$@"; }
xb() { ip netns exec "${tag}b" "$@"; }
xs() { ip netns exec "${tag}s" "$@"; }

MESSAGES=60
BYTES=1000000
# Each process gets its own core and no shared EAL files, so two run side by side.
eal() { echo "--no-huge -m 256 --no-shconf --no-pci --log-level=error -l $1 $2"; }

make_veth() {
  ip netns add "${tag}a" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns add "${tag}b"
  ip link add "${tag}x" type veth peer name "${tag}y"
  ip link set "${tag}x" netns "${tag}a"
  ip link set "${tag}y" netns "${tag}b"
  ip -n "${tag}a" link set "${tag}x" name a0 up
  ip -n "${tag}b" link set "${tag}y" name b0 up
  ip -n "${tag}b" addr add 10.77.0.2/24 dev b0
  ip -n "${tag}b" addr add fd77::2/64 dev b0 nodad  # usable at once, no duplicate detection
  # The kernel would otherwise leave UDP checksums for "hardware" that veth does not
  # have, and a packet socket in A would see them unfinished.
  xb ethtool -K b0 tx off >/dev/null
}

# run_pair SERVER_CMD... -- CLIENT_CMD...: server first, both must succeed.
run_pair() {
  local server=() client=() rc=0
  while [[ $1 != -- ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  "${server[@]}" --messages $MESSAGES --bytes $BYTES --timeout 60 > "$workdir/server.json" \
    2> "$workdir/server.err" &
  local server_pid=$!
  sleep 1
  "${client[@]}" --messages $MESSAGES --bytes $BYTES --timeout 60 > "$workdir/client.json" \
    2> "$workdir/client.err" || rc=$?
  wait "$server_pid" || rc=${rc/#0/1}
  echo "client: $(cat "$workdir/client.json")"
  echo "server: $(cat "$workdir/server.json")"
  grep -v '^libbpf\|^libxdp' "$workdir/client.err" "$workdir/server.err" | head -20 || true
  return "$rc"
}


case $test in
  afpacket-kernel-ipv6)
    command -v ethtool >/dev/null || skip "ethtool is not installed"
    make_veth
    # The DPDK endpoint (fd77::1 on a0) sends to B's kernel (fd77::2); then it must say
    # in its JSON what $1 asks for.
    dpdk_client_to_kernel() {
      run_pair xb "$tool" server --bind "[fd77::2]:4800" -- \
        xa "$tool" client --datapath dpdk --bind fd77::1 --connect "[fd77::2]:4800" \
        --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" ||
        { echo "FAIL: transfer to the kernel failed"; exit 1; }
      expect "$1" client "$2"
    }
    # expect PATTERN SIDE WHY: SIDE's JSON holds PATTERN, or the test fails saying WHY.
    expect() {
      grep -q "$1" "$workdir/$2.json" || { echo "FAIL: $3"; exit 1; }
    }
    # No static neighbour on either side. First the DPDK endpoint sends first and solicits
    # fd77::2 (B's kernel learns it from the solicitation); then, B's neighbours flushed,
    # B's kernel sends first and solicits fd77::1, which only the DPDK endpoint answers.
    dpdk_client_to_kernel '"nd_solicitations_sent":[1-9]' \
      "the DPDK client did not solicit the kernel peer"
    expect '"rx_bad_checksum":0' client "the kernel's checksums did not check"
    ip -n "${tag}b" neigh flush dev b0
    run_pair xa "$tool" server --datapath dpdk --bind "[fd77::1]:4800" \
      --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" -- \
      xb "$tool" client --bind fd77::2 --connect "[fd77::1]:4800" ||
      { echo "FAIL: transfer from the kernel failed"; exit 1; }
    expect '"nd_advertisements_sent":[1-9]' server \
      "the DPDK server did not answer the kernel's solicitation"
    expect '"rx_bad_checksum":0' server "the kernel's checksums did not check"
    xb ip -6 neigh show fd77::1 dev b0
    # A's kernel knows B: the DPDK endpoint takes B's MAC from it (rtnetlink) and solicits
    # nothing.
    b_mac=$(xb cat /sys/class/net/b0/address)
    ip -n "${tag}a" -6 neigh replace fd77::2 lladdr "$b_mac" dev a0 nud permanent
    ip -n "${tag}b" neigh flush dev b0
    dpdk_client_to_kernel '"nd_solicitations_sent":0,' \
      "the DPDK client solicited a neighbour its kernel's table holds"
    ;;
  afpacket-restart)
    # DPDK's port is fixed (4800 unless told), so a restarted DPDK process comes back at
    # its predecessor's address. The kernel endpoint must tell the two apart by their
    # incarnations (transport/ses/ses_incarnation.cc; restarted_peer.sh does the same
    # over kernel UDP alone) and take the second's send ids, which start again at 0.
    command -v ethtool >/dev/null || skip "ethtool is not installed"
    make_veth
    each=20
    sizes=(--bytes 20000 --window 8)  # 14 packets a message
    xb "$tool" server --bind 10.77.0.2:4800 --messages $((2 * each)) "${sizes[@]}" \
      --timeout 60 > "$workdir/server.json" 2> "$workdir/server.err" &
    server_pid=$!
    sleep 1
    for run in first second; do
      if ! xa "$tool" client --datapath dpdk --bind 10.77.0.1:4800 --connect 10.77.0.2:4800 \
          --messages $each "${sizes[@]}" --timeout 30 \
          --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" > "$workdir/$run.json" \
          2> "$workdir/$run.err"; then
        echo "FAIL: the $run DPDK client's sends did not all complete"
        cat "$workdir/$run.json" "$workdir/$run.err"
        exit 1
      fi
    done
    if ! wait "$server_pid"; then
      echo "FAIL: the kernel server did not receive every message intact"
      cat "$workdir/server.json" "$workdir/server.err"
      exit 1
    fi
    echo "server: $(cat "$workdir/server.json")"
    grep -q "\"intact\":$((2 * each))," "$workdir/server.json" ||
      { echo "FAIL: not all $((2 * each)) messages arrived intact"; exit 1; }
    grep -q '"peers_restarted":1,' "$workdir/server.json" ||
      { echo "FAIL: the server did not count the second client as a restart of the first"; exit 1; }
    ;;
  afpacket-bridge-mld)
    command -v ethtool >/dev/null || skip "ethtool is not installed"
    command -v bridge >/dev/null || skip "bridge (iproute2) is not installed"
    ip netns add "${tag}a" 2>/dev/null || skip "cannot create network namespaces here"
    ip netns add "${tag}b"
    ip netns add "${tag}s"
    # The bridge's link-local address (its queries' source) usable at once.
    xs sysctl -qw net.ipv6.conf.default.accept_dad=0
    # Queries every second, each to be answered within half a second; a group not reported
    # for 3 s is forgotten, and 1 s after a leave (two last-member queries). The querier is
    # switched on after the intervals are set: the bridge floods (not to A) until one
    # response interval after that, and set in one command it counted the default 10 s.
    xs ip link add br0 type bridge mcast_snooping 1 mcast_mld_version 2 \
      mcast_query_interval 100 mcast_startup_query_interval 100 \
      mcast_query_response_interval 50 mcast_membership_interval 300 \
      mcast_last_member_interval 50 mcast_last_member_count 2 ||
      skip "this kernel's bridge cannot snoop MLD"
    xs ip link set br0 type bridge mcast_querier 1
    for side in a b; do
      ip link add "${tag}${side}x" type veth peer name "${tag}${side}y"
      ip link set "${tag}${side}x" netns "${tag}${side}"
      ip link set "${tag}${side}y" netns "${tag}s"
      ip -n "${tag}${side}" link set "${tag}${side}x" name "${side}0" up
      ip -n "${tag}s" link set "${tag}${side}y" name "s${side}" master br0 up
    done
    xs ip link set br0 up
    # Unregistered multicast (B's solicitations before A reports) is not flooded to A.
    xs bridge link set dev sa mcast_flood off
    xa sysctl -qw net.ipv6.conf.a0.disable_ipv6=1  # only the DPDK endpoint speaks on a0
    ip -n "${tag}b" addr add fd77::2/64 dev b0 nodad
    xb ethtool -K b0 tx off >/dev/null
    group_on_a() { xs bridge mdb show dev br0 | grep -q "port sa grp ff02::1:ff00:1"; }
    xa "$tool" server --datapath dpdk --bind "[fd77::1]:4800" --messages $MESSAGES \
      --bytes $BYTES --timeout 60 --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" \
      > "$workdir/server.json" 2> "$workdir/server.err" &
    server_pid=$!
    for _ in $(seq 50); do group_on_a && break; sleep 0.1; done
    group_on_a || { xs bridge mdb show; echo "FAIL: the bridge did not learn the DPDK endpoint's group"; exit 1; }
    # Past the membership interval twice: the group stays only if every round of queries
    # was answered, first in MLDv2, then (the querier changed) in MLDv1.
    sleep 4
    group_on_a || { echo "FAIL: the group expired: MLDv2 queries went unanswered"; exit 1; }
    xs ip link set br0 type bridge mcast_mld_version 1
    sleep 4
    group_on_a || { echo "FAIL: the group expired: MLDv1 queries went unanswered"; exit 1; }
    # From now on an unreported group lasts 10 s (the next answers set it), so that the
    # check of the leave below cannot pass by the group's expiry.
    xs ip link set br0 type bridge mcast_membership_interval 1000
    sleep 1.5
    # B's kernel sends first: it solicits fd77::1 on its group, which only the bridge's
    # record of A's report brings to A.
    rc=0
    xb "$tool" client --bind fd77::2 --connect "[fd77::1]:4800" --messages $MESSAGES \
      --bytes $BYTES --timeout 60 > "$workdir/client.json" 2> "$workdir/client.err" || rc=$?
    wait "$server_pid" || rc=${rc/#0/1}
    echo "client: $(cat "$workdir/client.json")"
    echo "server: $(cat "$workdir/server.json")"
    head -20 "$workdir/client.err" "$workdir/server.err"
    (( rc == 0 )) || { echo "FAIL: transfer from the kernel through the bridge failed"; exit 1; }
    grep -q '"nd_advertisements_sent":[1-9]' "$workdir/server.json" ||
      { echo "FAIL: the DPDK server answered no solicitation"; exit 1; }
    grep -q '"mld_queries_received":[1-9]' "$workdir/server.json" ||
      { echo "FAIL: the DPDK server saw no MLD query"; exit 1; }
    grep -q '"mldv1_reports_sent":[1-9]' "$workdir/server.json" ||
      { echo "FAIL: the DPDK server answered the MLDv1 querier in MLDv2"; exit 1; }
    # The leave sent when the server closed (an MLDv1 done, the querier being MLDv1 now):
    # gone after the last-member queries' second, long before the group's 10 s expire.
    left_at=$(date +%s%N)
    for _ in $(seq 40); do group_on_a || break; sleep 0.1; done
    if group_on_a; then echo "FAIL: the group stayed after the DPDK endpoint left"; exit 1; fi
    echo "the bridge dropped the group $(( ($(date +%s%N) - left_at) / 1000000 )) ms after the endpoint ended"
    ;;
  afpacket-kernel | afpacket-nftdrop | afxdp-kernel)
    command -v ethtool >/dev/null || skip "ethtool is not installed"
    make_veth
    if [[ $test == afpacket-nftdrop ]]; then
      command -v nft >/dev/null || skip "nftables (nft) is not installed"
      xb nft -f - <<'NFT'
table inet spray_loss {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 4800-4807 numgen random mod 100 < 5 counter drop
  }
}
NFT
    fi
    pmd=af_packet0
    [[ $test == afxdp-kernel ]] && pmd=af_xdp0
    rc=0
    run_pair xb "$tool" server --bind 10.77.0.2:4800 -- \
      xa "$tool" client --datapath dpdk --bind 10.77.0.1:4800 --connect 10.77.0.2:4800 \
      --dpdk-args "$(eal 1 "--vdev=net_$pmd,iface=a0")" || rc=$?
    if [[ $test == afxdp-kernel ]] && grep -q "EAL initialisation\|cannot" "$workdir/client.err"; then
      skip "net_af_xdp cannot attach to a veth here: $(grep -v '^lib' "$workdir/client.err" | head -1)"
    fi
    (( rc == 0 )) || { echo "FAIL: transfer failed"; exit 1; }
    if [[ $test == afpacket-nftdrop ]]; then
      dropped=$(xb nft list table inet spray_loss | grep -o 'packets [0-9]*' | awk '{print $2}')
      echo "B dropped $dropped packets"
      (( dropped > 0 )) || { echo "FAIL: nftables dropped nothing"; exit 1; }
    fi
    grep -q '"arp_requests_sent":[1-9]' "$workdir/client.json" ||
      { echo "FAIL: the DPDK client did not resolve the kernel peer with ARP"; exit 1; }
    ;;
  afpacket-dpdk)
    make_veth
    ip -n "${tag}b" addr flush dev b0  # B's kernel must not answer for the DPDK endpoint
    # Jumbo frames: DPDK 22.11's net_af_packet reports a 1518-byte largest frame, so ethdev
    # refuses it an MTU of 9000; the endpoint must stop there and say so.
    if xa "$tool" client --datapath dpdk --mtu 8972 --bind 10.77.0.1:4800 \
        --connect 10.77.0.2:4800 --messages 1 --bytes 1 --timeout 5 \
        --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" > /dev/null 2> "$workdir/refused.err"; then
      echo "FAIL: an MTU of 9000 was accepted on net_af_packet"; exit 1
    fi
    grep -v '^Frame size' "$workdir/refused.err"
    grep -q "does not accept an IP MTU of 9000 .*its largest frame 1518 bytes" "$workdir/refused.err" ||
      { echo "FAIL: the refusal does not give its reason"; exit 1; }
    run_pair xb "$tool" server --datapath dpdk --bind 10.77.0.2:4800 \
      --dpdk-args "$(eal 0 "--vdev=net_af_packet0,iface=b0")" -- \
      xa "$tool" client --datapath dpdk --bind 10.77.0.1:4800 --connect 10.77.0.2:4800 \
      --dpdk-args "$(eal 1 "--vdev=net_af_packet0,iface=a0")" ||
      { echo "FAIL: transfer failed"; exit 1; }
    grep -q '"arp_replies_sent":[1-9]' "$workdir/server.json" ||
      { echo "FAIL: the DPDK server did not answer ARP"; exit 1; }
    ;;
  memif | memif-hugepages)
    mem_a=$(eal 0 "") mem_b=$(eal 1 "")
    if [[ $test == memif-hugepages ]]; then
      hugepages_before=$(cat /proc/sys/vm/nr_hugepages)
      echo $((hugepages_before + 256)) > /proc/sys/vm/nr_hugepages 2>/dev/null || true
      free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
      (( free >= 200 )) || skip "could not reserve 2 MiB hugepages (free: $free)"
      huge_dir=""
      if ! mount | grep -q hugetlbfs; then  # mount our own for the test's lifetime
        mkdir "$workdir/huge"
        mount -t hugetlbfs nodev "$workdir/huge" || skip "cannot mount hugetlbfs"
        huge_mount="$workdir/huge"
        huge_dir="--huge-dir $huge_mount"
      fi
      mem_a="-m 128 --file-prefix ${tag}a $huge_dir --no-pci --log-level=error -l 0"
      mem_b="-m 128 --file-prefix ${tag}b $huge_dir --no-pci --log-level=error -l 1"
    fi
    sock="$workdir/memif.sock"
    run_pair "$tool" server --datapath dpdk --bind 10.77.0.1:4800 \
      --neighbour 10.77.0.2=02:00:00:00:00:02 \
      --dpdk-args "$mem_a --vdev=net_memif0,role=server,socket=$sock,mac=02:00:00:00:00:01" -- \
      "$tool" client --datapath dpdk --bind 10.77.0.2:4800 --connect 10.77.0.1:4800 \
      --neighbour 10.77.0.1=02:00:00:00:00:01 \
      --dpdk-args "$mem_b --vdev=net_memif0,role=client,socket=$sock,mac=02:00:00:00:00:02" ||
      { echo "FAIL: transfer failed"; exit 1; }
    ;;
  memif-jumbo)
    sock="$workdir/memif.sock"
    jumbo=(--mtu 8972)
    # DPDK 22.11's memif mangles a frame chained over several of its buffers (dpdk_setup.cc):
    # with the default 2048-byte buffers the endpoint must refuse at once and say why.
    if "$tool" client --datapath dpdk "${jumbo[@]}" --bind 10.77.0.2:4800 \
        --connect 10.77.0.1:4800 --neighbour 10.77.0.1=02:00:00:00:00:01 --messages 1 \
        --bytes 1 --timeout 5 --dpdk-args "$(eal 1 "--vdev=net_memif0,role=client,socket=$sock")" \
        > /dev/null 2> "$workdir/refused.err"; then
      echo "FAIL: a 9014-byte frame over 2048-byte memif buffers was accepted"; exit 1
    fi
    cat "$workdir/refused.err"
    grep -q "buffers of 2048 bytes cannot hold a 9014-byte frame" "$workdir/refused.err" ||
      { echo "FAIL: the refusal does not give its reason"; exit 1; }
    run_pair "$tool" server --datapath dpdk "${jumbo[@]}" --bind 10.77.0.1:4800 \
      --neighbour 10.77.0.2=02:00:00:00:00:02 --dpdk-args "$(eal 0 \
      "--vdev=net_memif0,role=server,socket=$sock,mac=02:00:00:00:00:01,bsize=9216")" -- \
      "$tool" client --datapath dpdk "${jumbo[@]}" --bind 10.77.0.2:4800 \
      --connect 10.77.0.1:4800 --neighbour 10.77.0.1=02:00:00:00:00:01 --dpdk-args "$(eal 1 \
      "--vdev=net_memif0,role=client,socket=$sock,mac=02:00:00:00:00:02,bsize=9216")" ||
      { echo "FAIL: transfer failed"; exit 1; }
    # 60 MB in 8908-byte payloads is about 6700 data packets; at the 1472-byte default MTU
    # it would take over 41000.
    sent=$(grep -o '"data_packets":[0-9]*' "$workdir/client.json" | head -1 | cut -d: -f2 || true)
    (( ${sent:-0} > 0 && ${sent:-0} < MESSAGES * BYTES / 8000 )) ||
      { echo "FAIL: $sent data packets for $MESSAGES x $BYTES bytes: not jumbo frames"; exit 1; }
    ;;
  *)
    echo "unknown test '$test'"; exit 2 ;;
esac
echo "PASS: $test"
