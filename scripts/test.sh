#!/usr/bin/env bash
# Builds specdec from scratch and runs every test (GPU tests skip without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf build/default
cmake --preset default
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)"
