#!/usr/bin/env bash
# Set up engram and run its test suite (the long reliability runs are behind -m slow).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
$VENV/bin/python -m pip install -q -r "$ROOT/requirements-dev.lock"
"$VENV/bin/ruff" check .  # under a second; pyproject.toml says which rules and why
exec "$VENV/bin/python" -m pytest -q "$@"
