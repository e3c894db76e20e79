#!/usr/bin/env bash
# The roofline's GPU check: on a host with an NVIDIA GPU and lynx built (target/release/lynx, or
# $LYNX_BIN), run `lynx roofline` on the device and compare against the goals:
#   - copy bandwidth (the best native kernel) at least 85% of the datasheet figure
#     (H200: 4.8 TB/s; other boards: pass --datasheet-tbs);
#   - bf16 matmul (cuBLASLt, and libtorch through lynx) at least 85% of what a large
#     torch.matmul reaches in Python PyTorch on the same card, measured here when Python has torch.
#
#   scripts/gpu-check.sh [--device cuda:0] [--datasheet-tbs 4.8] [--python python3] [--quick]
#
# Prints a table with the figures, the goals and PASS/FAIL, and exits 1 if a goal is missed.
# --quick (the test suite's check that the script still works, on any host): the CPU unless
# --device is given, burst probes only, and a goal nothing here could measure is shown as not
# measured without failing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
device=cuda:0
datasheet=4.8
python=${LYNX_BENCH_PYTHON:-python3}
quick=false
device_given=false
sustained_s=10
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; device_given=true; shift 2 ;;
    --quick) quick=true; shift ;;
    --datasheet-tbs) datasheet=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
if $quick; then
  $device_given || device=cpu
  sustained_s=0
fi
lynx=${LYNX_BIN:-$repo/target/release/lynx}
[ -x "$lynx" ] || { echo "gpu-check: no lynx binary at $lynx (build with scripts/lynx, or set LYNX_BIN)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$lynx" roofline --device "$device" --sustained-s "$sustained_s" --json > "$out/roofline.json"

python_tflops=""
if [ "${device%%:*}" = cuda ] && "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  index=${device#cuda:}
  python_tflops=$("$python" - "$index" <<'PY'
import sys, torch
device = torch.device("cuda", int(sys.argv[1]))
n = 8192
a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
with torch.inference_mode():
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
times.sort()
print(2 * n**3 / times[len(times) // 2] / 1e12)
PY
)
fi

status=0
python3 - "$out/roofline.json" "$datasheet" "$python_tflops" "$quick" <<'PY' || status=1
import json, sys
record = json.load(open(sys.argv[1]))
datasheet = float(sys.argv[2]) * 1e12
python_tflops = float(sys.argv[3]) * 1e12 if sys.argv[3] else None
quick = sys.argv[4] == "true"

def best(kind, name_prefix, dtype=None, phase=None):
    values = [p["value"] for p in record["probes"]
              if p["kind"] == kind and p["name"].startswith(name_prefix)
              and (dtype is None or p["dtype"] == dtype) and (phase is None or p["phase"] == phase)
              and isinstance(p["value"], (int, float))]
    return max(values) if values else None

for p in record["probes"]:
    v = p["value"]
    shown = (f"{v / 1e9:.1f} GB/s" if p["kind"] == "bandwidth" else f"{v / 1e12:.1f} TFLOP/s") if isinstance(v, (int, float)) else f"unavailable: {v['unavailable']}"
    print(f"{p['name']:<16} {p['dtype']:<5} {p['phase']:<9} {shown}")
print()
failed = False
def goal(what, value, target, unit, scale):
    global failed
    if value is None or target is None:
        print(f"{what:<44} not measured" + (" (quick mode: not a failure)" if quick else ""))
        failed |= not quick
        return
    ok = value >= 0.85 * target
    failed |= not ok
    print(f"{what:<44} {value / scale:8.1f} {unit}  goal >= {0.85 * target / scale:8.1f}  ({value / target:6.1%})  {'PASS' if ok else 'FAIL'}")
goal("native copy bandwidth vs datasheet", best("bandwidth", "native copy"), datasheet, "GB/s", 1e9)
goal("cuBLASLt bf16 burst vs Python torch.matmul", best("matmul", "cublaslt", "bf16", "burst"), python_tflops, "TFLOP/s", 1e12)
goal("lynx torch bf16 burst vs Python torch.matmul", best("matmul", "torch matmul", "bf16", "burst"), python_tflops, "TFLOP/s", 1e12)
for gap in record.get("gaps", []):
    print(f"libtorch / native {gap['what']}: {gap['ratio']:.1%}")
sys.exit(1 if failed else 0)
PY
exit $status
