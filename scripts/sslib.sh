#!/usr/bin/env bash
# Install Python's securesystemslib (an independent DSSE implementation the tests verify lynx's
# envelopes with) into the cache folder once, and print the folder to put on PYTHONPATH.
#   export LYNX_SSLIB_PYTHONPATH=$(scripts/sslib.sh)
set -euo pipefail
version=1.6.0
cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/python/securesystemslib-$version"
if [ ! -e "$prefix/.complete" ]; then
  python=${LYNX_PYTHON:-python3}
  rm -rf "$prefix"
  mkdir -p "$prefix"
  "$python" -m pip install --quiet --disable-pip-version-check --target "$prefix" \
    "securesystemslib[crypto]==$version" >&2
  touch "$prefix/.complete"
fi
echo "$prefix"
