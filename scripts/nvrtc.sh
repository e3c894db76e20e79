#!/usr/bin/env bash
# Install NVRTC (PyPI's nvidia-cuda-nvrtc wheel, the version torch's CUDA 13.0 toolkit pin
# names; about 220 MB) into the cache folder once, and print the folder holding libnvrtc.so.13.
# NVRTC compiles CUDA C++ to PTX with no GPU and no driver, so the tests compile lynx's probe
# kernels with the real compiler on any host:
#   export LYNX_NVRTC_DIR=$(scripts/nvrtc.sh)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$repo/scripts/pins.sh"
version=$(lynx_pin nvidia-cuda-nvrtc)
cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/nvrtc/nvidia-cuda-nvrtc-$version"
source "$repo/scripts/pip-target.sh"
lynx_pip_target "$prefix" --no-deps "nvidia-cuda-nvrtc==$version.*"
lib=$(dirname "$(find "$prefix" -name 'libnvrtc.so.*' -not -name '*alt*' | head -n 1)")
[ -f "$lib/libnvrtc.so.13" ] || { echo "nvrtc: no libnvrtc.so.13 under $prefix" >&2; exit 1; }
echo "$lib"
