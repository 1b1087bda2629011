#!/usr/bin/env bash
# Fresh machine to a running Spray: install what is missing, build, run the main job
# (spray-transfer over the emulated lossy multipath fabric, embedded default scenario).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build
./build/tools/spray-transfer "$@"
