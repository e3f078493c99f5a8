#!/usr/bin/env bash
# The one-call routine for a GPU machine (docs/development.md): build for the GPU that is
# there, run the GPU tests and the benchmark, leave logs in $OUT. Run from the repository root:
#   bash scripts/gpu_check.sh [pytest args] [-- bench args]
# OPS_BENCH="<bench/bench_ops.py args>" also runs the fused-epilogue / nn.Linear / gated benchmark
# (OPS_BENCH=all for its defaults). BUILD_ONLY=1 stops after the build; SKIP_BUILD=1 uses the
# build a previous call left (a warm machine) or a wheel built on another machine and installed
# (docs/development.md); SOAK=1 runs scripts/soak.py after the tests (10,000 calls on one thread,
# then 4,000 on four threads); NO_BENCH=1 skips bench/bench_mm.py.
# CUTE_GEMM_LAYOUTS=kn (setup.py) builds the row-major a @ b kernels only, in about a third of the
# time, for a short GPU check (tests then run the "nn" layout only; pass `-- --layout nn` to the
# benchmark, whose default also times nt and tn).
# That machine has torch, ninja and pytest but no network: the nvidia-cutlass wheel travels in
# .whl/ (python3 -m pip download --no-deps nvidia-cutlass==4.2.0.0 -d .whl).
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MAX_JOBS="${MAX_JOBS:-16}"
export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0a}"   # the H100 only: half the compile
pytest_args=(); bench_args=(); seen=0
for a in "$@"; do
  if [ "$a" = "--" ]; then seen=1; elif [ $seen = 0 ]; then pytest_args+=("$a"); else bench_args+=("$a"); fi
done

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$OUT/gpu.txt"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/nvidia_cutlass-*.whl || exit 1
  export CUTLASS_PATH=/tmp/site/cutlass_library/source
  start=$(date +%s)
  CUTE_GEMM_PTXAS_VERBOSE=1 python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 \
    || { tail -n 80 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  # One line that a filtered log keeps: the kernels must not spill (2-byte spills were once
  # that a `tail` had cut from earlier runs' output).
  echo "build: $(( $(date +%s) - start )) s, ptxas reports with spills: $(grep -cE "[1-9][0-9]* bytes spill stores" "$OUT/build.log")"
  grep -E "registers|spill" "$OUT/build.log" | grep -B1 -E "[1-9][0-9]* bytes spill" | head -20
fi
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0  # scripts/sanitize.sh builds through here

# Time limits: a kernel that deadlocks must not eat the whole lease.
timeout "${TEST_TIMEOUT:-420}" python3 -P -m pytest -ra -p no:cacheprovider "${pytest_args[@]}" 2>&1 \
  | tee "$OUT/tests.log" | tail -n 15
if [ "${SOAK:-0}" = 1 ]; then
  timeout "${SOAK_TIMEOUT:-300}" python3 -P scripts/soak.py --calls 10000 --max-seconds "${SOAK_SECONDS:-240}" --json "$OUT/soak.json" 2>&1 \
    | grep -v "^  "
  timeout "${SOAK_TIMEOUT:-300}" python3 -P scripts/soak.py --calls 4000 --threads 4 --seed 1 --max-seconds "${SOAK_SECONDS:-240}" \
    --json "$OUT/soak_threads.json" 2>&1 | grep -v "^  "
fi
if [ "${NO_BENCH:-0}" != 1 ]; then
  # (Its default run, three layouts of every suite, takes about 7 minutes: pass bench args, e.g.
  # `-- --layout nt --dtype bf16`, to fit a call's other work.)
  timeout "${BENCH_TIMEOUT:-600}" python3 -P bench/bench_mm.py --json "$OUT/results.json" "${bench_args[@]}" 2>&1 \
    | tee "$OUT/bench.log"
fi
if [ -n "${OPS_BENCH:-}" ]; then
  [ "$OPS_BENCH" = all ] && OPS_BENCH=""
  # shellcheck disable=SC2086
  timeout "${BENCH_TIMEOUT:-600}" python3 -P bench/bench_ops.py --json "$OUT/ops.json" $OPS_BENCH 2>&1 | tee "$OUT/bench_ops.log"
fi
