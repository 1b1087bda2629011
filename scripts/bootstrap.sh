#!/usr/bin/env bash
# Fresh machine to a running Spray: install what is missing, build, run the main job
# (the collectives demonstration: 4 local ranks, all-reduce and all-to-all over `spray`
# on loopback UDP beside libfabric's `tcp` and Open MPI, results checked).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build
./scripts/coll-demo.sh build "$@"
