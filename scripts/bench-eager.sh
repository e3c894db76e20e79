#!/usr/bin/env bash
# Decode-step time of the same small models in lynx and in Python PyTorch eager, on the same
# libtorch version and device, at batch 1 and 16 and two context lengths; prints a table with
# the ratio.
#
#   scripts/bench-eager.sh [--device cpu|cuda:N] [--dtype fp32|bf16|fp16] [--rounds N]
#
# Two models: "tiny" (2 layers of width 128; its weights fit in cache, so per-op host overhead
# dominates at batch 1) and "small" (4 layers of width 256). The Python side
# (scripts/bench/eager_decode.py) runs the same operations in the same order as lynx's decoder,
# so the ratio measures what the host language and harness cost, not a different model.
#
# Shared machines are noisy (±20% between back-to-back runs was seen here), so the two sides run
# alternately for N rounds (default 5; the order swaps every round) and the table gives, per cell,
# the median over rounds of each side's median step time and the range of the per-round ratio.
#
# Python runs torch of the same version lynx links (scripts/libtorch.sh's pin), from the full PyPI
# wheel with its dependencies, installed into a venv in the lynx cache on first use (a few GB,
# once; the trimmed libtorch of scripts/libtorch.sh cannot serve Python, whose torch._C links
# the CUDA libraries). LYNX_BENCH_PYTHON=/path/to/python uses a Python that already has torch
# 2.11 instead (GPU hosts ship one).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

device=cpu
dtype=fp32
rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) lynx_die "unknown argument $1 (use --device D, --dtype fp32|bf16|fp16, --rounds N)" ;;
  esac
done
case "$dtype" in fp32) torch_dtype=float32 ;; bf16) torch_dtype=bfloat16 ;; fp16) torch_dtype=float16 ;;
  *) lynx_die "--dtype $dtype: use fp32, bf16 or fp16" ;; esac
torch_device=${device/rocm/cuda}

cargo build --release --locked --quiet --manifest-path "$lynx_repo/Cargo.toml" -p lynx-cli

torch_version=$(awk '/^\[workspace.metadata.libtorch\]/{s=1} s && $1=="torch"{gsub(/"/,"",$3); print $3; exit}' "$lynx_repo/Cargo.toml")
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
      "torch==$torch_version" >&2 || lynx_die "pip install torch==$torch_version failed"
    touch "$venv/.complete"
  fi
  python="$venv/bin/python"
fi
"$python" -c "import torch, sys; v = torch.__version__.split('+')[0]; sys.exit(v != '$torch_version')" 2>/dev/null \
  || lynx_die "$python has no torch $torch_version"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/models/suites"

# model NAME LAYERS HIDDEN INTERMEDIATE VOCAB: a model file and its benchmark suite.
model() {
  cat > "$work/models/$1.toml" <<TOML
name = "$1"
vocab_size = $5
hidden_size = $3
num_layers = $2
rms_norm_eps = 1e-5
[attention]
kind = "gqa"
num_heads = 8
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = $4
TOML
  cat > "$work/models/suites/$1.toml" <<TOML
name = "bench-$1"
model = "$1"
precision = "$dtype"
seed = 1
[warmup]                      # step times are compared, not thermal states: loose bounds
min_s = 5.0
max_s = 10.0
window_s = 2.0
max_drift = 10.0
max_spread = 100.0
max_clock_drift = 10.0
max_power_drift = 10.0
max_temperature_change_c = 1000.0
[measure]
min_steps = 50
min_s = 2.0
max_steps = 2000
[prefill]
batches = [1]
prompt_lens = [16]
[decode]
batches = [1, 16]
ctxs = [128, 1024]
TOML
}
model tiny 2 128 352 1024
model small 4 256 704 4096

# run_lynx MODEL ROUND / run_eager MODEL ROUND
run_lynx() {
  "$lynx_repo/target/release/lynx" run --suite "$1" --models "$work/models" --out "$work/results-$1-$2" \
    --device "$device" > "$work/lynx-$1-$2.txt" 2>&1 || { cat "$work/lynx-$1-$2.txt" >&2; lynx_die "lynx run failed"; }
}
run_eager() {
  local threads spec
  threads=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
  # libtorch's default intra-op threads are the physical cores; lynx records the number it used.
  if compgen -G "$work/results-$1-*/*/*.json" > /dev/null; then
    threads=$(python3 -c 'import glob,json,sys; print(json.load(open(glob.glob(sys.argv[1])[0]))["harness"]["torch_threads"])' \
      "$work/results-$1-*/*/*.json")
  fi
  spec=$(python3 - "$work/models/$1.toml" "$torch_device" "$torch_dtype" "$threads" <<'PY'
import json, sys, tomllib
shape = tomllib.load(open(sys.argv[1], "rb"))
flat = dict(shape, **shape["attention"], **shape["mlp"])
print(json.dumps(dict(shape=flat, device=sys.argv[2], dtype=sys.argv[3], threads=int(sys.argv[4]),
                      batches=[1, 16], ctxs=[128, 1024],
                      measure=dict(min_steps=50, min_s=2.0, max_steps=2000))))
PY
)
  "$python" "$(dirname "${BASH_SOURCE[0]}")/bench/eager_decode.py" "$spec" > "$work/eager-$1-$2.jsonl" 2>/dev/null
}

for name in tiny small; do
  for round in $(seq 1 "$rounds"); do
    printf 'bench: %s, round %s of %s\n' "$name" "$round" "$rounds" >&2
    if [ $((round % 2)) = 1 ]; then
      run_lynx "$name" "$round"
      run_eager "$name" "$round"
    else
      run_eager "$name" "$round"
      run_lynx "$name" "$round"
    fi
  done
done

python3 - "$work" "$rounds" "$device" "$dtype" <<'PY'
import glob, json, statistics, sys
work, rounds, device, dtype = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for name in ["tiny", "small"]:
    lynx, eager = {}, {}
    for r in range(1, rounds + 1):
        result = json.load(open(glob.glob(f"{work}/results-{name}-{r}/*/*.json")[0]))
        for cell in result["cells"]:
            if cell["step"] == "decode":
                lynx.setdefault((cell["batch"], cell["ctx"]), []).append(cell["step_time"]["median_s"])
        for line in open(f"{work}/eager-{name}-{r}.jsonl"):
            e = json.loads(line)
            eager.setdefault((e["batch"], e["ctx"]), []).append(e["median_s"])
            torch_version = e["torch"]
    shape = result["config"]["model"]
    print(f"decode step, {name} ({shape['num_layers']} x {shape['hidden_size']}, "
          f"{result['config']['model_parameters'] / 1e6:.1f} M parameters), {device}, {dtype}, "
          f"{result['harness']['torch_threads']} threads, {rounds} alternating rounds; "
          f"lynx on libtorch {result['harness']['libtorch_runtime_version']}, eager on torch {torch_version}")
    print(f"{'BATCH':>5}  {'CTX':>5}  {'LYNX':>9}  {'EAGER':>9}  {'EAGER/LYNX':>10}  {'PER ROUND':>11}")
    for key in sorted(lynx):
        l, e = statistics.median(lynx[key]), statistics.median(eager[key])
        ratios = [b / a for a, b in zip(lynx[key], eager[key])]
        print(f"{key[0]:>5}  {key[1]:>5}  {l * 1e3:>7.3f}ms  {e * 1e3:>7.3f}ms  {e / l:>10.2f}  "
              f"{min(ratios):>5.2f}-{max(ratios):<5.2f}")
    print()
PY
