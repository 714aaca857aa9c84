"""engram: long-term memory and task continuity for AI agents, in one DuckDB file."""

from __future__ import annotations

import importlib

from engram.core.version import VERSION as __version__

# Imported on first use, so a process that only forwards calls to the daemon
# (the stdio MCP entry point) does not pay for DuckDB, numpy and torch.
_EXPORTS = {
    "Engram": "engram.engram",
    "ModelMismatch": "engram.core.errors",
    "Settings": "engram.core.settings",
    "SystemClock": "engram.core.clock",
    "VirtualClock": "engram.core.clock",
    "EngramError": "engram.core.errors",
    "Hit": "engram.core.types",
    "Memory": "engram.core.types",
    "NotFound": "engram.core.errors",
    "Scope": "engram.core.types",
    "detect_project": "engram.core.project",
    "Session": "engram.core.types",
    "StoreResult": "engram.core.types",
    "Task": "engram.core.types",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'engram' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
