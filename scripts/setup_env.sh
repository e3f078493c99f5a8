# Sourced by scripts/test.sh and scripts/bench.sh: make a virtual environment with torch and the
# CUTLASS headers, and build + install cute_gemm into it. Idempotent: a second run only rebuilds
# what changed.
#   CUTE_GEMM_VENV   where the environment lives (default: .venv in the repository)
#   TORCH_SPEC       the torch requirement (default: torch==2.14.1, a CUDA 13.0 build)
#   CUTLASS_PATH     use this CUTLASS checkout instead of the nvidia-cutlass package
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CUTE_GEMM_VENV:-$REPO/.venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
echo "== installing build and test requirements"
python -m pip install -q --upgrade pip
python -m pip install -q "${TORCH_SPEC:-torch==2.14.1}" ninja pytest numpy matplotlib "setuptools>=64" wheel
if [ -z "${CUTLASS_PATH:-}" ] && [ ! -d "$REPO/third_party/cutlass/include" ]; then
  # Headers only: the package's Python side (and its scipy / cuda-python needs) is not used.
  python -m pip install -q --no-deps nvidia-cutlass==4.2.0.0
fi
echo "== building cute_gemm (MAX_JOBS=${MAX_JOBS:-$(nproc)}; arches ${TORCH_CUDA_ARCH_LIST:-auto})"
start=$(date +%s)
(cd "$REPO" && python -m pip install --no-build-isolation --no-deps -v . > "$VENV/cute_gemm_build.log" 2>&1) || {
  tail -n 60 "$VENV/cute_gemm_build.log"
  echo "== build failed; full log: $VENV/cute_gemm_build.log"
  exit 1
}
echo "== built in $(( $(date +%s) - start )) s (log: $VENV/cute_gemm_build.log)"
