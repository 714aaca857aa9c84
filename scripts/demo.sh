#!/usr/bin/env bash
# Set up engram and run a two-agent handoff through real MCP client sessions.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/bootstrap.sh"
export ENGRAM_HOME="${ENGRAM_HOME:-$ROOT/.engram-demo}"
echo "==> engram-setup (ENGRAM_HOME=$ENGRAM_HOME)"
engram-setup
echo "==> two agents, one task"
python "$ROOT/scripts/demo_handoff.py"
# The first agent started a background server that owns the store; stop it.
engram stop >/dev/null 2>&1 || true
