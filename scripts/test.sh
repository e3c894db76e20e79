#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace on CPU with real libtorch.
# Sets up whatever is missing first (scripts/env.sh). Exits non-zero on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$lynx_repo"
# The ROCm SMI backend is tested against Debian's real library (its init fails without an AMD
# GPU, and lynx must report that reason); install it where we can.
if ! ldconfig -p 2>/dev/null | grep -q librocm_smi64.so.1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq librocm-smi64-1) >&2 \
    || echo "test: librocm-smi64-1 could not be installed; the ROCm SMI test checks the missing-library path" >&2
fi
# The Slurm template runs on a real one-node cluster in the tests: Debian's slurm-wlm and munge.
if ! command -v slurmctld >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >&2 \
    || echo "test: slurm-wlm could not be installed; the Slurm test will say it skipped" >&2
fi
# The results site is checked in a real headless browser: Debian's chromium.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2 \
    || echo "test: chromium could not be installed; the site test will fail saying so" >&2
fi
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
# securesystemslib: the independent DSSE implementation lynx's envelopes are checked against.
LYNX_SSLIB_PYTHONPATH=$(scripts/sslib.sh)
export LYNX_SSLIB_PYTHONPATH
# NVRTC: the real CUDA compiler the probe kernels are compiled with in the tests (no GPU needed).
LYNX_NVRTC_DIR=$(scripts/nvrtc.sh)
export LYNX_NVRTC_DIR
# kubernetes-validate: the Kubernetes schemas the fleet manifest is validated against.
LYNX_KVALIDATE_PYTHONPATH=$(scripts/kvalidate.sh)
export LYNX_KVALIDATE_PYTHONPATH
# Python PyTorch of lynx's libtorch version: scripts/bench-eager.sh --quick runs in the tests.
LYNX_BENCH_PYTHON=$(scripts/bench-python.sh)
export LYNX_BENCH_PYTHON
# Every test binary runs even after one fails, so that a failure names every failing test. The
# tests' temporary folders go in a folder of this run's own, which must be empty at the end: a
# test that leaves one behind (tempfile's `.tmp…`, say from a static that is never dropped)
# would fill the /tmp of every machine that runs the tests. That check, and the records below,
# come after failing tests too: a failure's leftovers are as much a defect as a pass's.
mkdir -p target/tmp
test_tmp=$(mktemp -d "$lynx_repo/target/tmp/test-run.XXXXXX")
tests_rc=0
TMPDIR=$test_tmp cargo test --workspace --locked --no-fail-fast || tests_rc=$?
left=$(find "$test_tmp" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)
if [ -n "$left" ]; then
  echo "test: the tests left these in their temporary folder ($test_tmp):" >&2
  echo "$left" | sed 's/^/  /' >&2
else
  rmdir "$test_tmp"
fi
# Whether the Slurm test ran on a real cluster or could not start one (and why), whether the
# full-disk test could mount its tmpfs, and whether the CPU-quota test could make its cgroup.
cat target/tmp/slurm-test.txt 2>/dev/null || echo "test: the Slurm test left no record"
cat target/tmp/full-disk-test.txt 2>/dev/null || echo "test: the full-disk test left no record"
cat target/tmp/cpu-quota-test.txt 2>/dev/null || echo "test: the CPU-quota test left no record"
if [ "$tests_rc" != 0 ]; then
  echo "test: cargo test failed (exit $tests_rc)" >&2
  exit "$tests_rc"
fi
[ -z "$left" ] || exit 1
