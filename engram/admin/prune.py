"""Keep the strongest N (`engram prune --keep N`, docs/lifecycle.md): cut one user's memories of
a scope down to the N strongest unprotected ones.

Strength is what decay and ranking read (importance × e^(−days / stability), the stability
scaled by the tier). Protected memories are neither counted nor removed: pinned ones, those the
user kept (captured, then vouched for: metadata.captured = "kept"), and what an open task needs
(every memory of a task that is not done or abandoned, its handoffs among them, and the latest
handoff of each task and of no task). Expired memories are never returned already and go too.
A dry run (the default, as consolidate's) changes nothing and lists what would go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engram.core.types import MEMORY_TIERS, MEMORY_TYPES, EngramError
from engram.search.decay import strength_array
from engram.search.memory_index import to_days

if TYPE_CHECKING:
    from engram.engram import Engram

SHOWN = 50  # memories listed in a report; the counts cover every one


def prune_memories(
    eng: Engram, keep: int, *, apply: bool, user_id: str, project: str | None, all_projects: bool
) -> dict[str, Any]:
    """Remove all but the `keep` strongest unprotected active memories of `user_id` in `project`
    (exactly its own; None: those of no project; all_projects: every project's)."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise EngramError(f"keep must be a whole number of memories, 0 or more; got {keep!r}")
    with eng.lock:
        eng.catch_up(force=True)
        now = eng.clock.now()
        idx, db = eng.index, eng.store_db
        n = idx.n
        code = idx.users.get(user_id)
        mine = idx.alive[:n] & (idx.user[:n] == (-2 if code is None else code))
        if not all_projects:
            mine &= idx.in_project(project, exact=True)
        expired = mine & (idx.expires[:n] <= to_days(now))
        active = mine & (idx.status[:n] == 0) & ~expired
        open_tasks = db.open_task_ids()
        task_codes = [c for t, c in idx.tasks.items() if t in open_tasks]
        latest = {idx.row_of[i] for i in db.latest_handoff_ids() if i in idx.row_of}
        kept = _user_kept(db, [idx.ids[r] for r in np.flatnonzero(active)])
        why = {
            "pinned": active & idx.pinned[:n],
            "open_task": active & np.isin(idx.task[:n], task_codes),
            "latest_handoff": active & np.isin(np.arange(n), list(latest)),
            "kept": active & np.isin(np.arange(n), [idx.row_of[i] for i in kept]),
        }
        protected = np.zeros(n, dtype=bool)
        for m in why.values():
            protected |= m
        rows = np.flatnonzero(active & ~protected)
        st = strength_array(idx.importance[rows], idx.stability[rows], to_days(now) - idx.touched[rows])
        # Strongest first; the newer breaks a tie (rows are appended in creation order).
        order = rows[np.lexsort((-rows, -st))]
        strength_of = dict(zip(rows.tolist(), st.tolist()))
        doomed = order[keep:].tolist() + np.flatnonzero(expired).tolist()
        report = {
            "applied": bool(apply),
            "keep": keep,
            "scope": "every project" if all_projects else (project or "no project"),
            "candidates": len(rows),
            "kept": min(keep, len(rows)),
            "protected": {k: int(m.sum()) for k, m in why.items()},
            "expired": int(expired.sum()),
            "removed" if apply else "would_remove": len(doomed),
            "memories": [
                {
                    "id": idx.ids[r],
                    "memory_type": MEMORY_TYPES[idx.mtype[r]],
                    "tier": MEMORY_TIERS[idx.tier[r]] if idx.tier[r] >= 0 else None,
                    "strength": round(strength_of.get(r, 0.0), 6),
                    "expired": bool(expired[r]),
                    "content": (idx.texts[r] or "")[:80],
                }
                for r in doomed[:SHOWN]
            ],
        }
        if apply and doomed:
            eng.remove_memories([idx.ids[r] for r in doomed])
    return report


def _user_kept(db: Any, ids: list[str], batch: int = 1000) -> set[str]:
    """The ids among `ids` of memories the user vouched for (engram.continuity.keeping marks them
    metadata.captured = "kept"); the index holds no metadata, so the rows are read."""
    out: set[str] = set()
    for i in range(0, len(ids), batch):
        found = db.get_memories(ids[i : i + batch])
        out.update(m.id for m in found.values() if (m.metadata or {}).get("captured") == "kept")
    return out
