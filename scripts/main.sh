#!/usr/bin/env bash
# Builds specbench (build/default, the `default` preset) and runs the main job: specbench replays
# Spec-Bench's real Vicuna-7B answers with PLD, CASD and our tree drafters and prints the
# comparison, with the speed each combination's steps would reach on every GPU whose cost table is
# in docs/gpu-runs/tables/ (modelled from the measured table). Extra arguments go to
# `specbench compare` (e.g. --data-dir D, --budget N, --json OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)" --target specbench
modelled=()
for table in docs/gpu-runs/tables/*.json; do
  if [ -f "$table" ]; then modelled+=(--modelled "$table"); fi
done
exec build/default/bench/specbench/specbench compare pld casd casd_prompt tree tree_history tree,casd "${modelled[@]}" "$@"
