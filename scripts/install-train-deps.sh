#!/usr/bin/env bash
# Installs the Debian 12 packages of the training tools (tools/eagle/train.py,
# tools/draft_model/train.py, both on tools/common/llama_train.py): CPU PyTorch and
# NumPy, and OpenBLAS (Debian's torch calls the system BLAS; the reference one is 6x slower). Not
# part of CI (scripts/install-deps.sh without arguments): it is large and only the trainer needs
# it. Safe to run again.
set -euo pipefail
exec "$(dirname "$0")/install-deps.sh" python3 python3-numpy python3-torch libopenblas0-pthread
