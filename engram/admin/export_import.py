"""Export and import as JSON Lines: every memory (any status, with history and embedding), task,
session and edge, between a header line and an end line that carries the counts.

Format (format_version 1; its line models are in engram/admin/export_format.py, the import in
engram/admin/jsonl_import.py), one JSON object per line, `kind` first:

    {"kind": "header", "format": "engram-jsonl", "format_version": 1, "engram_version": ...,
     "model": {"name": ..., "dim": ...}, "schema_version": ..., "exported_at": ..., "user_id": ...}
    {"kind": "memory", <Memory fields>, "embedding": <base64 float32 | null>, "events": [...]}
    {"kind": "task", ...}  {"kind": "session", ..., "successes": n, "failures": n}
    {"kind": "edge", "src": ..., "dst": ..., "weight": ..., "user_id": ...}
    {"kind": "end", "counts": {"memories": n, "tasks": n, "sessions": n, "edges": n, "memory_events": n}}

Import policy: all or nothing, in one transaction. Ids that already exist are refused
(on_conflict="error", the default; nothing is written) or left as they are (on_conflict="skip").
Embeddings are reused when the file's model is this engram's model; otherwise import is refused
unless reembed=True. Redaction runs again on every text, and a text it changes is re-embedded.
Sessions that were active in the exporting process arrive as ended: no process here owns them.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

from engram.admin.export_format import FORMAT, FORMAT_VERSION, KIND_TABLE, TABLES, open_file
from engram.admin.jsonl_import import import_memories
from engram.core.errors import ExportIncomplete, ImportConflict, MigrationMismatch, TargetNotEmpty
from engram.core.settings import is_database_url, store_identity
from engram.core.types import EVERY_PROJECT, EngramError

if TYPE_CHECKING:
    from engram.engram import Engram


def _b64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


# -- export ---------------------------------------------------------------------------------------------
def export_memories(eng: Engram, path_or_file: str | Path | IO[str], user_id: str | None = None) -> dict:
    """Write everything (or one user's rows) as JSON Lines. Returns the row counts written.

    Raises ExportIncomplete, and leaves no file at the path, if any table's rows are missing.
    """
    from engram import __version__

    db = eng.store_db
    with eng.lock:
        expected = db.table_counts(user_id)
        header = {
            "kind": "header",
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "engram_version": __version__,
            "model": {"name": eng.embedder.name, "dim": eng.embedder.dim},
            "schema_version": db.schema_version(),
            "exported_at": eng.clock.now().isoformat(),
            "user_id": user_id,
        }
        if isinstance(path_or_file, str | Path):
            path = Path(path_or_file)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise EngramError(f"cannot write {path}: {e.strerror or type(e).__name__}") from None
            tmp = path.with_name(path.name + ".partial")
            try:
                with open_file(tmp, "w") as f:
                    written = _write(eng, f, header, user_id)
                found = _count_lines(tmp)
                _check(expected, written, found)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            return {"path": str(path), **written, "bytes": path.stat().st_size}
        written = _write(eng, path_or_file, header, user_id)
        _check(expected, written, written)
        return dict(written)


def _write(eng: Engram, f: IO[str], header: dict, user_id: str | None) -> dict[str, int]:
    db = eng.store_db
    counts = dict.fromkeys(TABLES, 0)

    def put(obj: dict) -> None:
        f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    put(header)
    events = db.events_by_memory(user_id)
    for m, blob in db.iter_memory_rows(user_id):
        ev = events.get(m.id, [])
        put({"kind": "memory", **m.to_dict(), "embedding": _b64(blob), "events": ev})
        counts["memories"] += 1
        counts["memory_events"] += len(ev)
    for t in db.all_tasks(user_id):
        put({"kind": "task", **t.to_dict()})
        counts["tasks"] += 1
    for s, ok, bad in db.sessions_with_counts(user_id):
        put({"kind": "session", **s.to_dict(), "successes": ok, "failures": bad})
        counts["sessions"] += 1
    for src, dst, w, uid in db.user_edges(user_id):
        put({"kind": "edge", "src": src, "dst": dst, "weight": float(w), "user_id": uid})
        counts["edges"] += 1
    put({"kind": "end", "counts": counts})
    return counts


def _count_lines(path: Path) -> dict[str, int]:
    """Re-read the file: rows per table as they actually landed on disk."""
    counts = dict.fromkeys(TABLES, 0)
    with open(path, encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            table = KIND_TABLE.get(obj.get("kind"))
            if table:
                counts[table] += 1
                if table == "memories":
                    counts["memory_events"] += len(obj.get("events") or ())
    return counts


def _check(expected: dict[str, int], written: dict[str, int], found: dict[str, int]) -> None:
    short = {
        t: (expected[t], found.get(t, 0))
        for t in TABLES
        if found.get(t, 0) < expected[t] or written.get(t, 0) < expected[t]
    }
    if short:
        detail = ", ".join(f"{t}: {have} of {want}" for t, (want, have) in short.items())
        raise ExportIncomplete(f"export incomplete ({detail}); no file was kept")


# -- migrate: a whole store into another database ------------------------------------------------------
# Meta a migration does not copy: the target's own engine writes the model's name and dim (the
# same embedder, checked on open), and a fresh target has no deleted rows' bytes to erase.
NOT_COPIED_META = frozenset({"model_name", "model_dim", "erasure_pending"})
SAMPLE_RECALLS = 20
SAMPLE_TOP = 5


def migrate_store(eng: Engram, target: str, force: bool = False) -> dict:
    """Copy the whole store (every user: memories of every status with embeddings and history,
    edges, tasks, sessions with outcomes, meta, keys) into `target`, a DuckDB file or a
    postgresql:// URL, then verify it: the same row counts per table, and the same top ids for
    a sample of recalls (up to SAMPLE_RECALLS memories' own text as queries) on both.

    The copy is export_memories then import_memories of one temporary file (every row through the
    MemoryStore interface, as an export and an import read and write them), plus the meta and
    key rows an export leaves out. Both stream: the export writes rows as the store's cursor
    hands them out, the import reads the file twice and writes jsonl_import.IMPORT_BATCH memories
    at a time, and the sample recalls are picked as the rows go by, so the copy holds about a batch
    of rows in memory beside what the two engines keep anyway (each one's derived index). The source
    takes no other write meanwhile (the engine's lock is held); sessions active in it arrive
    ended, as an import makes them.
    A target holding rows is refused (TargetNotEmpty) unless force, which adds to it, skipping
    ids it has, and then checks only that the target holds at least the source's rows.
    Raises MigrationMismatch, leaving the target as it is, when the check fails.
    """
    from engram.engram import Engram

    if not isinstance(target, str) or not target.strip():
        raise EngramError("target must be a DuckDB file path or a postgresql:// URL")
    if eng.degraded:
        raise EngramError(
            f"cannot migrate while the embedding model is unavailable ({eng.degraded}): "
            "the copy is checked with recalls"
        )
    if "://" in target and not is_database_url(target):
        raise EngramError(
            f"target {target.split('://')[0]}:// is not a database engram knows: give a "
            "postgresql:// URL or a DuckDB file path"
        )
    if not is_database_url(target) and target != ":memory:":
        target = str(Path(target).expanduser().resolve())
    if store_identity(target) == store_identity(eng.path):  # eng.path: a URL without its password
        raise EngramError(f"the target {store_identity(target)} is the store being migrated")
    db = eng.store_db
    # The source's lock is held for the whole copy, not only the export. Released after the export,
    # a write acknowledged by the daemon meanwhile would not be in the copy: the check sees a new
    # or deleted row (MigrationMismatch, after the whole import), but not a change that keeps the
    # counts (an update, a supersession, a task's status, an outcome), which the copy would then
    # silently lack. Clients of this daemon wait instead; other servers on a shared PostgreSQL are
    # not stopped by it (the README says to stop them first).
    with eng.lock:
        dst = Engram(target, settings=eng.settings, embedder=eng.embedder, clock=eng.clock)
        try:
            before = _all_counts(dst)
            if any(before.values()) and not force:
                held = ", ".join(f"{n} {t}" for t, n in before.items() if n)
                raise TargetNotEmpty(
                    f"{dst.path} is not empty ({held}); migrate into an empty database, "
                    "or add to this one with --force (ids it has are skipped)"
                )
            with tempfile.TemporaryDirectory(prefix="engram-migrate-") as tmp:
                copy = Path(tmp) / "store.jsonl"
                export_memories(eng, copy)
                imported = import_memories(dst, copy, on_conflict="skip" if force else "error")
            have_keys = {k["id"] for k in dst.store_db.list_keys(None)}
            keys = [k for k in db.list_keys(None) if k["id"] not in have_keys]
            meta = {k: v for k, v in db.meta_items().items() if k not in NOT_COPIED_META}
            with dst.store_db.transaction():
                for k in keys:
                    dst.store_db.insert_key(k["id"], k["user_id"], k["key_hash"], k["label"], k["created_at"])
                    if k["revoked_at"] is not None:
                        dst.store_db.revoke_key(k["id"], k["revoked_at"])
                for k, v in meta.items():
                    dst.store_db.set_meta(k, v)
            source, copied = _all_counts(eng), _all_counts(dst)
            short = {t: (n, copied[t]) for t, n in source.items() if (copied[t] < n if force else copied[t] != n)}
            if short:
                raise MigrationMismatch(
                    f"the copy in {dst.path} does not hold what the source holds ("
                    + ", ".join(f"{t}: {have} of {want}" for t, (want, have) in short.items())
                    + "); another server may have written meanwhile: stop the servers and migrate "
                    "into an empty database again"
                )
            recalls = None if any(before.values()) else _same_recalls(eng, dst)
            if recalls is not None and recalls["differ"]:
                raise MigrationMismatch(
                    f"{len(recalls['differ'])} of {recalls['sampled']} sample recalls "
                    f"answer differently in {dst.path} (e.g. {recalls['differ'][0]})"
                )
            return {
                "source": eng.path,
                "target": dst.path,
                "copied": copied,
                "before": before,
                "skipped": imported["skipped"],
                "keys": len(keys),
                "meta": sorted(meta),
                "verified": {"counts": "equal" if not force else "at least the source's", "recalls": recalls},
            }
        finally:
            dst.close()


def _all_counts(eng: Engram) -> dict[str, int]:
    """Rows per table a migration copies: the export's tables and the keys."""
    return {**eng.store_db.table_counts(), "api_keys": len(eng.store_db.list_keys(None))}


def _same_recalls(here: Engram, there: Engram) -> dict:
    """Recall up to SAMPLE_RECALLS active memories, spread over the store, by their own text on
    both stores at one instant (as_of: no reinforcement, the same decay); the top ids must match."""
    # Every step-th active memory, picked while the rows stream by (the store is not held in memory).
    n_active = sum(n for _, _, status, n in here.store_db.memory_counts() if status == "active")
    step = max(1, n_active // SAMPLE_RECALLS)
    active = (m for m, _ in here.store_db.iter_memory_rows() if m.status == "active")
    sample = [m for k, m in enumerate(active) if k % step == 0][:SAMPLE_RECALLS]
    at = here.clock.now()
    differ = []
    for m in sample:
        query = m.content[:2000]
        ids = [
            [h.memory.id for h in e.recall(query, limit=SAMPLE_TOP, user_id=m.user_id, as_of=at, scope=EVERY_PROJECT)]
            for e in (here, there)
        ]
        if ids[0] != ids[1]:
            differ.append(f"{m.id}: {ids[0]} here, {ids[1]} there")
    return {"sampled": len(sample), "same": len(sample) - len(differ), "top": SAMPLE_TOP, "differ": differ}


# The names of the previous release, kept for one release (see the changelog): the functions are named
# for the operations they do (export_memories, import_memories).
export_jsonl = export_memories
import_jsonl = import_memories

__all__ = [
    "ExportIncomplete",
    "ImportConflict",
    "MigrationMismatch",
    "TargetNotEmpty",
    "export_jsonl",
    "export_memories",
    "import_jsonl",
    "import_memories",
    "migrate_store",
]
