#!/usr/bin/env bash
# Installs every Debian 12 package Spray needs to build and test. Idempotent:
# packages already present are skipped, so a prepared machine pays nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  clang libclang-rt-14-dev          # libFuzzer targets and the sanitizer runtime
  clang-format                       # scripts/check-format.sh, the suite's first step
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  iproute2 nftables                  # network-namespace multipath tests
  libibverbs-dev rdma-core           # the verbs datapath links the real libibverbs
  libdpdk-dev ethtool                # the DPDK datapath; ethtool sets veth offloads in its tests
  libnl-route-3-dev                  # the DPDK datapath reads the kernel's IPv6 neighbours
  libfabric-dev libfabric-bin        # the provider builds against libfabric; fi_pingpong, fi_info
  openmpi-bin libopenmpi-dev         # Open MPI's OFI MTL runs the MPI tests over the provider
  libboost-dev                       # Boost.Asio: the collectives' rendezvous store
  libssl-dev                         # OpenSSL: UET TSS's AES-256-GCM and CMAC key derivation
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
