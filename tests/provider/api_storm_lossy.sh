#!/usr/bin/env bash
# The provider API storm (api_storm_test.cc) over kernel UDP losing a random 5 % of its
# datagrams: run in a network namespace of its own (unshare -n: nothing to clean up, the
# namespace and its nftables rule go when the process ends), where nftables drops every
# twentieth UDP datagram at random on output. Every call's outcome must be as without loss:
# the storm's oracle does not relax, only the peer-death budget is the default one rather
# than the suite's fail-fast one, so that a few lost retransmissions in a row are not
# taken for a dead peer. Prints nftables' count of what it dropped.
# Usage: api_storm_lossy.sh PROVIDER_TEST FIRST_SEED LAST_SEED
# Exit 77 (ctest: skipped) when not root or namespaces or nftables are unavailable.
set -euo pipefail
test_binary=$1
first=$2
last=$3
skip() { echo "SKIP: $*"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root for a network namespace"
command -v nft >/dev/null || skip "nftables (nft) is not installed"
command -v unshare >/dev/null || skip "unshare is not installed"
unshare -n true 2>/dev/null || skip "cannot create a network namespace here"

export FI_SPRAY_DATAPATH=udp FI_SPRAY_RETRIES=16 FI_SPRAY_RTO_MAX_MS=100
export SPRAY_STORM_SEEDS="$first-$last"
exec unshare -n bash -c '
  set -euo pipefail
  ip link set lo up
  nft add table inet storm_loss
  nft add chain inet storm_loss out "{ type filter hook output priority 0; }"
  nft add rule inet storm_loss out meta l4proto udp numgen random mod 20 == 0 counter drop
  status=0
  "$0" --gtest_filter="Seeds/ApiStormSeed.*" || status=$?
  echo "nftables dropped: $(nft list chain inet storm_loss out | grep -o "packets [0-9]*")"
  exit $status
' "$test_binary"
