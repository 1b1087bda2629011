#!/usr/bin/env bash
# Local peers over the auto datapath get packets as long as shared memory carries, not the
# network's MTU: fi_pingpong (64 KiB messages, data checked) between two processes with
# FI_SPRAY_MTU=1472, as on a 1500-byte Ethernet, must send at most 12 packets a message
# (16467-byte packets: 5 of data, an ACK, a few of setup), where over kernel UDP alone the
# same run sends at least 40 (1472-byte packets: 48 of data). Counts are each endpoint's
# own, which it logs when it closes (FI_LOG_LEVEL=info).
# Usage: auto_local_mtu.sh PROVIDER_DIR
set -euo pipefail
dir=$1
command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong (libfabric-bin) not installed"; exit 77; }
export FI_PROVIDER_PATH=$dir FI_PROVIDER=spray FI_SPRAY_MTU=1472 FI_LOG_LEVEL=info
source "$(dirname "${BASH_SOURCE[0]}")/oob_port.sh"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
cd "$logs"
messages=200
# Runs fi_pingpong over `datapath`; prints the client's packets sent per message.
# Returns 2 when the server found its out-of-band port taken (try again), 1 on failure.
packets_per_message() {
  local datapath=$1 port server
  port=$(free_oob_port)
  FI_SPRAY_DATAPATH=$datapath timeout 60 fi_pingpong -p spray -e rdm -I "$messages" -S 65536 \
    -c -B "$port" > server.log 2>&1 &
  server=$!
  wait_oob_listen "$port" "$server"
  if ! FI_SPRAY_DATAPATH=$datapath timeout 60 fi_pingpong -p spray -e rdm -I "$messages" \
      -S 65536 -c -P "$port" 127.0.0.1 > client.log 2>&1; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    oob_port_was_taken server.log && return 2
    echo "FAIL: fi_pingpong client over $datapath" >&2; grep -v '^libfabric' client.log >&2
    return 1
  fi
  wait "$server" || { echo "FAIL: fi_pingpong server over $datapath" >&2; return 1; }
  local sent
  sent=$(grep -o 'closed: packets tx [0-9]*' client.log | awk '{s += $4} END {print s + 0}')
  (( sent > 0 )) || { echo "FAIL: the client logged no packet count over $datapath" >&2; return 1; }
  echo $(( sent / messages ))
}
measure() {  # datapath -> packets per message, retrying a taken port
  local status
  for attempt in 1 2 3; do
    status=0
    packets_per_message "$1" || status=$?
    (( status == 2 )) || return "$status"
  done
  return 1
}
over_auto=$(measure auto)
over_udp=$(measure udp)
echo "packets a 64 KiB message at FI_SPRAY_MTU=1472: auto (local peer) $over_auto, udp $over_udp"
(( over_udp >= 40 )) || { echo "FAIL: over udp only $over_udp packets a message: the count proves nothing"; exit 1; }
(( over_auto <= 12 )) || { echo "FAIL: a local peer over auto got $over_auto packets a message"; exit 1; }
echo "PASS: local peers over auto take shared memory's MTU"
