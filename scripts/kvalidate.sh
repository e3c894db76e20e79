#!/usr/bin/env bash
# Install Python's kubernetes-validate (the Kubernetes resource schemas, offline) into the cache
# folder once, and print the folder to put on PYTHONPATH:
#   PYTHONPATH=$(scripts/kvalidate.sh) python3 -m kubernetes_validate --strict FILE
set -euo pipefail
version=1.37.0
cache=${LYNX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lynx}
prefix="$cache/python/kubernetes-validate-$version"
if [ ! -e "$prefix/.complete" ]; then
  python=${LYNX_PYTHON:-python3}
  rm -rf "$prefix"
  mkdir -p "$prefix"
  PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --target "$prefix" \
    "kubernetes-validate==$version" >&2
  touch "$prefix/.complete"
fi
echo "$prefix"
