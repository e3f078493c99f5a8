#!/usr/bin/env bash
# Install everything from a fresh clone and run the benchmark (bench/bench_mm.py) on the visible
# GPU. Extra arguments go to the benchmark (--help lists them; docs/benchmark.md explains them).
# With none it times every suite in fp16 and bf16 and writes bench/out/results.json and .png.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$REPO"
python -P bench/bench_mm.py "$@"
