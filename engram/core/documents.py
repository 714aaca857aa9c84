"""The engine's own documents of its records (a handoff, a progress snapshot, a failure), kept in a
memory's metadata: their fields, and how they are read back. Pure functions of memories."""

from __future__ import annotations

from typing import Any

from engram.core.types import Memory

# The engine's own document of a handoff, progress or failure memory, by metadata key: each
# field, the types it may hold and its value when missing (None: required). A memory stored
# through store_memory with one of these types has no such document, or one someone else
# wrote; every reader goes through document().
_DOCUMENTS: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "handoff": {
        "summary": ((str,), None),
        "completed": ((list,), []),
        "in_progress": ((list,), []),
        "blocked": ((list,), []),
        "next_steps": ((list,), []),
    },
    "progress": {
        "feature": ((str,), None),
        "status": ((str,), None),
        "completion": ((int, float), None),
        "notes": ((str,), ""),
    },
    "failure": {
        "error": ((str,), None),
        "component": ((str,), None),
        "root_cause": ((str,), ""),
        "fix": ((str, type(None)), ""),
    },
}


def shared_origin(m: Memory) -> dict | None:
    """Who wrote a memory read from a teammate's records (engram.admin.share_records): {id, by,
    machine, at}; None for a memory written here."""
    origin = m.metadata.get("shared") if isinstance(m.metadata, dict) else None
    return origin if isinstance(origin, dict) and isinstance(origin.get("by"), str) else None


def shared_by(m: Memory) -> str | None:
    """The git identity of a teammate's memory, for display; None for one written here."""
    origin = shared_origin(m)
    return origin["by"] if origin else None


# The tool that writes each of those records (and so the one to call for a new one).
RECORD_TOOLS = {"handoff": "session_handoff", "failure": "track_failure", "progress": "track_progress"}


def record_document(m: Memory) -> dict | None:
    """The document of a memory written by its record tool (a handoff by session_handoff, ...):
    its text is rendered from it. None for every other memory, of these types stored as text too."""
    return document(m, m.memory_type) if m.memory_type in _DOCUMENTS else None


def document(m: Memory, key: str) -> dict | None:
    """m's engine document under `key` ("handoff", "progress", "failure") with missing optional
    fields filled in, or None when there is none or it is malformed (a field of the wrong type,
    a list holding something other than strings)."""
    doc = m.metadata.get(key)
    if not isinstance(doc, dict):
        return None
    out = dict(doc)
    for name, (types, default) in _DOCUMENTS[key].items():
        if name not in doc:
            if default is None:
                return None
            out[name] = list(default) if isinstance(default, list) else default
            continue
        v = doc[name]
        if (
            not isinstance(v, types)
            or isinstance(v, bool)
            or (isinstance(v, list) and not all(isinstance(x, str) for x in v))
        ):
            return None
    return out


def with_documents(d: dict, m: Memory) -> dict:
    """d with m's engine documents (handoff, failure, progress) added under their keys."""
    for key in ("handoff", "failure", "progress"):
        doc = document(m, key)
        if doc is not None:
            d[key] = doc
    return d
