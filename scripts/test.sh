#!/usr/bin/env bash
# Install everything from a fresh clone and run the tests. GPU tests skip (with the reason)
# where no CUDA GPU is visible; everything else, the compile of every kernel included, runs.
# Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "$REPO"
# -P: keep the repository root off sys.path so the installed package, not the source tree, is tested.
set +e
python -P -m pytest -ra "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a broken test tree, not a pass" >&2
fi
exit "$rc"
