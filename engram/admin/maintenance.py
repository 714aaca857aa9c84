"""Maintenance as plain functions: prune what faded, consolidate near-duplicates, rebuild. What
`engram stats` reports of the result is engram.admin.stats.

One run (consolidate_memory) does, under the engram's lock:

1. prune  -- hard-delete every memory whose time to live ran out (expired: never returned
   since, pinned or not), and active memories whose decay strength fell below ENGRAM_PRUNE_THRESHOLD,
   except protected ones (pinned; linked to a task that is not done/abandoned; the latest
   handoff of a task, or the latest task-less handoff of a user). Retired rows go too:
   a consolidated source once its consolidation is older than ENGRAM_CONSOLIDATED_RETENTION_DAYS;
   a superseded memory once it is older than the retention *and* the memory that replaced it
   is gone (history is kept as long as the fact it explains exists).
2. consolidate -- clusters of active memories of one user, one type (fact, strategy, assumption,
   failure), one task, never turns of a conversation (records of what was said), whose vectors
   are all pairwise within ENGRAM_CONSOLIDATE_THRESHOLD (complete linkage, so chains cannot
   snowball) and whose texts do not contradict or name different subjects, become one new
   memory. Sources become status "consolidated" (valid_to = now, superseded_by = the new id):
   out of recall, still visible to as_of.
   Before it, gists (engram.admin.gists): recurring captured episodes, pitfalls and handoffs of
   one project, from two sessions or more, become one memory of what they share, and fade.
3. rebuild -- graph edges of what changed, then the file is checkpointed and, when rows were
   deleted, compacted so the deleted text leaves the disk; the derived indexes are rebuilt when
   the run changed something or rows were removed since they were built.

Prune runs before consolidation so nothing about to be deleted gets merged into something that
lasts. Gists are planned before the prune on purpose: a captured memory that faded is pruned once
what it shares with others is in their gist, and what may still recur is spared meanwhile.

A run covers one user's memories (consolidate_memory(user_id=...): what a caller of the API asks
for) or, with user_id None, every user's (the scheduled job). Rebuilding and compaction are
about the file and always cover everything.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from engram.admin.gists import GIST_TAG, apply_gists, plan_gists, report_entry
from engram.core.ids import new_id
from engram.core.types import MEMORY_TIERS, MEMORY_TYPES, Memory
from engram.engine import resolution
from engram.search.decay import base_stability, strength_array
from engram.search.memory_index import to_days

if TYPE_CHECKING:
    from engram.engram import Engram

log = logging.getLogger(__name__)

CONSOLIDATABLE = ("fact", "strategy", "assumption", "failure")
# Text evidence that two similar memories are not the same statement: keep both.
_VETO_BASES = frozenset({"subject-swap", "roles-swapped", "subject-qualifier", "other-fact", "disjoint", "old-value"})
META_TOTALS = "maintenance_totals"  # running totals across runs, as JSON


def consolidate_memory(eng: Engram, apply: bool = True, user_id: str | None = None) -> dict[str, Any]:
    """Prune, consolidate and reindex once. apply=False reports what would change, changing nothing.

    user_id narrows the plan (and so the report) to that user's memories; None covers every user.
    """
    t0 = time.perf_counter()
    with eng.lock:
        eng.catch_up(force=True)  # plan over every server's writes
        started = eng.clock.now()
        mine = user_rows(eng.index, user_id)
        # Gists first: a member that faded is pruned once what it said is in its gist.
        gist_plans, recurring = plan_gists(eng, mine, started) if eng.settings.gists else ([], set())
        # A gist a new member joins is reinforced by it, not pruned.
        recurring |= {p["gist_id"] for p in gist_plans if p["gist_id"]}
        prune = _plan_prune(eng, started, mine, spare=recurring)
        in_gists = {m.id for p in gist_plans for m in p["members"]}
        clusters = _plan_clusters(eng, mine, exclude=set(prune["ids"]) | in_gists)
        report: dict[str, Any] = {
            "applied": bool(apply),
            "user_id": user_id,
            "consolidated": sum(len(c["sources"]) for c in clusters),
            "clusters": [{"into": None, "sources": c["sources"], "preview": c["content"]} for c in clusters],
            "pruned": len(prune["ids"]),
            "pruned_ids": prune["ids"],
            "pruned_by_reason": prune["by_reason"],
            "gists": [report_entry(p, p["gist_id"]) for p in gist_plans],
            "protected": prune["protected"],
            "spared_recurring": prune["recurring"],
            "edges_refreshed": 0,
            "compacted": False,
            "reindexed": False,
        }
        if apply:
            if prune["ids"]:
                eng.remove_memories(prune["ids"])  # their edges go with them
            gist_ids = apply_gists(eng, gist_plans, started, gone=set(prune["ids"]))
            for entry, gist_id in zip(report["gists"], gist_ids):
                entry["into"] = gist_id
            new_ids, retired = _apply_clusters(eng, clusters, started)
            for entry, new_id in zip(report["clusters"], new_ids):
                entry["into"] = new_id
            if retired:  # the graph is about the present: retired memories leave it
                with eng.store_db.transaction():
                    eng.store_db.delete_edges_of(retired)
                eng.graph.remove_nodes(retired)
            # A merged memory links to its nearest active peers (and so takes over its sources'
            # place in the graph); neighbours of deleted memories keep their remaining edges.
            # A gist links to its nearest active peers too: its sources, while they last.
            linked = new_ids + gist_ids
            report["edges_refreshed"] = eng.rebuild_edges(linked) if linked else 0
            totals = maintenance_totals(eng)
            totals.update(
                consolidated=totals["consolidated"] + report["consolidated"],
                pruned=totals["pruned"] + report["pruned"],
                gists_written=totals["gists_written"] + sum(p["action"] == "new" for p in gist_plans),
                gists_updated=totals["gists_updated"] + sum(p["action"] == "update" for p in gist_plans),
                gists_merged=totals["gists_merged"] + sum(len(p.get("absorbed", [])) for p in gist_plans),
                runs=totals["runs"] + 1,
                last_run=started.isoformat(),
            )
            eng.store_db.set_meta(META_TOTALS, json.dumps(totals))
            # Forgotten rows count too: their text must leave the file (Store.erasure_pending).
            report["compacted"] = _flush(eng, deleted=bool(prune["ids"]) or eng.store_db.erasure_pending())
            # A run that changed nothing keeps the indexes it has: a rebuild reads every row
            # under the lock (seconds at 100k memories, with recall waiting) to build the same
            # ones. Rows removed since the last build (forget, replace) leave slots it reclaims.
            idx = eng.index
            report["reindexed"] = bool(
                prune["ids"] or new_ids or retired or gist_ids or report["compacted"] or len(idx) < idx.n
            )
            if report["reindexed"]:
                eng.rebuild_indexes()
            if user_id is None:
                report["backup"] = _daily_backup(eng)
        finished = eng.clock.now()
    if apply:
        # Outside the lock: each batch takes it only to write (recall goes on meanwhile).
        report["token_vectors_filled"] = eng.fill_token_vectors()
    report["started_at"] = started.isoformat()
    report["finished_at"] = finished.isoformat()
    report["duration_s"] = round(time.perf_counter() - t0, 4)
    return report


# The name of the previous release, kept for one release (see the changelog): the function is named for
# the operation it does.
run_maintenance = consolidate_memory


def _daily_backup(eng: Engram) -> dict[str, Any] | None:
    """The day's backup (engram.admin.backups.daily_backup); a failure is reported and logged, not raised:
    the rest of the run is done and the next run tries again."""
    from engram.admin.backups import daily_backup

    try:
        return daily_backup(eng, eng.settings.backup_keep)
    except Exception as e:  # noqa: BLE001 - a full disk must not stop pruning and consolidation
        log.warning("daily backup failed: %s", e)
        return {"error": str(e)}


def user_rows(idx: Any, user_id: str | None) -> np.ndarray:
    """Boolean mask over the index's live rows: that user's rows (every row for None)."""
    n = idx.n
    mask = idx.alive[:n].copy()
    if user_id is not None:
        code = idx.users.get(user_id)
        mask &= idx.user[:n] == (-2 if code is None else code)  # -2: a user with no rows
    return mask


# -- prune -------------------------------------------------------------------------------------------
def _plan_prune(eng: Engram, now: datetime, mine: np.ndarray, spare: set[str]) -> dict[str, Any]:
    """What goes; `spare`: ids kept from the weak prune (a recurrence waiting for its gist)."""
    s, idx, db = eng.settings, eng.index, eng.store_db
    n = idx.n
    active = mine & (idx.status[:n] == 0)
    st = strength_array(idx.importance[:n], idx.stability[:n], to_days(now) - idx.touched[:n])
    weak = np.flatnonzero(active & (st < s.prune_threshold))
    open_tasks = db.open_task_ids()
    task_codes = {code for t, code in idx.tasks.items() if t in open_tasks}
    latest_handoffs = db.latest_handoff_ids()
    doomed: list[str] = []
    reasons = {"expired": 0, "weak": 0, "consolidated_expired": 0, "superseded_expired": 0}
    protected = recurring = 0
    # A time to live is kept to: an expired memory is no longer returned by any read, so it goes.
    expired = np.flatnonzero(mine & (idx.expires[:n] <= to_days(now)))
    doomed += [idx.ids[r] for r in expired]
    reasons["expired"] = len(expired)
    weak = weak[idx.expires[weak] > to_days(now)]
    for r in weak:
        mid = idx.ids[r]
        if idx.pinned[r] or int(idx.task[r]) in task_codes or mid in latest_handoffs:
            protected += 1
            continue
        if mid in spare:
            recurring += 1
            continue
        doomed.append(mid)
        reasons["weak"] += 1
    # Captured episodes have a budget per project: past it, the oldest unused go first.
    from engram.workflows.capture import prune_episodes

    weak_ids = set(doomed)
    over = [m for m in prune_episodes(idx, active, s.capture_episode_budget) if m not in weak_ids]
    doomed += over
    reasons["episodes_over_budget"] = len(over)

    cutoff = now - timedelta(days=s.consolidated_retention_days)
    # Retired rows stay in the index (status 1-2), so the user's mask covers them too.
    retired = [
        r for r in db.retired_memories(("consolidated", "superseded")) if r[0] in idx.row_of and mine[idx.row_of[r[0]]]
    ]
    gone = set(doomed)
    for mid, status, _, valid_to in retired:
        if mid in gone:
            continue
        if status == "consolidated" and valid_to is not None and valid_to < cutoff:
            gone.add(mid)
            doomed.append(mid)
            reasons["consolidated_expired"] += 1
    present = set(idx.row_of)
    # Superseded history goes only once what replaced it is gone; chains unwind in one run.
    changed = True
    while changed:
        changed = False
        for mid, status, by, valid_to in retired:
            if status != "superseded" or mid in gone or valid_to is None or valid_to >= cutoff:
                continue
            if by is None or by not in present or by in gone:
                gone.add(mid)
                doomed.append(mid)
                reasons["superseded_expired"] += 1
                changed = True
    return {"ids": doomed, "by_reason": reasons, "protected": protected, "recurring": recurring}


# -- consolidate ----------------------------------------------------------------------------------
def _neighbor_sets(vectors: np.ndarray, threshold: float, block: int = 1024) -> list[set[int]]:
    """For each row, the rows (local indices) with cosine >= threshold; blockwise to bound memory."""
    out: list[set[int]] = [set() for _ in range(len(vectors))]
    for a in range(0, len(vectors), block):
        sims = vectors[a : a + block] @ vectors.T
        for i, j in zip(*np.nonzero(sims >= threshold)):
            if a + i != j:
                out[a + i].add(int(j))
    return out


def _compatible(a: Memory, b: Memory) -> bool:
    """Text veto: different subjects or a contradiction are not duplicates, however close the vectors."""
    old, new = (a, b) if (a.created_at, a.id) <= (b.created_at, b.id) else (b, a)
    return _texts_compatible(old.content, new.content)


@lru_cache(maxsize=65536)
def _texts_compatible(old: str, new: str) -> bool:
    # Cached: a vetoed pair stays similar and is looked at again by every later run.
    c = resolution.compare_detail(old, new)
    if resolution.sentence_count(old) > 1 or resolution.sentence_count(new) > 1:
        # As at write time: text of several sentences (a merge among them) is the same memory
        # only when near-identical or when one says again a sentence of the other (a merge and a
        # further restatement of one of its lines); otherwise each run would append another note.
        if c.basis in ("identical", "subset"):
            return True
        if resolution.sentence_count(old) > 1 and resolution.sentence_count(new) > 1:
            return False
        return resolution.restated_sentence(old, new) is not None or resolution.restated_sentence(new, old) is not None
    return c.relation != "contradiction" and c.basis not in _VETO_BASES


def _plan_clusters(eng: Engram, mine: np.ndarray, exclude: set[str]) -> list[dict[str, Any]]:
    s, idx = eng.settings, eng.index
    n = idx.n
    types = [MEMORY_TYPES.index(t) for t in CONSOLIDATABLE]
    # A turn of a conversation is a record of what was said, kept as said (engine/writes.py).
    ok = mine & (idx.status[:n] == 0) & np.isin(idx.mtype[:n], types) & ~idx.pinned[:n] & ~idx.turn[:n]
    # A gist is kept whole: later members join it (engram.admin.gists), it is never merged.
    gist_rows = idx.tag_rows.get(GIST_TAG, set())
    rows = [r for r in np.flatnonzero(ok) if idx.ids[r] not in exclude and r not in gist_rows]
    groups: dict[tuple[int, int, int], list[int]] = {}
    for r in rows:
        groups.setdefault((int(idx.user[r]), int(idx.mtype[r]), int(idx.task[r])), []).append(int(r))
    clusters = []
    for members in groups.values():
        if len(members) < 2:
            continue
        rows_arr = np.array(members)
        near = _neighbor_sets(idx.vectors[rows_arr], s.consolidate_threshold)
        linked = [i for i in range(len(members)) if near[i]]
        if not linked:
            continue
        mems = eng.store_db.get_memories([idx.ids[members[i]] for i in linked])
        # Chunks of one long text are parts, not duplicates.
        usable = {
            i for i in linked if idx.ids[members[i]] in mems and "chunk_group" not in mems[idx.ids[members[i]]].metadata
        }
        # Seeds: the strongest memory first, so it anchors its cluster.
        order = sorted(
            usable,
            key=lambda i: (
                -idx.importance[members[i]],
                -idx.recall[members[i]],
                idx.created[members[i]],
                idx.ids[members[i]],
            ),
        )
        taken: set[int] = set()
        vecs = idx.vectors[rows_arr]
        for seed in order:
            if seed in taken:
                continue
            cluster = [seed]
            for j in sorted(near[seed] & usable - taken, key=lambda j: -float(vecs[seed] @ vecs[j])):
                if not all(j in near[k] for k in cluster):
                    continue  # complete linkage: close to every member, not just to the seed
                mj = mems[idx.ids[members[j]]]
                if all(_compatible(mj, mems[idx.ids[members[k]]]) for k in cluster):
                    cluster.append(j)
            if len(cluster) < 2:
                continue
            content, kept = _merged_text([mems[idx.ids[members[k]]] for k in cluster], s.chunk_size)
            if len(kept) < 2:
                continue
            taken.update(k for k in cluster if idx.ids[members[k]] in {m.id for m in kept})
            clusters.append({"sources": [m.id for m in kept], "memories": kept, "content": content})
    return clusters


def _merged_text(sources: list[Memory], limit: int) -> tuple[str, list[Memory]]:
    """The most informative (longest) text first, then each other source's text as written.

    A source whose words are all in the text already, or that says again one of its sentences,
    is taken in without adding its text (as a repeated store reinforces; the source keeps it); one
    whose addition would outgrow `limit` characters is left out (it stays active).
    """
    ordered = sorted(sources, key=lambda m: (-len(m.content), m.created_at, m.id))
    text, kept = ordered[0].content, [ordered[0]]
    for m in ordered[1:]:
        says_again = resolution.covers(text, m.content) or resolution.restated_sentence(text, m.content) is not None
        merged = text if says_again else resolution.merge_contents(text, m.content)
        if len(merged) <= limit:
            text = merged
            kept.append(m)
    return text, kept


def _apply_clusters(eng: Engram, clusters: list[dict], now: datetime) -> tuple[list[str], list[str]]:
    if not clusters:
        return [], []
    vecs = eng.embedder.embed_batch([c["content"] for c in clusters])
    new_ids, retired = [], []
    created: list[tuple[Memory, np.ndarray]] = []
    with eng.store_db.transaction():
        for c, vec in zip(clusters, vecs):
            src: list[Memory] = c["memories"]
            seed = src[0]
            touched = max(m.last_recalled_at or m.created_at for m in src)
            ids = [m.id for m in src]
            mem = Memory(
                id=new_id(),
                content=c["content"],
                memory_type=seed.memory_type,
                importance=max(m.importance for m in src),
                recall_count=sum(m.recall_count for m in src),
                created_at=now,
                # Decay continues from the sources' latest use with the most stable source's
                # stability: consolidating never revives memories that were fading anyway.
                last_recalled_at=touched,
                stability=max(base_stability(m) for m in src),
                # The longest-lasting source's tier, and expiry (none if any source has none).
                tier=max((m.tier for m in src), key=MEMORY_TIERS.index),
                expires_at=None
                if any(m.expires_at is None for m in src)
                else max(m.expires_at for m in src if m.expires_at is not None),
                user_id=seed.user_id,
                task_id=seed.task_id,
                session_id=seed.session_id,
                conversation=seed.conversation,
                tags=tuple(dict.fromkeys(t for m in src for t in m.tags)),
                metadata={**seed.metadata, "consolidated_from": ids},
                provenance=tuple(dict.fromkeys([p for m in src for p in m.provenance] + ids)),
                status="active",
                valid_from=now,
                updated_at=now,
            )
            eng.store_db.insert_memory(mem, vec)
            eng.store_db.add_event(mem.id, now, "consolidate", {"sources": ids})
            for m in src:
                eng.store_db.update_memory(
                    m.id, status="consolidated", valid_to=now, superseded_by=mem.id, updated_at=now
                )
                eng.store_db.add_event(m.id, now, "consolidated", {"into": mem.id})
            new_ids.append(mem.id)
            retired.extend(ids)
            created.append((mem, vec))
    for mem, vec in created:
        eng.index.upsert(mem, vec)
    for m in eng.store_db.get_memories(retired).values():
        eng.index.upsert(m, None)
    return new_ids, retired


def _flush(eng: Engram, deleted: bool) -> bool:
    """Fold the write-ahead log into the file; after deletions rewrite the file so the deleted bytes leave it."""
    db = eng.store_db
    if db.path == ":memory:":
        return False
    if not deleted:
        db.flush_wal()
        return False
    before = db.table_counts()
    done = db.compact()
    if done and db.table_counts() != before:  # never trade data for disk space
        raise RuntimeError(f"compaction changed row counts: {before} -> {db.table_counts()}")
    if not done:
        db.flush_wal()
    return done


def maintenance_totals(eng: Engram) -> dict[str, Any]:
    """Consolidated and pruned memories and runs since the database was created."""
    raw = eng.store_db.get_meta(META_TOTALS)
    return {
        "consolidated": 0,
        "pruned": 0,
        "gists_written": 0,
        "gists_updated": 0,
        "gists_merged": 0,
        "runs": 0,
        "last_run": None,
        **(json.loads(raw) if raw else {}),
    }
