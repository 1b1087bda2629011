#!/usr/bin/env bash
# Datapath packet rates on this machine, side by side in one run (root): plain kernel UDP
# (the baseline), Spray's UDP datapath on loopback, and Spray's DPDK datapath over
# net_memif and over net_af_packet on a veth pair. Runs inside a network namespace it
# creates and always deletes.
#   scripts/dp-bench.sh [BUILD_DIR] [spray-dp-bench options, e.g. --seconds 2 --json]
set -euo pipefail
build=${1:-build}
shift || true
[[ $(id -u) -eq 0 ]] || { echo "dp-bench.sh: needs root (namespaces, raw sockets)"; exit 1; }
ns="spraybench$$"
sock=$(mktemp -u /tmp/spray-bench-XXXX.sock)
trap 'ip netns del "$ns" 2>/dev/null || true; rm -f "$sock"' EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add v0 type veth peer name v1
ip -n "$ns" link set v0 up
ip -n "$ns" link set v1 up
# The kernel's own stack takes in every frame on a veth that af_packet drives, as well as
# the PMD: addressed to the veth's MAC but not to a kernel address, IPv4 frames are routed
# and dropped, and IPv6 ones are answered with ICMPv6 "no route" (source address chosen,
# rate limit checked, per frame). That is the harness's cost, not the datapath's: it made
# IPv6 framing look 0.6-0.7x IPv4's here (2026-12-06). Dropped at the veths' ingress hook,
# which runs after packet sockets have their copy, both families run level.
if command -v nft >/dev/null; then
  ip netns exec "$ns" nft -f - <<'RULES'
table netdev spray_bench {
  chain v0_in { type filter hook ingress device "v0" priority 0; policy drop; }
  chain v1_in { type filter hook ingress device "v1" priority 0; policy drop; }
}
RULES
else
  echo "dp-bench.sh: no nft; the kernel also takes in the af_packet frames (slower rows)" >&2
fi
eal="--no-huge -m 1024 --no-shconf --no-pci --log-level=error -l 0"
eal+=" --vdev=net_memif0,role=server,socket=$sock --vdev=net_memif1,role=client,socket=$sock"
eal+=" --vdev=net_af_packet0,iface=v0 --vdev=net_af_packet1,iface=v1"
ip netns exec "$ns" "$build/tools/spray-dp-bench" --dpdk-args "$eal" \
  --dpdk-pair net_memif0:net_memif1 --dpdk-pair net_af_packet0:net_af_packet1 "$@"
