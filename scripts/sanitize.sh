#!/usr/bin/env bash
# compute-sanitizer's memcheck, racecheck and synccheck over every kernel path
# (scripts/sanitize_cases.py), on a GPU machine. Builds like scripts/gpu_check.sh unless
# SKIP_BUILD=1; logs in $OUT. memcheck runs every layout and dtype, racecheck and synccheck
# (much slower) one of each. Run from the repository root: bash scripts/sanitize.sh
set -uo pipefail
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OUT
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  BUILD_ONLY=1 bash scripts/gpu_check.sh || exit 1
fi
status=0
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  start=$(date +%s)
  quick=$([ "$tool" = memcheck ] && echo 0 || echo 1)
  SANITIZE_QUICK=$quick timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    python3 -P scripts/sanitize_cases.py > "$OUT/sanitize_$tool.log" 2>&1
  rc=$?
  echo "$tool: exit $rc, $(( $(date +%s) - start )) s; $(grep -E "SUMMARY|cases passed" "$OUT/sanitize_$tool.log" | tr '\n' ' ')"
  [ $rc = 0 ] || status=1
done
exit $status
