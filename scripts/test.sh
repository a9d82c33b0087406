#!/usr/bin/env bash
# Builds specdec from scratch and runs every test (GPU tests skip without a device), in build/test:
# the `test` preset, whose programs compile at -Og but for the kernels (CMakeLists.txt,
# SPECDEC_TEST_BUILD); the main job's build/default is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf build/test
cmake --preset test
cmake --build --preset test -j "$(nproc)"
ctest --preset test -j "$(nproc)"
