"""engram: long-term memory and task continuity for AI agents, in one DuckDB file."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Imported on first use, so a process that only forwards calls to the daemon
# (the stdio MCP entry point) does not pay for DuckDB, numpy and torch.
_EXPORTS = {
    "Engram": "engram.engram",
    "ModelMismatch": "engram.errors",
    "Settings": "engram.config",
    "SystemClock": "engram.clock",
    "VirtualClock": "engram.clock",
    "EngramError": "engram.errors",
    "Hit": "engram.types",
    "Memory": "engram.types",
    "NotFound": "engram.errors",
    "Scope": "engram.types",
    "detect_project": "engram.project",
    "Session": "engram.types",
    "StoreResult": "engram.types",
    "Task": "engram.types",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
