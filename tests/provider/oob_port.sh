# Sourced by the fi_pingpong tests: an out-of-band TCP port for fi_pingpong's -B/-P,
# waiting for the server to listen on it, and telling when another process took the
# port first (oob_port_was_taken).
#
# free_oob_port prints a random port below the kernel's ephemeral range that no TCP
# socket uses now, in any state. Tests run in parallel (ctest -j), so:
#  - a port derived from the PID collided: two scripts started together got neighbouring
#    PIDs, and one script's next size used the port the other had just bound (CI,
#    2026-11-23);
#  - a port that no socket listened on could still be some connection's local port
#    (every outgoing connection takes one from the ephemeral range, and keeps it through
#    TIME_WAIT), so bind() failed with "Address already in use" (a later CI run that day).
free_oob_port() {
  local low high port
  read -r low high < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  (( low > 10000 )) || { echo "ephemeral ports start at $low: no room below" >&2; return 1; }
  for _ in $(seq 50); do
    port=$(( 10000 + (RANDOM * 32768 + RANDOM) % (low - 10000) ))
    if [[ -z $(ss -Htan "sport = :$port" 2>/dev/null) ]]; then
      echo "$port"
      return 0
    fi
  done
  echo "no free out-of-band port found" >&2
  return 1
}

# wait_oob_listen PORT PID: returns once a socket listens on PORT, PID has exited, or
# 10 s have passed. The client connects once and fails with "connection refused" if
# the server is not listening yet; a server slow to start under load (parallel tests)
# did that after a fixed sleep.
wait_oob_listen() {
  for _ in $(seq 100); do
    [[ -n $(ss -Htln "sport = :$1" 2>/dev/null) ]] && return 0
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
}

# oob_port_was_taken SERVER_LOG: whether the fi_pingpong server could not bind its port.
# free_oob_port looks before the server binds, and in between another process can take
# the port (CI, 2026-11-27: the server died with "bind(): ... Address already in use"
# and its client was refused). The callers then try the size again on another port.
oob_port_was_taken() {
  grep -q "Address already in use" "$1"
}
