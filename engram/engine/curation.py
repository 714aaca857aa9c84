"""Reading memories one by one and page by page (the web panel's curation, issue 17): a memory with
its history, a page of the user's memories, a memory's strength over time, its versions."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

import numpy as np

from engram.core.bounds import OFFSET, PAGE_LIMIT, STRENGTH_DAYS
from engram.core.documents import shared_by
from engram.core.types import EngramError, Memory, check_tags
from engram.core.validation import check_type
from engram.engine.index_upkeep import Indexes
from engram.engine.state import EngineState
from engram.search.decay import days_until_prune, initial_stability, memory_stability, memory_strength, strength_points


class Curation:
    """Memories read for a person looking at them (the panel, the CLI)."""

    def __init__(self, p: EngineState, indexes: Indexes):
        self.p = p
        self.indexes = indexes

    def get_memory(self, memory_id: str, *, user_id: str | None = None) -> dict:
        """One memory as the clients show it: its fields, quality score and history."""
        m = self.p.memory(memory_id, user_id)
        return {
            **m.to_dict(),
            "quality_score": self.p.quality(m),
            # Shown when asked for by id (the user should see why recall no longer returns it).
            "expired": m.expires_at is not None and m.expires_at <= self.p.clock.now(),
            "history": self.p.store_db.events(m.id),
        }

    def neighbours(self, memory_id: str, n: int, *, user_id: str | None = None) -> list[tuple[Memory, int]]:
        """Up to `n` memories before and `n` after a memory in its session (same user), oldest
        first, each with its position relative to it (the memory itself at 0); [] for a memory
        of no session. What happened around a captured turn (get_memory's `around`)."""
        memory = self.p.memory(memory_id, user_id)
        if not memory.session_id or n <= 0:
            return []
        with self.p.lock:
            self.indexes.catch_up()
            idx = self.p.index
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
            first = max(0, at - n)
            rows = order[first : at + n + 1]
            # at most 2n + 1 reads
            return [(self.p.memory(idx.live(r)[0], memory.user_id), i + first - at) for i, r in enumerate(rows)]

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict]:
        self.p.memory(memory_id, user_id)
        return self.p.store_db.events(memory_id)

    def list_memories(
        self,
        *,
        memory_type: str | None = None,
        task_id: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: datetime | None = None,
        status: str = "active",
        offset: int = 0,
        limit: int = 50,
        user_id: str | None = None,
        in_project: str | None = None,
    ) -> dict:
        """One page of the user's memories, newest first, filtered from the derived index (no scan
        of the table, so a page costs the same at 100k memories), each with its strength now.
        in_project: None every project's; "" only those of no project; else only that project's."""
        OFFSET.check(offset, "offset")
        PAGE_LIMIT.check(limit, "limit")
        listable = ("active", "superseded", "consolidated")
        if status != "any" and status not in listable:
            raise EngramError(f"status must be one of {', '.join(listable)} or any; got {status!r}")
        if memory_type is not None:
            check_type(memory_type)
        tags = check_tags(tags) or None
        user = self.p.user_of(user_id)
        with self.p.lock:
            self.indexes.catch_up()
            idx = self.p.index
            now = self.p.clock.now()
            eligible = idx.mask(
                user, memory_type, task_id, tags, as_of, listable if status == "any" else (status,), now=now
            )
            if in_project is not None:
                eligible &= idx.in_project(in_project or None, exact=True)
            rows = np.flatnonzero(eligible)
            # Newest first; the row number breaks ties (rows are appended in creation order).
            order = np.lexsort((-rows, -idx.created[rows]))
            page = [idx.ids[r] for r in rows[order][offset : offset + limit]]
            mems = self.p.store_db.get_memories(page)
            items = [self.memory_summary(mems[i], now) for i in page if i in mems]
        return {"total": len(rows), "offset": offset, "limit": limit, "memories": items}

    def memory_summary(self, m: Memory, now: datetime) -> dict:
        return {
            "id": m.id,
            "content": m.content,
            "memory_type": m.memory_type,
            "status": m.status,
            "importance": m.importance,
            "tags": list(m.tags),
            "task_id": m.task_id,
            "pinned": m.pinned,
            "created_at": m.created_at.isoformat(),
            "recall_count": m.recall_count,
            "project": m.project,
            "tier": m.tier,
            "expires_at": m.expires_at.isoformat() if m.expires_at else None,
            "strength": round(memory_strength(m, now, self.p.settings.tier_factors), 6),
            **({"shared_by": by} if (by := shared_by(m)) else {}),
        }

    def memory_strength(self, memory_id: str, *, days: int = 90, user_id: str | None = None) -> dict:
        """A memory's strength from its last recall (or creation) until now, and projected `days`
        ahead if nothing recalls it. Before the last recall the stability in effect is not
        recorded, so the past starts there."""
        STRENGTH_DAYS.check(days, "days")
        m = self.p.memory(memory_id, user_id)
        now = self.p.clock.now()
        factors = self.p.settings.tier_factors
        stab = memory_stability(m, factors)
        touched = m.last_recalled_at or m.created_at
        threshold = self.p.settings.prune_threshold
        return {
            "memory_id": m.id,
            "importance": m.importance,
            "pinned": m.pinned,
            "tier": m.tier,
            "tier_factor": factors.get(m.tier, 1.0),
            "stability_days": round(stab, 4),
            "initial_stability_days": round(initial_stability(m.memory_type, m.importance), 4),
            "recall_count": m.recall_count,
            "last_touched_at": touched.isoformat(),
            "now": now.isoformat(),
            "strength_now": round(memory_strength(m, now, factors), 6),
            "prune_threshold": threshold,
            "days_until_prune": None if m.pinned else round(days_until_prune(m, threshold, now, factors), 2),
            "past": strength_points(m.importance, stab, touched, touched, now),
            "projected": strength_points(m.importance, stab, touched, now, now + timedelta(days=days)),
        }

    def memory_versions(self, memory_id: str, *, user_id: str | None = None) -> dict:
        """The supersession chain through this memory (oldest first: what it replaced, what replaced
        it, the consolidation it went into) and the memories a consolidation merged into it."""
        m = self.p.memory(memory_id, user_id)
        chain, seen = [m], {m.id}
        for link in ("supersedes", "superseded_by"):
            cur = m
            while getattr(cur, link) and getattr(cur, link) not in seen and len(seen) < 1000:
                nxt = self.p.store_db.get_memory(getattr(cur, link))
                if nxt is None or nxt.user_id != m.user_id:
                    break  # pruned or erased: the chain ends here
                seen.add(nxt.id)
                if link == "supersedes":
                    chain.insert(0, nxt)
                else:
                    chain.append(nxt)
                cur = nxt
        sources: list[str] = []
        for e in self.p.store_db.events(m.id):
            if e["action"] == "consolidate":
                sources += e["detail"].get("sources", [])
        found = self.p.store_db.get_memories(sources)
        now = self.p.clock.now()
        return {
            "memory_id": m.id,
            "chain": [
                {
                    **self.memory_summary(x, now),
                    "valid_from": _iso(x.valid_from),
                    "valid_to": _iso(x.valid_to),
                    "supersedes": x.supersedes,
                    "superseded_by": x.superseded_by,
                }
                for x in chain
            ],
            "consolidated_from": [self.memory_summary(found[i], now) for i in sources if i in found],
            "consolidated_from_missing": [i for i in sources if i not in found],
        }


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None
