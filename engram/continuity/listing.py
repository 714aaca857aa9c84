"""Compact first, details on demand: a listing of memories one line each (id, kind, when, size in
tokens), and the memories around one of them in its session (what happened before and after a
captured turn)."""

from __future__ import annotations

from typing import Any

from engram.continuity.rendering import estimate_tokens

__all__ = ["AROUND_MAX", "around", "compact_row", "compact_rows"]

LINE_CHARS = 160
AROUND_MAX = 20


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


def around(eng: Any, memory: Any, n: int) -> list[dict]:
    """Up to `n` memories before and `n` after `memory` in its session (same user), oldest first,
    as listing rows, each marked with its position relative to it; [] for a memory of no session."""
    if not memory.session_id or n <= 0:
        return []
    import numpy as np

    with eng.lock:
        eng.catch_up()
        idx = eng.index
        row = idx.row_of.get(memory.id)
        if row is None:
            return []
        k = idx.n
        same = np.flatnonzero(
            idx.alive[:k]
            & (idx.status[:k] == 0)
            & (idx.session[:k] == idx.session[row])
            & (idx.user[:k] == idx.user[row])
        )
        order = sorted(same.tolist(), key=lambda r: (float(idx.created[r]), r))
        at = order.index(row)
        rows = order[max(0, at - n) : at + n + 1]
        ids = [idx.ids[r] for r in rows]
        found = [eng.get(mid, user_id=memory.user_id) for mid in ids]  # at most 2n + 1 reads
    first = at - max(0, at - n)
    return [{**compact_row(m.to_dict()), "position": i - first} for i, m in enumerate(found)]
