#!/usr/bin/env bash
# fi_pingpong over the `spray` provider on its DPDK datapath (FI_SPRAY_DATAPATH=dpdk): two
# processes joined by net_memif (--no-huge, server first), several sizes, data checks on
# (-c). fi_pingpong's own address exchange goes over a loopback TCP socket; every spray
# packet goes through DPDK. The memif socket lives in a directory this script deletes.
# With FI_SPRAY_TSS_KEY_FILE set every packet is sealed (UET TSS), and each side's
# endpoint must log that it sealed and opened packets and refused none. With
# SPRAY_DPDK_IPV6=1 the endpoints are fd78::1 and fd78::2, with no static neighbours:
# every packet is framed in IPv6 and the peers find each other by neighbour discovery.
# Usage: fi_pingpong_dpdk.sh PROVIDER_DIR rdm|dgram
set -euo pipefail
dir=$1
ep=$2
command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong (libfabric-bin) not installed"; exit 77; }
workdir=$(mktemp -d)
server=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null
  rm -rf "$workdir"
}
trap cleanup EXIT
export FI_PROVIDER_PATH=$dir FI_PROVIDER=spray FI_SPRAY_DATAPATH=dpdk
secured=${FI_SPRAY_TSS_KEY_FILE:+1}
[[ -n $secured ]] && export FI_LOG_LEVEL=info  # the endpoints' closing line counts TSS
sock="$workdir/memif.sock"
# Each process: its own core, no shared EAL files, one memif port; static neighbours
# (memif carries no ARP-capable kernel on either side, though ARP would work too).
eal() { echo "--no-huge -m 256 --no-shconf --no-pci --log-level=error -l $1 --vdev=net_memif0,role=$2,socket=$sock,mac=$3"; }
mac_a=02:00:00:00:00:0a mac_b=02:00:00:00:00:0b
ipv6=${SPRAY_DPDK_IPV6:-}
if [[ -n $ipv6 ]]; then
  ip_a=fd78::1 ip_b=fd78::2 neighbour_of_a="" neighbour_of_b=""
else
  ip_a=10.78.0.1 ip_b=10.78.0.2 neighbour_of_a=10.78.0.2=$mac_b neighbour_of_b=10.78.0.1=$mac_a
fi
as_server() {
  FI_SPRAY_ADDRESS=$ip_a FI_SPRAY_DPDK_NEIGHBOURS=$neighbour_of_a \
    FI_SPRAY_DPDK_ARGS="$(eal 0 server $mac_a)" "$@"
}
as_client() {
  FI_SPRAY_ADDRESS=$ip_b FI_SPRAY_DPDK_NEIGHBOURS=$neighbour_of_b \
    FI_SPRAY_DPDK_ARGS="$(eal 1 client $mac_b)" "$@"
}
source "$(dirname "${BASH_SOURCE[0]}")/oob_port.sh"
if [[ $ep == rdm ]]; then sizes="8 4096 65536 1048576"; else sizes="8 1024"; fi
# One fi_pingpong pair at `size` bytes: 0 when both ends finished; 2 when the server
# found its port taken (oob_port_was_taken); else 1, with the logs shown.
run_size() {
  local size=$1 iters=$(( $1 >= 1048576 ? 30 : 300 ))
  port=$(free_oob_port)  # not fi_pingpong's default: tests run in parallel
  as_server timeout 60 fi_pingpong -p spray -e "$ep" -I "$iters" -S "$size" -c -B "$port" \
    > "$workdir/server.log" 2>&1 &
  server=$!
  wait_oob_listen "$port" "$server"
  local ok=0
  if ! as_client timeout 60 fi_pingpong -p spray -e "$ep" -I "$iters" -S "$size" -c \
      -P "$port" 127.0.0.1 > "$workdir/client.log" 2>&1; then
    if oob_port_was_taken "$workdir/server.log"; then
      wait "$server" 2>/dev/null || true
      server=""
      rm -f "$sock"
      return 2
    fi
    echo "client failed, $size bytes:"; cat "$workdir/client.log" "$workdir/server.log"; ok=1
  fi
  if ! wait "$server"; then
    echo "server failed, $size bytes:"; cat "$workdir/server.log"; ok=1
  fi
  server=""
  rm -f "$sock"
  [[ $ok == 0 && -n $secured ]] && { check_sealed "$size" || ok=1; }
  [[ $ok == 0 ]] && grep -v '^libfabric:' "$workdir/client.log" | tail -1
  return $ok
}
# Each side's endpoint logged sealing and opening packets and refusing none (TSS).
check_sealed() {
  local side counts
  for side in server client; do
    counts=$(grep -o 'TSS sealed [0-9]* opened [0-9]*, refused: not secured [0-9]* other domain [0-9]* replayed [0-9]* forged [0-9]*' \
      "$workdir/$side.log" || true)
    if [[ -z $counts ]] || awk '$3 == 0 || $5 == 0 || $9 + $12 + $14 + $16 != 0 {bad = 1} END {exit !bad}' <<<"$counts"; then
      echo "$side, $1 bytes: no endpoint sealed and opened packets without refusing any:"
      grep 'closed:' "$workdir/$side.log" || cat "$workdir/$side.log"
      return 1
    fi
    echo "$side: $counts"
  done
}
# run_size, again while it finds its out-of-band port taken (at most 3 times).
run_size_on_a_free_port() {
  local status
  for _ in 1 2 3; do
    status=0
    run_size "$1" || status=$?
    (( status == 2 )) || return "$status"
    echo "RETRY: $1 bytes (out-of-band port $port was taken meanwhile)"
  done
  return 1
}
for size in $sizes; do
  run_size_on_a_free_port "$size" && continue
  # DGRAM is unreliable and fi_pingpong never resends: one datagram lost (a memif ring
  # full while this 2-core machine is loaded) stalls a side until its timeout. That
  # is the service DGRAM promises, so such a size gets one more try; RDM gets none.
  if [[ $ep == dgram ]]; then
    echo "RETRY: $size bytes (DGRAM may lose a datagram)"
    run_size_on_a_free_port "$size" && continue
  fi
  echo "FAIL: $ep, $size bytes"; exit 1
done
echo "PASS: fi_pingpong $ep over spray on DPDK memif${ipv6:+ over IPv6}${secured:+, every packet sealed}"
