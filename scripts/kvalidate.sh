#!/usr/bin/env bash
# Install Python's kubernetes-validate (the Kubernetes resource schemas, offline) into the cache
# folder once, and print the folder to put on PYTHONPATH:
#   PYTHONPATH=$(scripts/kvalidate.sh) python3 -m kubernetes_validate --strict FILE
set -euo pipefail
version=1.37.0
cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/python/kubernetes-validate-$version"
source "$(dirname "${BASH_SOURCE[0]}")/pip-target.sh"
lynx_pip_target "$prefix" "kubernetes-validate==$version"
echo "$prefix"
