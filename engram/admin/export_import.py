"""Export and import as JSON Lines: every memory (any status, with history and embedding), task,
session and edge, between a header line and an end line that carries the counts.

Format (format_version 1; its line models are in engram/admin/export_format.py), one JSON object per line,
`kind` first:

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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engram.admin.export_format import (
    FORMAT,
    FORMAT_VERSION,
    EdgeLine,
    HeaderLine,
    Rereadable,
    memory_of,
    open_file,
    read_lines,
    rereadable,
    session_of,
    task_of,
)
from engram.core.clock import utc
from engram.core.errors import ExportIncomplete, ImportConflict, MigrationMismatch, ModelMismatch, TargetNotEmpty
from engram.core.settings import is_database_url, store_identity
from engram.core.types import EVERY_PROJECT, EngramError

if TYPE_CHECKING:
    from engram.engram import Engram

TABLES = ("memories", "tasks", "sessions", "edges", "memory_events")
IMPORT_BATCH = 2000  # memories an import sends per batch of statements
_KIND_TABLE = {"memory": "memories", "task": "tasks", "session": "sessions", "edge": "edges"}


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
            table = _KIND_TABLE.get(obj.get("kind"))
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


# -- import -----------------------------------------------------------------------------------------------
def import_memories(
    eng: Engram,
    path: str | Path | IO[str],
    on_conflict: str = "error",
    reembed: bool = False,
    user_id: str | None = None,
) -> dict:
    """Load a file written by export_memories, then rebuild the derived indexes.

    on_conflict: "error" refuses the whole file if any memory, task or session id exists here;
    "skip" keeps the existing rows and imports the rest. reembed=True accepts a file embedded
    with another model and embeds every memory with this engram's model. user_id set (an import
    on a user's behalf): the file must hold only that user's rows and may link only to that
    user's tasks and memories, else nothing is imported.

    Two passes over the file, so memory stays bounded by a batch whatever its size (an engram
    migrate of a whole store goes through here): the first validates every line and keeps only
    ids, the second writes the rows IMPORT_BATCH at a time, all in one transaction (all or
    nothing).
    """
    if on_conflict not in ("error", "skip"):
        raise EngramError(f"on_conflict must be 'error' or 'skip'; got {on_conflict!r}")
    with rereadable(path) as f:
        scan = _scan(f)
        header = scan.header
        if header.format_version > FORMAT_VERSION:
            raise EngramError(
                f"file format v{header.format_version} is newer than this engram "
                f"(reads v{FORMAT_VERSION}); upgrade engram"
            )
        if user_id is not None:
            _check_single_user(scan.users, user_id)
        same_model = (header.model.name, header.model.dim) == (eng.embedder.name, eng.embedder.dim)
        if not same_model and not reembed:
            raise ModelMismatch(
                f"the file was embedded with {header.model.name} ({header.model.dim} dims) but this "
                f"engram uses {eng.embedder.name} ({eng.embedder.dim} dims); import with reembed=True "
                f"(`--reembed`) to embed every memory again with {eng.embedder.name}"
            )
        db = eng.store_db
        with eng.lock:
            clash = {t: _existing_ids(db, t, scan.ids[t]) for t in ("memories", "tasks", "sessions")}
            n_clash = sum(len(v) for v in clash.values())
            if n_clash and on_conflict == "error":
                detail = "; ".join(f"{t}: {len(v)} (e.g. {', '.join(sorted(v)[:3])})" for t, v in clash.items() if v)
                raise ImportConflict(
                    f"{n_clash} id(s) in the file already exist here ({detail}); "
                    "nothing was imported. Import into an empty store, or skip "
                    "existing ids with on_conflict='skip' (`--skip-existing`)"
                )
            kept_clash = clash["memories"]
            if user_id is not None:
                _check_task_links(db, scan.task_refs - (scan.ids["tasks"] - clash["tasks"]), user_id)
                # A skipped id may be another user's memory: the file's edges must not reach it.
                kept_clash = {i for i, m in db.get_memories(sorted(kept_clash)).items() if m.user_id == user_id}
            writer = _Writer(
                eng,
                clash,
                known=(scan.ids["memories"] - clash["memories"]) | kept_clash,
                use_vector=same_model,
                new_source=not kept_clash,
            )
            with db.transaction():
                for kind, line in read_lines(f):
                    writer.add(kind, line)
                writer.flush()
            eng.rebuild_indexes()
            c = writer.counts
            return {
                **{t: c[t] for t in TABLES},
                "skipped": n_clash,
                "reembedded": c["reembedded"],
                "skipped_edges": c["skipped_edges"],
            }


@dataclass(frozen=True)
class _Scan:
    """What the first pass keeps of a file: its header and ids, never its rows."""

    header: HeaderLine
    ids: dict[str, set[str]]  # memories, tasks, sessions
    task_refs: set[str]  # task ids that memories and sessions name
    users: dict[str, int]  # rows per user


def _scan(f: Rereadable) -> _Scan:
    """Validate every line (as read_lines does) and the end line's counts; keep ids only."""
    header, end = None, None
    ids: dict[str, set[str]] = {"memories": set(), "tasks": set(), "sessions": set()}
    have = dict.fromkeys(TABLES, 0)
    task_refs: set[str] = set()
    users: dict[str, int] = {}
    for kind, line in read_lines(f):
        if kind == "header":
            header = line
            continue
        if kind == "end":
            end = line
            continue
        table = _KIND_TABLE[kind]
        have[table] += 1
        users[line.user_id] = users.get(line.user_id, 0) + 1
        if kind == "edge":
            continue
        if line.id in ids[table]:  # a line written twice: the second would fail the insert
            raise EngramError(f"the file holds {kind} {line.id!r} twice; nothing was imported")
        ids[table].add(line.id)
        if kind == "memory":
            have["memory_events"] += len(line.events)
        if kind != "task" and line.task_id:
            task_refs.add(line.task_id)
    if header is None:
        raise EngramError("not an engram export: no header line")
    if end is None:
        raise EngramError("the file is truncated: no end line; nothing was imported")
    if any(have[t] != end.counts.get(t, 0) for t in have):
        raise EngramError(f"the file's rows ({have}) do not match its end line ({end.counts}); nothing was imported")
    return _Scan(header, ids, task_refs, users)


class _Writer:
    """The second pass: rows go in as they come, memories and edges IMPORT_BATCH (edges four times
    that) at a time, so no more than a batch is held."""

    def __init__(self, eng: Engram, clash: dict[str, set[str]], known: set[str], use_vector: bool, new_source: bool):
        self.eng, self.db = eng, eng.store_db
        self.clash, self.known = clash, known
        self.use_vector, self.new_source = use_vector, new_source
        # MemoryLine rows: a model built at import from the columns, whose fields a checker cannot see.
        self.memories: list[Any] = []
        self.edges: list[EdgeLine] = []
        self.counts = {
            "memories": 0,
            "tasks": 0,
            "sessions": 0,
            "edges": 0,
            "memory_events": 0,
            "reembedded": 0,
            "skipped_edges": 0,
        }

    def add(self, kind: str, line: Any) -> None:
        if kind == "task" and line.id not in self.clash["tasks"]:
            self.db.insert_task(task_of(line, self.eng.redact))
            self.counts["tasks"] += 1
        elif kind == "session" and line.id not in self.clash["sessions"]:
            self.db.upsert_session(session_of(line, self.eng.redact))
            self.db.update_session(line.id, successes=line.successes, failures=line.failures)
            self.counts["sessions"] += 1
        elif kind == "memory" and line.id not in self.clash["memories"]:
            self.memories.append(line)
            if len(self.memories) >= IMPORT_BATCH:
                self._put_memories()
        elif kind == "edge":
            if line.src in self.known and line.dst in self.known:
                self.edges.append(line)
                if len(self.edges) >= IMPORT_BATCH * 4:
                    self._put_edges()
            else:
                self.counts["skipped_edges"] += 1

    def flush(self) -> None:
        self._put_memories()
        self._put_edges()

    def _put_memories(self) -> None:
        dim = self.eng.embedder.dim
        prepared = [[*memory_of(m, self.eng.redact, dim, self.use_vector), m.events] for m in self.memories]
        to_embed = [k for k, p in enumerate(prepared) if p[1] is None]
        for i in range(0, len(to_embed), 256):
            batch = to_embed[i : i + 256]
            vecs = self.eng.embedder.embed_batch([prepared[k][0].content for k in batch])
            for k, v in zip(batch, vecs):
                prepared[k][1] = v
        # Store.buffered: a statement per table and batch instead of one per row (a 2,000-memory
        # import took minutes row by row); only these inserts run inside, so nothing flushes early.
        with self.db.buffered():
            for mem, vec, events in prepared:
                self.db.insert_memory(mem, vec)
                for ev in events:
                    self.db.add_event(mem.id, utc(ev.at), ev.action, self.eng.redact.value(ev.detail))
                self.counts["memory_events"] += len(events)
        self.counts["memories"] += len(prepared)
        self.counts["reembedded"] += len(to_embed)
        self.memories = []

    def _put_edges(self) -> None:
        by_user: dict[str, list[tuple[str, str, float]]] = {}
        for e in self.edges:
            by_user.setdefault(e.user_id, []).append((e.src, e.dst, e.weight))
        for user, links in by_user.items():
            with self.db.buffered():
                # new_source: every source is a memory inserted just now, unless ids were
                # skipped, whose edges may exist already (then insert or replace).
                self.db.add_edges(user, links, new_source=self.new_source)
        self.counts["edges"] += len(self.edges)
        self.edges = []


def _existing_ids(db: Any, table: str, ids: set[str]) -> set[str]:
    """The ids of `table` already here, asked IMPORT_BATCH at a time."""
    todo = sorted(ids)
    found: set[str] = set()
    for i in range(0, len(todo), IMPORT_BATCH):
        found |= db.existing_ids(table, todo[i : i + IMPORT_BATCH])
    return found


def _check_single_user(users: dict[str, int], user_id: str) -> None:
    others = {u: n for u, n in users.items() if u != user_id}
    if others:
        names = ", ".join(f"{u!r} ({n} rows)" for u, n in sorted(others.items())[:5])
        raise EngramError(
            f"the file holds rows of other users ({names}); an import as user "
            f"{user_id!r} takes only that user's rows, so nothing was imported. "
            "Import it as that user (`engram --user NAME import`), or export one "
            "user at a time (`engram --user NAME export`)"
        )


def _check_task_links(db: Any, refs: set[str], user_id: str) -> None:
    """Rows imported for a user may name a task in the file, one of the user's, or none that exists.

    `refs`: the task ids the file's rows name, less the tasks the file itself brings in."""
    taken = sorted(t for t in refs if (row := db.get_task(t)) is not None and row.user_id != user_id)
    if taken:
        raise ImportConflict(
            f"{len(taken)} task id(s) the file links to already exist here for "
            f"another user (e.g. {', '.join(taken[:3])}); nothing was imported"
        )


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
    hands them out, the import reads the file twice and writes IMPORT_BATCH memories at a time,
    and the sample recalls are picked as the rows go by, so the copy holds about a batch of rows
    in memory beside what the two engines keep anyway (each one's derived index). The source
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
