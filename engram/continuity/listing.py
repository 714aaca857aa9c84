"""Compact first, details on demand: a listing of memories one line each (id, kind, when, size in
tokens), and the memories around one of them in its session (what happened before and after a
captured turn)."""

from __future__ import annotations

from engram.continuity.rendering import estimate_tokens
from engram.core.types import Memory

__all__ = ["around", "compact_row", "compact_rows"]

LINE_CHARS = 160


def _line(content: str) -> str:
    text = " ".join(content.split())
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def compact_row(m: dict) -> dict:
    """One memory (a hit's or a memory's dict) as a listing row."""
    content = m.get("content") or ""
    row = {
        "id": m["id"],
        "memory_type": m.get("memory_type", "failure"),
        "line": _line(content),
        "when": (m.get("created_at") or "")[:16].replace("T", " "),
        "tokens": estimate_tokens(content),
    }
    for k in ("confidence", "pinned"):
        if m.get(k) is not None:
            row[k] = m[k]
    return row


def compact_rows(memories: list[dict]) -> list[dict]:
    return [compact_row(m) for m in memories]


def around(neighbours: list[tuple[Memory, int]]) -> list[dict]:
    """The memories around one in its session (Engram.neighbours) as listing rows, each marked
    with its position relative to it."""
    return [{**compact_row(m.to_dict()), "position": position} for m, position in neighbours]
