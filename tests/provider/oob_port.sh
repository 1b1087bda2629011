# Sourced by the fi_pingpong tests: an out-of-band TCP port for fi_pingpong's -B/-P.
#
# free_oob_port prints a random port in 20000-59999 that nothing listens on now. Tests
# run in parallel (ctest -j), so a port derived from the PID collided: two scripts
# started together got neighbouring PIDs, and one script's next size used the port the
# other had just bound ("bind(): Address already in use" in CI on 2026-11-23).
free_oob_port() {
  local port
  for _ in $(seq 50); do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    if [[ -z $(ss -Htln "sport = :$port" 2>/dev/null) ]]; then
      echo "$port"
      return 0
    fi
  done
  echo "no free out-of-band port found" >&2
  return 1
}
