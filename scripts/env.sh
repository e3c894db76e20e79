# Sourced by scripts/lynx and scripts/test.sh: everything building lynx needs, set up once and
# idempotently. Exports LIBTORCH (see scripts/libtorch.sh for where it comes from).

lynx_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

lynx_die() { printf 'lynx set-up: error: %s\n' "$*" >&2; exit 2; }

# torch-sys compiles a C++ shim against libtorch's headers.
if ! command -v c++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'lynx set-up: installing g++\n' >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++) >&2 \
      || lynx_die "apt-get install g++ failed"
  else
    lynx_die "no C++ compiler (c++): install g++"
  fi
fi

command -v cargo >/dev/null 2>&1 || lynx_die "no cargo: install a Rust toolchain (rustup)"

# rust-toolchain.toml pins the toolchain by version. Where the installed stable toolchain is that
# version, name it so, so rustup does not try to download it again.
lynx_toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$lynx_repo/rust-toolchain.toml")
if command -v rustup >/dev/null 2>&1 && ! rustup toolchain list | grep -q "^$lynx_toolchain-"; then
  lynx_stable_sysroot=$(rustup run stable rustc --print sysroot 2>/dev/null || true)
  if [ -n "$lynx_stable_sysroot" ] && rustup run stable rustc --version | grep -q "^rustc $lynx_toolchain "; then
    rustup toolchain link "$lynx_toolchain" "$lynx_stable_sysroot" >&2
  fi
fi

LIBTORCH=$("$lynx_repo/scripts/libtorch.sh") || exit $?
export LIBTORCH
