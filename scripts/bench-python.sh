#!/usr/bin/env bash
# Print a Python that has torch of the version lynx links (scripts/libtorch.sh's pin), for the
# benchmarks that compare lynx with Python PyTorch: $LYNX_BENCH_PYTHON when set (GPU hosts ship
# one; it is checked), else a venv in the lynx cache with the full PyPI wheel and its
# dependencies, made on first use (about 5 GB, once; the trimmed libtorch of
# scripts/libtorch.sh cannot serve Python, whose torch._C links the CUDA libraries).
#   python=$(scripts/bench-python.sh)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'bench: error: %s\n' "$*" >&2; exit 2; }
source "$repo/scripts/pins.sh"
torch_version=$(lynx_pin torch)
if [ -n "${LYNX_BENCH_PYTHON:-}" ]; then
  python=$LYNX_BENCH_PYTHON
else
  cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
  venv="$cache/bench-venv-torch-$torch_version"
  if [ ! -f "$venv/.complete" ]; then
    printf 'bench: installing torch==%s into %s (once)\n' "$torch_version" "$venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    PIP_ROOT_USER_ACTION=ignore "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "torch==$torch_version" >&2 || die "pip install torch==$torch_version failed"
    touch "$venv/.complete"
  fi
  python="$venv/bin/python"
fi
"$python" -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(v != '$torch_version')" 2>/dev/null \
  || die "$python has no torch $torch_version"
echo "$python"
