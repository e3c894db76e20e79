#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace on CPU with real libtorch.
# Sets up whatever is missing first (scripts/env.sh). Exits non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$lynx_repo"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
cargo test --workspace --locked
