#!/usr/bin/env bash
# Builds specdec and runs its main job: specbench replays Spec-Bench's real Vicuna-7B answers with
# PLD, CASD and our tree drafters and prints the comparison. Extra arguments go to
# `specbench compare` (e.g. --data-dir D, --budget N, --json OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
exec build/default/bench/specbench/specbench compare pld casd casd_prompt tree tree_history tree,casd "$@"
