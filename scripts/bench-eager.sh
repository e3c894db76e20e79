#!/usr/bin/env bash
# Decode-step time of the same small models in lynx and in Python PyTorch eager, on the same
# libtorch version and device, at batch 1 and 16 and two context lengths; prints a table with
# the ratio.
#
#   scripts/bench-eager.sh [--device cpu|cuda:N] [--dtype fp32|bf16|fp16] [--rounds N] [--quick]
#
# --quick: one round of the tiny model at batch 1 and context 128 with short warm-up and
# measurement: a check that the script still works (the test suite runs it), not a figure.
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
# Python runs torch of the same version lynx links (scripts/bench-python.sh: the full PyPI wheel
# in a venv in the lynx cache, made once; LYNX_BENCH_PYTHON=/path/to/python uses a Python that
# already has torch 2.11 instead, as GPU hosts do).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

device=cpu
dtype=fp32
rounds=5
quick=false
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) quick=true; shift ;;
    *) lynx_die "unknown argument $1 (use --device D, --dtype fp32|bf16|fp16, --rounds N, --quick)" ;;
  esac
done
# What is measured: the models, the decode grid, warm-up and measurement (seconds, steps).
models="tiny small"
batches="1, 16"
ctxs="128, 1024"
warmup_min_s=5.0 warmup_max_s=10.0 warmup_window_s=2.0
min_steps=50 measure_min_s=2.0 max_steps=2000
if $quick; then
  rounds=1 models=tiny batches=1 ctxs=128
  warmup_min_s=0.5 warmup_max_s=1.0 warmup_window_s=0.5
  min_steps=5 measure_min_s=0.1 max_steps=50
fi
case "$dtype" in fp32) torch_dtype=float32 ;; bf16) torch_dtype=bfloat16 ;; fp16) torch_dtype=float16 ;;
  *) lynx_die "--dtype $dtype: use fp32, bf16 or fp16" ;; esac
torch_device=${device/rocm/cuda}

# LYNX_BIN: a lynx binary already built (the test suite's); else build the release one.
lynx=${LYNX_BIN:-}
if [ -z "$lynx" ]; then
  cargo build --release --locked --quiet --manifest-path "$lynx_repo/Cargo.toml" -p lynx-cli
  lynx="$lynx_repo/target/release/lynx"
fi
python=$("$lynx_repo/scripts/bench-python.sh")

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
min_s = $warmup_min_s
max_s = $warmup_max_s
window_s = $warmup_window_s
max_drift = 10.0
max_spread = 100.0
max_clock_drift = 10.0
max_power_drift = 10.0
max_temperature_change_c = 1000.0
[measure]
min_steps = $min_steps
min_s = $measure_min_s
max_steps = $max_steps
[prefill]
batches = [1]
prompt_lens = [16]
[decode]
batches = [$batches]
ctxs = [$ctxs]
TOML
}
model tiny 2 128 352 1024
model small 4 256 704 4096

# result_file DIR: the result of the one run under lynx's --out DIR (DIR/<device>/<run id>/<run id>.json).
result_file() {
  local run
  for run in "$1"/*/*/; do
    run=${run%/}
    [ -f "$run/${run##*/}.json" ] && { printf '%s\n' "$run/${run##*/}.json"; return; }
  done
  lynx_die "no lynx result under $1"
}

# run_lynx MODEL ROUND / run_eager MODEL ROUND
run_lynx() {
  local rc=0
  "$lynx" run --suite "$1" --models "$work/models" --out "$work/results-$1-$2" \
    --device "$device" --unsigned > "$work/lynx-$1-$2.txt" 2>&1 || rc=$?
  # Exit 1 is a run that failed a check (equilibrium, say) and kept its figures: a step time is
  # still a step time, but say which check.
  case $rc in
    0) ;;
    1) printf 'bench: warning: %s\n' "$(grep -m1 'lynx: error' "$work/lynx-$1-$2.txt")" >&2 ;;
    *) cat "$work/lynx-$1-$2.txt" >&2; lynx_die "lynx run failed (exit $rc)" ;;
  esac
  result_file "$work/results-$1-$2" > "$work/result-$1-$2.path"
}
run_eager() {
  local threads spec done
  threads=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
  # libtorch's default intra-op threads are the physical cores; lynx records the number it used.
  done=$(cat "$work"/result-"$1"-*.path 2>/dev/null | head -n 1)
  if [ -n "$done" ]; then
    threads=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["harness"]["torch_threads"])' "$done")
  fi
  spec=$(python3 - "$work/models/$1.toml" "$torch_device" "$torch_dtype" "$threads" "[$batches]" "[$ctxs]" \
    "$min_steps" "$measure_min_s" "$max_steps" <<'PY'
import json, sys, tomllib
shape = tomllib.load(open(sys.argv[1], "rb"))
flat = dict(shape, **shape["attention"], **shape["mlp"])
print(json.dumps(dict(shape=flat, device=sys.argv[2], dtype=sys.argv[3], threads=int(sys.argv[4]),
                      batches=json.loads(sys.argv[5]), ctxs=json.loads(sys.argv[6]),
                      measure=dict(min_steps=int(sys.argv[7]), min_s=float(sys.argv[8]),
                                   max_steps=int(sys.argv[9])))))
PY
)
  "$python" "$(dirname "${BASH_SOURCE[0]}")/bench/eager_decode.py" "$spec" > "$work/eager-$1-$2.jsonl" 2>"$work/eager-$1-$2.err" \
    || { cat "$work/eager-$1-$2.err" >&2; lynx_die "Python eager failed"; }
}

for name in $models; do
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

python3 - "$work" "$rounds" "$device" "$dtype" $models <<'PY'
import json, statistics, sys
work, rounds, device, dtype, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
for name in names:
    lynx, eager = {}, {}
    for r in range(1, rounds + 1):
        result = json.load(open(open(f"{work}/result-{name}-{r}.path").read().strip()))
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
