# Sourced by the scripts that install a pinned wheel (libtorch.sh, nvrtc.sh, bench-python.sh).
#
# lynx_pin KEY
#   Print the value of KEY in [workspace.metadata.libtorch] of the repository's Cargo.toml, the
#   one place the torch and CUDA wheel versions are pinned; exit 2 naming KEY when it is missing.
lynx_pin() {
  local cargo value
  cargo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Cargo.toml"
  value=$(awk -v key="$1" '
    /^\[/ { in_section = ($0 == "[workspace.metadata.libtorch]") }
    in_section && $1 == key { gsub(/"/, "", $3); print $3; exit }
  ' "$cargo")
  [ -n "$value" ] || { printf 'lynx: error: no %s in [workspace.metadata.libtorch] of %s\n' "$1" "$cargo" >&2; exit 2; }
  printf '%s' "$value"
}
