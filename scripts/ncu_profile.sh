#!/usr/bin/env bash
# Nsight Compute on one problem, cute_gemm's kernel and torch.mm's (cuBLAS) side by side, on a
# GPU machine after a build (scripts/gpu_check.sh BUILD_ONLY=1 or a full run):
#   bash scripts/ncu_profile.sh MxNxK [MxNxK ...]
# For each problem (bf16, both operands row-major) and kernel (which = ours, torch): a report
# (--set full with source counters) in /tmp/ncu, and into $OUT/ncu.tar.gz (the device tool brings
# back few files) <shape>_details_<which>.txt (every section) and <shape>_sass_<which>.csv (the
# per-instruction stall samples, with -lineinfo's source lines), for reading without a GPU.
# --clock-control none: the clocks the benchmark sees. ACT=gelu (relu, gelu_tanh, silu) profiles
# addmm(bias, a, b, activation=ACT) with b = w.t() instead (and act(torch.addmm) for torch);
# WHICH="ours" profiles one side only; TAG names the reports (e.g. a CUTE_GEMM_* setting).
set -uo pipefail
OUT="${OUT:-/tmp/out}"; R=/tmp/ncu; mkdir -p "$OUT" "$R"
cat > /tmp/ncu_driver.py <<'PY'
import os, sys, torch, torch.nn.functional as F, cute_gemm
m, n, k = map(int, sys.argv[1].split("x"))
act = os.environ.get("ACT", "")
a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
if act:
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16).t()
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    f = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "silu": F.silu}[act]
    fn = ((lambda a, b: cute_gemm.addmm(bias, a, b, activation=act)) if sys.argv[2] == "ours"
          else (lambda a, b: f(torch.addmm(bias, a, b))))
else:
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    fn = cute_gemm.mm if sys.argv[2] == "ours" else torch.mm
for _ in range(3):
    fn(a, b)
torch.cuda.synchronize()
PY
for arg in "$@"; do
  shape=$arg
  [ -n "${TAG:-}" ] && shape="${arg}_${TAG}"
  [ -n "${ACT:-}" ] && shape="${shape}_${ACT}"
  for which in ${WHICH:-ours torch}; do
    if [ "$which" = ours ]; then filter="regex:gemm_kernel"; else filter="regex:nvjet|sm90|gemm|cutlass"; fi
    timeout 240 ncu --clock-control none --set full --import-source yes -k "$filter" --launch-skip 2 --launch-count 1 \
      -f -o "$R/${shape}_$which" python3 -P /tmp/ncu_driver.py "$arg" "$which" > "$R/${shape}_$which.log" 2>&1 \
      || { tail -5 "$R/${shape}_$which.log"; continue; }
    ncu -i "$R/${shape}_$which.ncu-rep" --page details > "$R/${shape}_details_$which.txt" 2>&1
    ncu -i "$R/${shape}_$which.ncu-rep" --page source --csv --print-source sass > "$R/${shape}_sass_$which.csv" 2>&1
    grep -E "^  [a-z_].*|Duration|SM Frequency|Elapsed Cycles" "$R/${shape}_details_$which.txt" | head -4 | sed "s/^/$shape $which: /"
  done
done
tar -czf "$OUT/ncu.tar.gz" -C "$R" $(cd "$R" && ls *.txt *.csv 2>/dev/null)
