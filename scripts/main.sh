#!/usr/bin/env bash
# Builds specdec and runs its main job. Extra arguments go to the program.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
exec build/default/examples/01_quickstart "$@"
