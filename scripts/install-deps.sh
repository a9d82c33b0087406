#!/usr/bin/env bash
# Installs the Debian 12 packages specdec needs that are missing, or the packages given as
# arguments (scripts/install-train-deps.sh). Safe to run again.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  catch2 librange-v3-dev libbenchmark-dev
  libsentencepiece-dev nlohmann-json3-dev libcli11-dev libfmt-dev libdivsufsort-dev libeigen3-dev libfaiss-dev
  # the Python module and its tests, for Debian's /usr/bin/python3 (torch: CPU only)
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
)
[ $# -eq 0 ] || packages=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "specdec: installing missing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
