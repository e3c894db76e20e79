#!/usr/bin/env bash
# Install Python's securesystemslib (an independent DSSE implementation the tests verify lynx's
# envelopes with) into the cache folder once, and print the folder to put on PYTHONPATH.
#   export LYNX_SSLIB_PYTHONPATH=$(scripts/sslib.sh)
set -euo pipefail
version=1.6.0
cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/python/securesystemslib-$version"
source "$(dirname "${BASH_SOURCE[0]}")/pip-target.sh"
lynx_pip_target "$prefix" "securesystemslib[crypto]==$version"
echo "$prefix"
