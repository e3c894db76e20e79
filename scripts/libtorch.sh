#!/usr/bin/env bash
# Provides the libtorch that `tch` builds and runs against, and prints its folder (the value for
# LIBTORCH) as the last line of stdout. Progress goes to stderr.
#
# Where it comes from, first match wins:
#   1. LIBTORCH already set: a libtorch folder (lib/, include/) or a PyTorch package folder
#      (site-packages/torch). It is checked, never modified.
#   2. LYNX_TORCH_PYTHON=python3 (any interpreter): the torch package that interpreter imports,
#      as on GPU hosts that ship PyTorch.
#   3. Otherwise the PyPI torch wheel, installed once into the cache folder
#      ${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}/libtorch/torch-<version>,
#      with only the two CUDA runtime wheels that libtorch's CPU part needs and the CUDA `crt/`
#      headers lynx's CUDA shim compiles against. A finished install is marked, so a second call
#      does no work; pip's own cache keeps the downloads.
#
# The versions come from [workspace.metadata.libtorch] in the repository's Cargo.toml, next to the
# tch pin, so there is one place to change them.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf 'libtorch: %s\n' "$*" >&2; }
die() { printf 'libtorch: error: %s\n' "$*" >&2; exit 2; }

source "$repo/scripts/pins.sh"
torch_version=$(lynx_pin torch)
cudart_version=$(lynx_pin nvidia-cuda-runtime)
cupti_version=$(lynx_pin nvidia-cuda-cupti)
crt_version=$(lynx_pin nvidia-cuda-crt)

# version_of DIR: the torch version a libtorch folder declares (pip's version.py or the
# build-version file of a libtorch archive), without its local part (+cpu, +cu130).
version_of() {
  local dir=$1 v=""
  if [ -f "$dir/version.py" ]; then
    v=$(sed -n "s/^__version__ *= *['\"]\([^'\"]*\)['\"].*/\1/p" "$dir/version.py" | head -n 1)
  elif [ -f "$dir/build-version" ]; then
    v=$(head -n 1 "$dir/build-version")
  fi
  printf '%s' "${v%%+*}"
}

# check DIR WHAT: DIR is a usable libtorch of the pinned version, or exit 2 naming WHAT.
check() {
  local dir=$1 what=$2 v
  [ -f "$dir/lib/libtorch_cpu.so" ] || die "$what ($dir) has no lib/libtorch_cpu.so: point it at a libtorch folder or at site-packages/torch"
  [ -d "$dir/include/torch" ] || die "$what ($dir) has no include/torch: a PyTorch install without headers cannot build tch"
  v=$(version_of "$dir")
  [ -n "$v" ] || die "$what ($dir) declares no version (no version.py or build-version)"
  [ "$v" = "$torch_version" ] || die "$what ($dir) is torch $v; tch here needs torch $torch_version (see Cargo.toml)"
}

if [ -n "${LIBTORCH:-}" ]; then
  check "$LIBTORCH" "LIBTORCH"
  say "using LIBTORCH=$LIBTORCH"
  printf '%s\n' "$LIBTORCH"
  exit 0
fi

if [ -n "${LYNX_TORCH_PYTHON:-}" ]; then
  dir=$("$LYNX_TORCH_PYTHON" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) \
    || die "LYNX_TORCH_PYTHON=$LYNX_TORCH_PYTHON cannot import torch"
  check "$dir" "the torch of LYNX_TORCH_PYTHON"
  say "using the torch of $LYNX_TORCH_PYTHON: $dir"
  printf '%s\n' "$dir"
  exit 0
fi

cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/libtorch/torch-$torch_version"
marker="$prefix/.lynx-installed"
wanted="torch==$torch_version nvidia-cuda-runtime==$cudart_version.* nvidia-cuda-cupti==$cupti_version.* nvidia-cuda-crt==$crt_version.*"

if [ -f "$marker" ] && [ "$(cat "$marker")" = "$wanted" ]; then
  check "$prefix/torch" "the cached libtorch"
  printf '%s\n' "$prefix/torch"
  exit 0
fi

python=${PYTHON:-python3}
command -v "$python" >/dev/null || die "no $python: install python3 and python3-pip (apt-get install python3-pip)"
if ! "$python" -m pip --version >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing python3-pip"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip) >&2 \
      || die "apt-get install python3-pip failed"
  else
    die "$python has no pip: install python3-pip"
  fi
fi

say "installing $wanted into $prefix (about 1.2 GB, once)"
mkdir -p "$cache/libtorch"
staging=$(mktemp -d "$cache/libtorch/.staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
# --target installs beside nothing else (no dependency resolution: torch's other CUDA wheels are
# what a CPU host does not need); pip's cache keeps the downloaded wheels.
# shellcheck disable=SC2086
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$staging" $wanted >&2 \
  || die "pip install of $wanted failed"
check "$staging/torch" "the freshly installed wheel"
printf '%s' "$wanted" > "$staging/.lynx-installed"
rm -rf "$prefix"
mv "$staging" "$prefix"
trap - EXIT
say "installed"
printf '%s\n' "$prefix/torch"
