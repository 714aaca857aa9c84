"""What `engram stats` reports: memories by type, status, user and tier, their strength and what
fades soon, what expires, the maintenance totals (engram.admin.maintenance), and how fresh the
derived indexes are."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.admin.gists import GIST_TAG
from engram.admin.maintenance import maintenance_totals, user_rows
from engram.core.types import MEMORY_TIERS
from engram.search.decay import days_until_prune, memory_strength, strength_array
from engram.search.memory_index import to_days

if TYPE_CHECKING:
    from engram.engram import Engram

STRENGTH_BUCKETS = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, math.inf)


def memory_stats(eng: Engram, user_id: str | None = None) -> dict[str, Any]:
    """Counts, strength distribution, memories about to fade, maintenance totals, index freshness.

    user_id None covers every user of the database; a user_id narrows everything to that user.
    """
    s, db = eng.settings, eng.store_db
    with eng.lock:
        eng.catch_up()
        now = eng.clock.now()
        by_type: dict[str, int] = {}
        by_status: dict[str, int] = {}
        by_user: dict[str, int] = {}
        total = 0
        for user, mtype, status, k in db.memory_counts(user_id):
            total += k
            by_status[status] = by_status.get(status, 0) + k
            by_user[user] = by_user.get(user, 0) + k
            if status == "active":
                by_type[mtype] = by_type.get(mtype, 0) + k
        idx = eng.index
        rows = np.flatnonzero(user_rows(idx, user_id) & (idx.status[: idx.n] == 0))
        days = to_days(now) - idx.touched[rows]
        st = strength_array(idx.importance[rows], idx.stability[rows], days)
        later = strength_array(idx.importance[rows], idx.stability[rows], days + 7.0)
        hist, _ = np.histogram(st, bins=STRENGTH_BUCKETS)
        buckets = {_bucket_label(a, b): int(h) for a, b, h in zip(STRENGTH_BUCKETS, STRENGTH_BUCKETS[1:], hist)}
        fading_rows = rows[(later < 2 * s.prune_threshold) & ~idx.pinned[rows]]
        fading = []
        if len(fading_rows):
            mems = db.get_memories([idx.ids[r] for r in fading_rows])
            for m in mems.values():
                fading.append(
                    {
                        "id": m.id,
                        "memory_type": m.memory_type,
                        "tier": m.tier,
                        "strength": round(memory_strength(m, now, s.tier_factors), 4),
                        "days_until_prune": round(days_until_prune(m, s.prune_threshold, now, s.tier_factors), 2),
                        "content": m.content[:80],
                    }
                )
            fading.sort(key=lambda f: (f["days_until_prune"], f["id"]))
        table_rows = db.count_live_memories()
        live = set(rows.tolist())
        # What the hooks captured with no model (engram.workflows.capture), by its tag.
        captured = {tag: len(live & idx.tag_rows.get(tag, set())) for tag in ("pitfall", "episode")}
        gists = len(live & idx.tag_rows.get(GIST_TAG, set()))
        # How far the daemon's background fill has come (engine/token_vectors.py): recall reads a
        # turn without vectors by encoding it then, which is slower.
        turns, read = eng.indexes.tokens.coverage(rows.tolist())
        tiers = idx.tier[rows]
        expires = idx.expires[rows]
        return {
            "captured": captured,
            # What maintenance distilled from recurring captures (engram.admin.gists).
            "gists": gists,
            # Tiers and expiry (docs/lifecycle.md): active memories by tier, the factor each
            # multiplies stability by, and what expires (already: removed by the next maintenance).
            "by_tier": {t: int((tiers == code).sum()) for code, t in enumerate(MEMORY_TIERS)},
            "tier_factors": s.tier_factors,
            "expiry": {
                "with_expiry": int(np.isfinite(expires).sum()),
                "expired": int((expires <= to_days(now)).sum()),
                "within_7_days": int(((expires > to_days(now)) & (expires <= to_days(now) + 7.0)).sum()),
            },
            "total": total,
            "by_type": by_type,
            "by_status": by_status,
            "by_user": by_user,
            "strength": {
                "buckets": buckets,
                "mean": round(float(st.mean()), 4) if len(st) else None,
                "prune_threshold": s.prune_threshold,
            },
            "fading_soon": {
                "count": len(fading),
                "within_days": 7,
                "below": 2 * s.prune_threshold,
                "memories": fading[:50],
            },
            "totals": maintenance_totals(eng),
            "sessions": db.status_counts("sessions", user_id),
            "tasks": db.status_counts("tasks", user_id),
            "index": {
                "built_at": eng.index_built_at.isoformat(),
                "rows": len(idx),
                "table_rows": table_rows,
                "edges": db.count("edges"),
                "graph_edges": eng.graph.edge_count(),
                "fresh": len(idx) == table_rows,
                # Rows a bulk write stored without their embedding, found by keywords until the
                # background fill embeds them (engine/index_upkeep.py: fill_vectors).
                "awaiting_embedding": len(eng.indexes.unembedded),
            },
            "late_interaction": {"on": s.late_interaction, "turns": turns, "turns_read": read},
            "disk_bytes": db.file_size(),
            "model": {
                "name": eng.embedder.name,
                "dim": eng.embedder.dim,
                "backend": getattr(eng.embedder, "backend", None),
            },
        }


def _bucket_label(a: float, b: float) -> str:
    return f">={a:g}" if math.isinf(b) else f"{a:g}-{b:g}"
