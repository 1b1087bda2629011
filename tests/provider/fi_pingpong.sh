#!/usr/bin/env bash
# fi_pingpong (Debian's libfabric-bin) over the `spray` provider on loopback: a server and
# a client process, several sizes, data integrity checks on (-c). Both must succeed.
# Usage: fi_pingpong.sh PROVIDER_DIR rdm|dgram   (FI_SPRAY_DATAPATH picks the datapath)
# With SPRAY_APART=1 each process gets a /dev/shm of its own (a mount namespace, as root),
# so auto finds no shared-memory region of the other and joins them by UDP, as it joins
# processes on two hosts.
set -euo pipefail
dir=$1
ep=$2
command -v fi_pingpong >/dev/null || { echo "SKIP: fi_pingpong (libfabric-bin) not installed"; exit 77; }
export FI_PROVIDER_PATH=$dir FI_PROVIDER=spray FI_SPRAY_DATAPATH=${FI_SPRAY_DATAPATH:-auto}
if [[ $FI_SPRAY_DATAPATH == verbs ]] && ! compgen -G '/sys/class/infiniband_verbs/uverbs*' >/dev/null; then
  echo "SKIP: no RDMA device on this machine (/sys/class/infiniband_verbs has no uverbs device)"
  exit 77
fi
source "$(dirname "${BASH_SOURCE[0]}")/oob_port.sh"
apart=()
if [[ ${SPRAY_APART:-0} == 1 ]]; then
  unshare --mount sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null ||
    { echo "SKIP: cannot give a process a /dev/shm of its own (needs root and unshare)"; exit 77; }
  apart=(unshare --mount sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh)
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
cd "$logs"
if [[ $ep == rdm ]]; then sizes="0 8 1024 4096 65536 1048576"; else sizes="8 512 1024"; fi
# One fi_pingpong pair at `size` bytes: 0 when both ends finished; 2 when the server
# found its port taken (oob_port_was_taken); else 1, with the logs shown.
run_size() {
  local size=$1 iters=$(( $1 >= 1048576 ? 50 : 500 ))
  port=$(free_oob_port)  # not fi_pingpong's default: tests run in parallel
  timeout 60 "${apart[@]}" fi_pingpong -p spray -e "$ep" -I "$iters" -S "$size" -c -B "$port" \
    > server.log 2>&1 &
  server=$!
  wait_oob_listen "$port" "$server"
  if ! timeout 60 "${apart[@]}" fi_pingpong -p spray -e "$ep" -I "$iters" -S "$size" -c \
      -P "$port" 127.0.0.1 > client.log 2>&1; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    oob_port_was_taken server.log && return 2
    echo "FAIL: client, $size bytes"; cat client.log; cat server.log; return 1
  fi
  wait "$server" || { echo "FAIL: server, $size bytes"; cat server.log; return 1; }
  tail -1 client.log
}
for size in $sizes; do
  for attempt in 1 2 3; do
    status=0
    run_size "$size" || status=$?
    (( status == 2 )) || break
    echo "RETRY: $size bytes (out-of-band port $port was taken meanwhile)"
  done
  (( status == 0 )) || exit 1
done
echo "PASS: fi_pingpong $ep over spray ($FI_SPRAY_DATAPATH${apart:+, /dev/shm apart})"
