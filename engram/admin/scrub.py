"""`engram scrub`: the redactor run again over what a store already holds (rows written before
redaction covered them, or before a pattern was added to ENGRAM_REDACT_PATTERNS).

It reads every memory (content, tags, metadata: handoff documents and checkpoints are memories'
metadata), every memory's history, every task (name, goal, metadata) and every session's notes,
and reports what redaction would change. With apply, it first keeps a copy of the store as it was
(DuckDB: a checked backup; PostgreSQL: an export), then rewrites what changed in one
transaction, embeds the rewritten texts again and rebuilds the derived indexes. Nothing else of
any row changes: times, ids, statuses and untouched fields keep their bytes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.admin.backups import backup_store
from engram.core.redaction import REDACTED
from engram.core.settings import is_database_url
from engram.core.types import EngramError

__all__ = ["scrub_store"]

SHOWN = 20  # changes listed in the report; the counts cover them all


def _preview(text: str) -> str:
    """The redacted text around its first [REDACTED], for the report (never the secret)."""
    at = max(text.find(REDACTED), 0)
    start = max(at - 60, 0)
    return ("…" if start else "") + text[start : at + 80].replace("\n", " ") + ("…" if at + 80 < len(text) else "")


def _found(eng: Any) -> dict[str, list]:
    redact, db = eng.redact, eng.store_db
    memories = []
    for m, _ in db.iter_memory_rows():
        new = {
            "content": redact(m.content),
            "tags": tuple(redact(t) for t in m.tags),
            "metadata": redact.value(m.metadata),
        }
        changed = {k: v for k, v in new.items() if v != getattr(m, k)}
        if changed:
            memories.append((m, changed))
    events = [
        (mid, ev, new)
        for mid, evs in db.events_by_memory().items()
        for ev in evs
        if (new := redact.value(ev["detail"])) != ev["detail"]
    ]
    tasks = []
    for t in db.all_tasks():
        new = {"name": redact(t.name), "goal": redact(t.goal), "metadata": redact.value(t.metadata)}
        changed = {k: v for k, v in new.items() if v != getattr(t, k)}
        if changed:
            tasks.append((t, changed))
    sessions = [
        (s, new)
        for s, _, _ in db.sessions_with_counts()
        if s.outcome_notes and (new := redact(s.outcome_notes)) != s.outcome_notes
    ]
    return {"memories": memories, "events": events, "tasks": tasks, "sessions": sessions}


def _keep_copy(eng: Any) -> str:
    """A copy of the store as it is, before the rewrite: its path."""
    if not is_database_url(eng.path):
        return backup_store(eng, None, kind="pre-scrub")["path"]
    from engram.admin.export_import import export_memories  # PostgreSQL: the dump engram can write itself

    folder = eng.settings.home / "backups"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"pre-scrub-{eng.clock.now().strftime('%Y%m%dT%H%M%S%f')}.jsonl"
    export_memories(eng, path)
    return str(path)


def scrub_store(eng: Any, apply: bool = False) -> dict[str, Any]:
    """What redaction changes in the store's existing rows (every user's); with apply, rewrite
    them after keeping a copy. Returns the counts, the first changes (redacted previews) and the
    copy's path."""
    with eng.lock:
        found = _found(eng)
        changes = (
            [
                {
                    "kind": "memory",
                    "id": m.id,
                    "memory_type": m.memory_type,
                    "fields": sorted(ch),
                    "preview": _preview(ch.get("content", m.content)),
                }
                for m, ch in found["memories"]
            ]
            + [
                {"kind": "history", "id": mid, "action": ev["action"], "fields": ["detail"]}
                for mid, ev, _ in found["events"]
            ]
            + [{"kind": "task", "id": t.id, "fields": sorted(ch)} for t, ch in found["tasks"]]
            + [{"kind": "session", "id": s.id, "fields": ["outcome_notes"]} for s, _ in found["sessions"]]
        )
        report: dict[str, Any] = {
            "applied": False,
            "backup": None,
            "changes": changes[:SHOWN],
            **{k: len(v) for k, v in found.items()},
        }
        if not apply or not changes:
            return report
        rewritten = [(m, ch) for m, ch in found["memories"] if "content" in ch]
        if rewritten and eng.degraded:
            raise EngramError(
                f"the model is unavailable ({eng.degraded}): a scrubbed memory must be embedded "
                "again, so nothing was changed; run `engram scrub --apply` once `engram-setup` passes"
            )
        report["backup"] = _keep_copy(eng)
        vectors = dict(
            zip(
                (m.id for m, _ in rewritten),
                eng.embedder.embed_batch([ch["content"] for _, ch in rewritten]) if rewritten else [],
            )
        )
        db = eng.store_db
        with db.transaction():
            for m, ch in found["memories"]:
                db.update_memory(m.id, embedding=vectors.get(m.id), **ch)
            for mid, ev, new in found["events"]:
                db.set_event_detail(mid, datetime.fromisoformat(ev["at"]), ev["action"], new)
            for t, ch in found["tasks"]:
                db.update_task(t.id, t.updated_at, **ch)  # its own time: a scrub is not an edit
            for s, new in found["sessions"]:
                db.update_session(s.id, outcome_notes=new)
        eng.rebuild_indexes()
        report["applied"] = True
        return report
