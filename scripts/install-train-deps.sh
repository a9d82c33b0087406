#!/usr/bin/env bash
# Installs the Debian 12 packages of the training tools (tools/eagle/train.py): PyTorch for the
# CPU. Not part of CI (scripts/install-deps.sh): it is large and only the trainer needs it. Safe
# to run again.
set -euo pipefail

packages=(python3 python3-numpy python3-torch)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "specdec: installing missing Debian packages for training: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
