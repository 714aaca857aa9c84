#!/usr/bin/env bash
# Create .venv and install engram with pinned dependencies. Sourced by demo.sh and test.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ENGRAM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip >/dev/null
# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "==> installing torch 2.13.0 (CPU)"
  $PIP install -q "torch==2.13.0"
fi
echo "==> installing pinned dependencies"
$PIP install -q -r "$ROOT/requirements.lock"
# The distribution was called "engram" before it got a name free on PyPI (engram-recall): drop the
# old editable install so one distribution owns the package.
if "$VENV/bin/python" -m pip show -q engram >/dev/null 2>&1; then $PIP uninstall -q -y engram; fi
$PIP install -q --no-deps -e "$ROOT"
export PATH="$VENV/bin:$PATH"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
