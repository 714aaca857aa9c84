"""The import of an export file (engram/admin/export_import.py describes the format and the policy):
read twice, first to check it whole (one user, ids that clash, tasks that exist), then to write
every line in one transaction, redacted again, re-embedded where the model or the text changed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from engram.admin.export_format import (
    FORMAT_VERSION,
    KIND_TABLE,
    TABLES,
    EdgeLine,
    HeaderLine,
    Rereadable,
    memory_of,
    read_lines,
    rereadable,
    session_of,
    task_of,
)
from engram.core.clock import utc
from engram.core.errors import ImportConflict, ModelMismatch
from engram.core.types import EngramError

if TYPE_CHECKING:
    from engram.engram import Engram

IMPORT_BATCH = 2000  # memories an import sends per batch of statements


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
            if c["memories"]:
                eng.indexes.tokens.request_fill()  # derived, not carried: the turns' token vectors
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
        table = KIND_TABLE[kind]
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
