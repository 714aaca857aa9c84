"""DuckDB access: connection, rows <-> domain values, transactions."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import duckdb
import numpy as np

# DuckDB's Python client tries `import pandas` several times per execute() to check
# parameter types; without pandas each failed import walks sys.path (~10 ms a call).
# Marking it absent makes the failure instant. Harmless where pandas is installed.
if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
    sys.modules["pandas"] = None  # type: ignore[assignment]

from ..errors import BackupInvalid, DatabaseDamaged, DatabaseLocked, DiskFull
from ..types import EVERY_PROJECT, Claim, EngramError, Memory, Scope, Session, Task
from . import schema as _schema
from .extensions import LOADED_BY_STORE, load_extensions
from .schema import SCHEMA_VERSION, migrate

MEMORY_COLUMNS = (
    "id", "content", "memory_type", "importance", "recall_count", "created_at",
    "last_recalled_at", "user_id", "task_id", "session_id", "tags", "metadata", "provenance",
    "status", "valid_from", "valid_to", "supersedes", "superseded_by", "pinned", "updated_at",
    "conversation", "stability", "project",
)
_MEM_SELECT = ", ".join(MEMORY_COLUMNS)
# Column types for bulk inserts (unnest of one list per column), embedding last.
_MEM_TYPES = ("VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "INTEGER", "TIMESTAMP", "TIMESTAMP",
              "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR[]", "VARCHAR", "VARCHAR[]", "VARCHAR",
              "TIMESTAMP", "TIMESTAMP", "VARCHAR", "VARCHAR", "BOOLEAN", "TIMESTAMP", "VARCHAR",
              "DOUBLE", "VARCHAR", "BLOB")
TASK_COLUMNS = ("id", "name", "goal", "status", "metadata", "user_id", "created_at", "updated_at", "project")
TABLES = ("memories", "tasks", "sessions", "edges", "memory_events", "meta", "api_keys")
SESSION_COLUMNS = ("id", "user_id", "client", "pid", "status", "started_at", "last_heartbeat",
                   "ended_at", "task_id", "outcome", "outcome_notes", "reported", "interruption",
                   "project", "branch")


# Recall counts are held and written together (see reinforce): with a write at least this many
# seconds after the first of them, or once this many memories have counts held.
RECALL_WRITE_DELAY_S = 1.0
RECALL_WRITE_MAX = 256
ERASURE_PENDING = "erasure_pending"  # meta key: rows were deleted since the file was last rewritten


def _in(column: str, n: int) -> str:
    """`column IN (?, ?, ...)`: unlike list_contains it can use the primary-key index."""
    return f"{column} IN ({', '.join('?' * n)})"


def _ts(dt: datetime | None) -> datetime | None:
    """Aware datetime -> naive UTC for storage."""
    if dt is None:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def memory_field_values(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """(column, stored value) of an update_memory's fields, both backends: KeyError for a field
    that is not a column (or is the id)."""
    out = []
    for k, v in fields.items():
        if k not in MEMORY_COLUMNS or k == "id":
            raise KeyError(k)
        if isinstance(v, datetime):
            v = _ts(v)
        elif k == "metadata":
            v = json.dumps(v) if v else None
        elif k in ("tags", "provenance"):
            v = list(v)
        out.append((k, v))
    return out


def session_field_values(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """(column, stored value) of an update_session's fields, both backends: KeyError for a
    field that is not a column."""
    out = []
    for k, v in fields.items():
        if k not in SESSION_COLUMNS + ("successes", "failures"):
            raise KeyError(k)
        out.append((k, _ts(v) if isinstance(v, datetime) else v))
    return out


def project_filter(scope: Scope, mark: str = "?") -> tuple[str, list[Any]]:
    """The SQL condition (and its parameters) for the rows a Scope sees, both backends: `mark`
    is the dialect's placeholder. A row of no project (NULL) is seen from every project."""
    if scope.everything:
        return "true", []
    if scope.project is None:
        return "project IS NULL", []
    return f"(project IS NULL OR project = {mark})", [scope.project]


def _aware(dt: datetime | None) -> datetime | None:
    return None if dt is None else dt.replace(tzinfo=timezone.utc)


def row_to_memory(r: Sequence[Any]) -> Memory:
    return Memory(
        id=r[0], content=r[1], memory_type=r[2], importance=float(r[3]),
        recall_count=int(r[4]), created_at=_aware(r[5]), last_recalled_at=_aware(r[6]),
        user_id=r[7], task_id=r[8], session_id=r[9], tags=tuple(r[10] or ()),
        metadata=json.loads(r[11]) if r[11] else {}, provenance=tuple(r[12] or ()),
        status=r[13], valid_from=_aware(r[14]), valid_to=_aware(r[15]), supersedes=r[16],
        superseded_by=r[17], pinned=bool(r[18]), updated_at=_aware(r[19]),
        conversation=r[20], stability=None if r[21] is None else float(r[21]), project=r[22],
    )


KEY_COLUMNS = ("id", "user_id", "key_hash", "label", "created_at", "revoked_at")
KEY_COLS = ", ".join(KEY_COLUMNS)


def row_to_key(r: Sequence[Any]) -> dict:
    """An api_keys row (KEY_COLUMNS) as list_keys gives it, both backends."""
    return {**dict(zip(KEY_COLUMNS, r, strict=True)), "created_at": _aware(r[4]), "revoked_at": _aware(r[5])}


def row_to_task(r: Sequence[Any]) -> Task:
    return Task(id=r[0], name=r[1], goal=r[2] or "", status=r[3],
                metadata=json.loads(r[4]) if r[4] else {}, user_id=r[5],
                created_at=_aware(r[6]), updated_at=_aware(r[7]), project=r[8])


def row_to_session(r: Sequence[Any]) -> Session:
    return Session(id=r[0], user_id=r[1], client=r[2] or "", pid=r[3], status=r[4],
                   started_at=_aware(r[5]), last_heartbeat=_aware(r[6]), ended_at=_aware(r[7]),
                   task_id=r[8], outcome=r[9], outcome_notes=r[10], reported=bool(r[11]),
                   interruption=r[12], project=r[13], branch=r[14])


def _unnest(types: Sequence[str]) -> str:
    return ", ".join(f"unnest(?::{t}[])" for t in types)


def _columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows)]


class _Pending:
    """Inserts held back by Store.buffered(), sent as one statement per table."""

    def __init__(self) -> None:
        self.memories: list[list[Any]] = []
        self.events: list[list[Any]] = []
        self.edges: dict[tuple[str, str], list[Any]] = {}
        self.new_edges: dict[tuple[str, str], list[Any]] = {}  # from new memories: no pair exists yet

    def __bool__(self) -> bool:
        return bool(self.memories or self.events or self.edges or self.new_edges)


class Rows:
    """A query's rows, already fetched (see Store.execute)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def fetchall(self) -> list[tuple]:
        return self.rows

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None


def row_to_claim(r: Sequence[Any]) -> Claim:
    # Claiming is hearing from the session: its heartbeat row is written at most every few
    # seconds (Engram._beat_every), so it may be older than the claim itself.
    since, beat = _aware(r[4]), _aware(r[5])
    return Claim(task_id=r[0], user_id=r[1], session_id=r[2], client=r[3] or "", since=since,
                 last_heard=None if beat is None else max(beat, since), session_status=r[6])


# The claim with its holder's heartbeat and status (a LEFT JOIN: a session row may be gone).
_CLAIM_SELECT = ("SELECT c.task_id, c.user_id, c.session_id, c.client, c.claimed_at, s.last_heartbeat, "
                 "s.status FROM claims c LEFT JOIN sessions s ON s.id = c.session_id")


class ClaimRows:
    """The claims of tasks (engram/claims.py), SQL written once for both backends: each store
    runs it through `_claim_sql(sql, params)` (? placeholders) and gets the rows back.

    Exactly one session holds a task: the primary key on task_id refuses a second insert, and
    a take-over is an update conditional on the holder the caller read, so of two sessions
    racing for one task one wins and the other finds no row changed (Claims retries it)."""

    def _claim_sql(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        raise NotImplementedError

    def get_claim(self, task_id: str) -> Claim | None:
        rows = self._claim_sql(f"{_CLAIM_SELECT} WHERE c.task_id = ?", [task_id])
        return row_to_claim(rows[0]) if rows else None

    def task_claims(self, user_id: str) -> dict[str, Claim]:
        rows = self._claim_sql(f"{_CLAIM_SELECT} WHERE c.user_id = ?", [user_id])
        return {r[0]: row_to_claim(r) for r in rows}

    def insert_claim(self, task_id: str, user_id: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(self._claim_sql(
            "INSERT INTO claims VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING RETURNING task_id",
            [task_id, user_id, session_id, client, _ts(now)]))

    def swap_claim(self, task_id: str, holder: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(self._claim_sql(
            "UPDATE claims SET session_id = ?, client = ?, claimed_at = ? WHERE task_id = ? AND session_id = ? "
            "RETURNING task_id", [session_id, client, _ts(now), task_id, holder]))

    def delete_claim(self, task_id: str, session_id: str | None = None) -> bool:
        if session_id is None:
            return bool(self._claim_sql("DELETE FROM claims WHERE task_id = ? RETURNING task_id", [task_id]))
        return bool(self._claim_sql("DELETE FROM claims WHERE task_id = ? AND session_id = ? RETURNING task_id",
                                    [task_id, session_id]))

    def delete_session_claims(self, session_id: str) -> list[str]:
        return [r[0] for r in self._claim_sql("DELETE FROM claims WHERE session_id = ? RETURNING task_id",
                                              [session_id])]

    def add_claim_notice(self, session_id: str, task_id: str, by_session: str, by_client: str,
                         now: datetime) -> None:
        self._claim_sql("INSERT INTO claim_notices VALUES (?, ?, ?, ?, ?)",
                        [session_id, task_id, by_session, by_client, _ts(now)])

    def take_claim_notices(self, session_id: str) -> list[dict]:
        # Read first: every call asks, and a DELETE that finds nothing still costs a write.
        if not self._claim_sql("SELECT 1 FROM claim_notices WHERE session_id = ? LIMIT 1", [session_id]):
            return []
        rows = self._claim_sql("DELETE FROM claim_notices WHERE session_id = ? "
                               "RETURNING task_id, by_session, by_client, happened_at", [session_id])
        return sorted(({"task_id": r[0], "by_session": r[1], "by_client": r[2] or "", "at": _aware(r[3])}
                       for r in rows), key=lambda n: n["at"])



def is_disk_full(e: BaseException) -> bool:
    """A DuckDB (or OS) error caused by a full disk (or quota)."""
    if isinstance(e, OSError):
        import errno
        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    text = str(e).lower()
    return "no space left" in text or "disk quota" in text or "disk full" in text


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class _Connection:
    """The DuckDB connection, turning the errors of a full disk or a damaged file into engram's.

    A full disk fails a commit cleanly (the WAL write is refused: nothing of it is kept) but a
    failed checkpoint (an automatic one at commit, or engram's own) invalidates the whole
    database object: every later statement, reads too, fails until it is reopened. So a fatal
    error reopens the file (the WAL holds every commit) and the statement that hit it raises
    DiskFull; the next one, read or write, runs on the fresh connection.
    """

    def __init__(self, path: str, describe: Callable[..., EngramError | None]):
        self.path = path
        self._describe = describe
        self.raw = duckdb.connect(path)

    def execute(self, sql: str, params: Any = None) -> Any:
        try:
            return self.raw.execute(sql, params) if params is not None else self.raw.execute(sql)
        except duckdb.FatalException as e:
            self._reopen()
            if sql == "ROLLBACK":
                return None  # the reopened connection has no transaction to roll back
            raise (self._describe(e, True) or e) from e
        except duckdb.Error as e:
            if sql == "ROLLBACK" and "no transaction is active" in str(e):
                return None  # the transaction died with a connection reopened inside it
            described = self._describe(e)
            if described is None:
                raise
            raise described from e

    def _reopen(self) -> None:
        with suppress(duckdb.Error):
            self.raw.close()
        self.raw = duckdb.connect(self.path)
        load_extensions(self.raw, LOADED_BY_STORE)

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


# DuckDB's file starts with three 4 KiB headers; blocks follow (storage/storage_info.hpp).
DUCKDB_HEADER_BYTES = 3 * 4096


def missing_bytes(con: duckdb.DuckDBPyConnection, path: str) -> int:
    """How many bytes short of its own count of used blocks the file is (0: whole, or not known).

    DuckDB opens a file cut short at a block boundary, and a read-only open reads the missing
    blocks only when a query needs them, so a truncated file can look fine until then. With a
    write-ahead log beside it (a process that stopped without a checkpoint: a kill) the count
    includes the blocks the replayed log allocated in memory, so nothing is concluded then: a
    missing block is still found when a query reads it (Store._runtime_error).
    """
    wal = Path(path + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        return 0
    # used_blocks, not total_blocks: DuckDB itself cuts free blocks off the end of the file at a
    # checkpoint while still counting them, so only the used ones must all be in it.
    row = con.execute("SELECT block_size, used_blocks FROM pragma_database_size() "
                      "WHERE database_name = current_database()").fetchone()
    if row is None:
        return 0
    need = DUCKDB_HEADER_BYTES + int(row[0]) * int(row[1])
    return max(0, need - Path(path).stat().st_size)


def inspect_file(path: Path) -> dict[str, Any]:
    """Check a DuckDB file engram did not open (a backup): {"schema_version", "counts"}.

    Opened read-only; its size is compared with its block count, and every row of every table is
    read (a hash over each, so a damaged block fails here). Raises BackupInvalid naming the file.
    """
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        raise BackupInvalid(f"{path} is not a usable engram backup: {_first_line(e)}") from None
    try:
        try:
            short = missing_bytes(con, str(path))
            version = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        except duckdb.Error as e:
            raise BackupInvalid(f"{path} is not an engram database ({_first_line(e)})") from None
        if short:
            raise BackupInvalid(f"{path} is truncated: {short} bytes of its blocks are missing")
        if version is None or version > SCHEMA_VERSION:
            raise BackupInvalid(f"{path} has schema v{version}; this engram reads up to v{SCHEMA_VERSION}"
                                + ("; upgrade engram to restore it" if version else ""))
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        counts = {}
        for table in _schema.TABLES:  # every table, the ledger too (db.TABLES: the exported ones)
            if table not in present and version < SCHEMA_VERSION:
                continue  # an older schema without this table: migrating it on open adds it
            try:
                n, _ = con.execute(f"SELECT count(*), bit_xor(hash(t)) FROM {table} t").fetchone()
            except duckdb.Error as e:
                raise BackupInvalid(f"{path}: table {table} cannot be read: {_first_line(e)}") from None
            counts[table] = int(n)
    finally:
        con.close()
    return {"schema_version": int(version), "counts": counts}


class Store(ClaimRows):
    """A DuckDB file (or :memory:) holding engram's canonical rows."""

    def __init__(self, path: str | Path, now: datetime):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(self.path) if self.path == ":memory:" else _Connection(
                self.path, self._runtime_error)
        except duckdb.IOException as e:
            if "could not set lock" in str(e).lower() or "conflicting lock" in str(e).lower():
                # Not just "lock": a damaged file's error names a "block".
                raise DatabaseLocked(
                    f"{self.path} is open in another process (an engram server owns it); "
                    "use that server (the CLI and `engram` stdio do this automatically) "
                    "or stop it with `engram stop`"
                ) from e
            raise self._damaged(e) from None
        except duckdb.Error as e:
            raise self._damaged(e) from None
        try:
            if self.path != ":memory:" and (short := missing_bytes(self.con, self.path)):
                self.con.close()
                raise self._damaged(f"the file is truncated: {short} bytes of its blocks are missing")
            load_extensions(self.con, LOADED_BY_STORE)  # none: nothing here uses one (extensions.py)
            migrate(self.con, now)
        except duckdb.Error as e:
            self.con.close()
            raise self._damaged(e) from None
        except DatabaseDamaged:
            raise
        except BaseException:
            self.con.close()
            raise
        self._lock = threading.RLock()
        self._depth = 0
        self._pending: _Pending | None = None
        self._recalls: dict[str, tuple[int, datetime, float]] = {}  # id -> (n, at, stability): see reinforce()
        self._recalls_since = 0.0  # time.monotonic() of the oldest count held

    def _damaged(self, e: duckdb.Error | str) -> EngramError:
        """The refusal of a file DuckDB cannot open or read; the file is left exactly as it is."""
        if self.path == ":memory:":
            return EngramError(f"cannot open an in-memory database: {e}")
        if is_disk_full(e):
            return DiskFull(f"cannot open {self.path}: the disk holding it is full ({_first_line(e)}); "
                            "free some space and try again. Nothing was changed")
        from ..backup import latest_backup
        newest = latest_backup(self.path)
        advice = (f"the newest backup is {newest}: `engram restore {newest}` puts it in place (the "
                  "damaged file is kept aside)" if newest else
                  f"no backup was found in {Path(self.path).parent / 'backups'}")
        return DatabaseDamaged(
            f"cannot open the engram database {self.path}: {_first_line(e)}. The file is damaged or "
            f"is not an engram database; engram left it untouched (it did not rename, move, truncate "
            f"or replace it). {advice[0].upper() + advice[1:]}.")

    def _runtime_error(self, e: Exception, fatal: bool = False) -> EngramError | None:
        """What a failed statement means to the user: a full disk, a damaged file, else None.

        fatal: a checkpoint failed (DuckDB's own at a commit, or engram's): the commit it followed
        is in the WAL, so the write that met it may be stored after all.
        """
        if is_disk_full(e):
            done = ("a checkpoint could not be written, so this write may or may not be stored "
                    "(look before repeating it)" if fatal else "this write was not stored")
            return DiskFull(f"the disk holding {self.path} is full: {done}. Reads keep working and "
                            f"writes resume by themselves once space is freed ({_first_line(e)})")
        text = str(e)
        if "Corrupt database file" in text or "Could not read enough bytes" in text:
            return self._damaged(e)
        return None

    def close(self) -> None:
        try:
            self._flush_recalls()
            self.con.execute("CHECKPOINT")
        except duckdb.Error:
            pass
        self.con.close()

    # -- transactions -------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._flush()  # rows held before the transaction are not its to roll back
            self.con.execute("BEGIN TRANSACTION")
            self._depth = 1
            recalls = self._recalls
            try:
                if self._recalls and (len(self._recalls) >= RECALL_WRITE_MAX or
                                      time.monotonic() - self._recalls_since >= RECALL_WRITE_DELAY_S):
                    self._flush_recalls()  # counted recalls ride on this commit
                yield
                self._flush()
            except BaseException:
                self._depth = 0
                if self._pending is not None:
                    self._pending = _Pending()
                self.con.execute("ROLLBACK")
                if recalls is not self._recalls:  # written in this transaction: not lost with it
                    for mid, (n, at, stability) in recalls.items():
                        self._count_recall(mid, n, at, stability)
                raise
            self._depth = 0
            self.con.execute("COMMIT")

    @contextmanager
    def buffered(self) -> Iterator[None]:
        """Hold back inserts of memories, events and edges and send each table's as one statement.

        A statement costs about a millisecond however small, which dominated bulk stores. Any
        other statement flushes first, so every read and update sees the held rows.
        """
        with self._lock:
            if self._pending is not None:
                yield
                return
            self._pending = _Pending()
            try:
                yield
                self._flush()
            finally:
                self._pending = None

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Rows:
        # Fetch under the lock: the connection holds one pending result, and a thread that
        # fetched after releasing it could read the rows of another thread's query.
        with self._lock:
            self._write_held()
            return Rows(self.con.execute(sql, params or []).fetchall())

    def _claim_sql(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        return self.execute(sql, params).fetchall()

    def _write_held(self) -> None:
        """Write the held rows and recall counts: every statement but a recall's own read runs after."""
        self._flush()
        self._flush_recalls()

    def _flush(self) -> None:
        p = self._pending
        if not p:
            return
        self._pending = _Pending()
        if len(p.memories) == 1:  # one row binds faster as VALUES (about 1 ms)
            self.con.execute(f"INSERT INTO memories ({_MEM_SELECT}, embedding) VALUES "
                             f"({', '.join('?' * len(_MEM_TYPES))})", p.memories[0])
        elif p.memories:
            self.con.execute(f"INSERT INTO memories ({_MEM_SELECT}, embedding) SELECT {_unnest(_MEM_TYPES)}",
                             _columns(p.memories))
        if p.events:
            self.con.execute("INSERT INTO memory_events SELECT "
                             + _unnest(("VARCHAR", "TIMESTAMP", "VARCHAR", "VARCHAR")), _columns(p.events))
        edge_types = _unnest(("VARCHAR", "VARCHAR", "DOUBLE", "VARCHAR"))
        if p.new_edges:  # a plain insert: checking for conflicts costs 3 ms a statement
            self.con.execute("INSERT INTO edges SELECT " + edge_types, _columns(list(p.new_edges.values())))
        if p.edges:
            self.con.execute("INSERT OR REPLACE INTO edges SELECT " + edge_types, _columns(list(p.edges.values())))


    # -- several servers on one database ----------------------------------------
    # A DuckDB file has one writer process by construction: the file lock (see __init__) lets
    # only the daemon that owns it open it. No other process can have written, so the feed of
    # changes is always empty and every lease is this process's.
    def change_mark(self) -> int:
        return 0

    def changes_since(self, mark: int) -> tuple[int, list[str], bool]:
        return 0, [], False

    def try_lease(self, name: str, holder: str, now: datetime, seconds: float) -> bool:
        return True

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        r = self.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return r[0] if r else None

    def set_meta(self, key: str, value: str) -> None:
        self.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def meta_items(self) -> dict[str, str]:
        return dict(self.execute("SELECT key, value FROM meta ORDER BY key").fetchall())

    def schema_version(self) -> int:
        return int(self.execute("SELECT max(version) FROM schema_version").fetchone()[0])

    # -- memories ------------------------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None:
        self._add(lambda p: p.memories.append(
            [m.id, m.content, m.memory_type, m.importance, m.recall_count, _ts(m.created_at),
             _ts(m.last_recalled_at), m.user_id, m.task_id, m.session_id, list(m.tags),
             json.dumps(m.metadata) if m.metadata else None, list(m.provenance), m.status,
             _ts(m.valid_from), _ts(m.valid_to), m.supersedes, m.superseded_by, m.pinned,
             _ts(m.updated_at), m.conversation, m.stability, m.project,
             None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()]))

    def _add(self, put: Any) -> None:
        """Queue rows in the open buffer, or write them at once when none is open."""
        with self._lock, self.buffered():
            put(self._pending)

    def update_memory(self, memory_id: str, embedding: np.ndarray | None = None, **fields: Any) -> None:
        values = memory_field_values(fields)
        sets, params = [f"{k} = ?" for k, _ in values], [v for _, v in values]
        if embedding is not None:
            sets.append("embedding = ?")
            params.append(np.asarray(embedding, dtype=np.float32).tobytes())
        if not sets:
            return
        self.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", params + [memory_id])

    def reinforce(self, ids: Sequence[str], now: datetime,
                  grow: Callable[[Memory, datetime], float]) -> dict[str, Memory]:
        """Count a recall of each memory, set its stability to grow(memory, now), return them as they are now.

        The counts are held, not committed on their own: a commit costs a disk flush (5-10 ms
        here) and a recall is a read. They are written together, with a write transaction at
        least RECALL_WRITE_DELAY_S after the first (or once RECALL_WRITE_MAX are held), before
        any other SQL statement, and at close. get_memories adds the held counts, so no read
        sees a stale count; a crash can lose the counts of the last recalls, never a memory.
        `grow` sees each memory with the recalls held before this one (the decay rule needs
        the time since the last recall and the stability it left).
        """
        with self._lock:
            self._flush()
            out = {}
            for m in self._read_memories(ids):
                before = self._counted(m)
                self._count_recall(m.id, 1, now, grow(before, now))
                out[m.id] = self._counted(m)
            return out

    def _count_recall(self, memory_id: str, n: int, at: datetime, stability: float) -> None:
        if not self._recalls:
            self._recalls_since = time.monotonic()
        had = self._recalls.get(memory_id)
        if had is None:
            self._recalls[memory_id] = (n, at, stability)
            return
        # The later recall's time and stability win (it was computed on top of the earlier one).
        _, t, s = had if had[1] > at else (n, at, stability)
        self._recalls[memory_id] = (had[0] + n, t, s)

    def _counted(self, m: Memory) -> Memory:
        """m with the recall counts (and stability) held for it."""
        held = self._recalls.get(m.id)
        if held is None:
            return m
        n, at, stability = held
        return replace(m, recall_count=m.recall_count + n, last_recalled_at=_aware(_ts(at)),
                       stability=stability)

    def _flush_recalls(self) -> None:
        if not self._recalls:
            return
        counted, self._recalls = self._recalls, {}
        ids = list(counted)
        self.con.execute(
            "UPDATE memories SET recall_count = recall_count + c.n, last_recalled_at = c.at, "
            "stability = c.s FROM (SELECT unnest(?::VARCHAR[]) AS id, unnest(?::INTEGER[]) AS n, "
            "unnest(?::TIMESTAMP[]) AS at, unnest(?::DOUBLE[]) AS s) c WHERE memories.id = c.id",
            [ids, [counted[i][0] for i in ids], [_ts(counted[i][1]) for i in ids],
             [counted[i][2] for i in ids]])

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        with self._lock:
            self._flush()
            return {m.id: self._counted(m) for m in self._read_memories(ids)}

    def _read_memories(self, ids: Sequence[str]) -> list[Memory]:
        """The rows of these ids as they are in the table (the caller decides what is written first)."""
        if not ids:
            return []
        rows = self.con.execute(f"SELECT {_MEM_SELECT} FROM memories WHERE {_in('id', len(ids))}",
                                list(ids)).fetchall()
        return [row_to_memory(r) for r in rows]

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.get_memories([memory_id]).get(memory_id)

    def _memories_where(self, where: str, params: Sequence[Any] = (), order: str = "created_at, id",
                        limit: int | None = None) -> list[Memory]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self.execute(
            f"SELECT {_MEM_SELECT} FROM memories WHERE {where} ORDER BY {order}{tail}", list(params)
        ).fetchall()
        return [row_to_memory(r) for r in rows]

    def task_memories(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's memories of any type but deleted ones, oldest first."""
        return self._memories_where("task_id = ? AND user_id = ? AND status <> 'deleted'",
                                    [task_id, user_id])

    def task_handoffs(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's handoffs but deleted ones, oldest first."""
        return self._memories_where(
            "user_id = ? AND task_id = ? AND memory_type = 'handoff' AND status <> 'deleted'",
            [user_id, task_id])

    def latest_handoff(self, user_id: str, task_id: str | None = None,
                       tags: Sequence[str] | None = None) -> Memory | None:
        """The newest active handoff of the user (of the task; carrying one of `tags`)."""
        where, params = "user_id = ? AND memory_type = 'handoff' AND status = 'active'", [user_id]
        if task_id is not None:
            where += " AND task_id = ?"
            params.append(task_id)
        rows = self._memories_where(where, params, order="created_at DESC, id DESC")
        if tags:  # few handoffs per user: filtered here, as recall filters tags
            rows = [m for m in rows if set(tags) & set(m.tags)]
        return rows[0] if rows else None

    def last_session_progress(self, session_id: str) -> Memory | None:
        """The newest progress note the session wrote (deleted ones aside)."""
        rows = self._memories_where(
            "session_id = ? AND memory_type = 'progress' AND status <> 'deleted'", [session_id],
            order="created_at DESC, id DESC", limit=1)
        return rows[0] if rows else None

    def active_failures_tagged(self, user_id: str, tag: str, scope: Scope = EVERY_PROJECT) -> list[Memory]:
        """The user's active failures carrying `tag` (in the scope), newest first."""
        where, params = project_filter(scope)
        return self._memories_where(
            "user_id = ? AND memory_type = 'failure' AND status = 'active' AND list_contains(tags, ?) "
            f"AND {where}", [user_id, tag, *params], order="created_at DESC")

    def active_failures_of_task(self, user_id: str, task_id: str) -> list[Memory]:
        """The task's active failures, newest first."""
        return self._memories_where(
            "user_id = ? AND memory_type = 'failure' AND status = 'active' AND task_id = ?",
            [user_id, task_id], order="created_at DESC")

    def active_failure_tags(self, user_id: str, prefix: str, scope: Scope = EVERY_PROJECT) -> list[str]:
        """The distinct tags starting with `prefix` on the user's active failures (in the scope)."""
        where, params = project_filter(scope)
        rows = self.execute(
            "SELECT DISTINCT t FROM (SELECT unnest(tags) AS t FROM memories WHERE user_id = ? "
            f"AND memory_type = 'failure' AND status = 'active' AND {where}) WHERE starts_with(t, ?)",
            [user_id, *params, prefix]).fetchall()
        return [r[0] for r in rows]

    def iter_index_rows(self, batch: int = 5000) -> Iterable[tuple[Memory, bytes | None]]:
        """Every non-deleted memory with its embedding, for rebuilding derived indexes."""
        with self._lock:
            self._write_held()
            cur = self.con.cursor()
        try:
            cur.execute(f"SELECT {_MEM_SELECT}, embedding FROM memories "
                        "WHERE status <> 'deleted' ORDER BY created_at, id")
            while True:
                rows = cur.fetchmany(batch)
                if not rows:
                    break
                for r in rows:
                    yield row_to_memory(r[:-1]), r[-1]
        finally:
            cur.close()

    def index_rows(self, ids: Sequence[str]) -> list[tuple[Memory, bytes | None]]:
        out: list[tuple[Memory, bytes | None]] = []
        with self._lock:
            self._flush()
            for i in range(0, len(ids), 1000):
                part = list(ids[i:i + 1000])
                rows = self.con.execute(f"SELECT {_MEM_SELECT}, embedding FROM memories "
                                        f"WHERE {_in('id', len(part))} AND status <> 'deleted'",
                                        part).fetchall()
                out += [(self._counted(row_to_memory(r[:-1])), r[-1]) for r in rows]
        return out

    def delete_memories(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        ids = list(ids)
        # Deleted rows' bytes stay in the file until it is rewritten: the next maintenance run
        # compacts while this flag is set (see compact()).
        self.set_meta(ERASURE_PENDING, "1")
        self.execute("DELETE FROM edges WHERE list_contains(?, src) OR list_contains(?, dst)", [ids, ids])
        self.execute("DELETE FROM memory_events WHERE list_contains(?, memory_id)", [ids])
        self.execute(f"DELETE FROM memories WHERE {_in('id', len(ids))}", ids)

    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None:
        self._add(lambda p: p.events.append(
            [memory_id, _ts(now), action, json.dumps(detail) if detail else None]))

    def events(self, memory_id: str) -> list[dict]:
        rows = self.execute("SELECT happened_at, action, detail FROM memory_events "
                            "WHERE memory_id = ? ORDER BY happened_at", [memory_id]).fetchall()
        return [{"at": _aware(r[0]).isoformat(), "action": r[1],
                 "detail": json.loads(r[2]) if r[2] else {}} for r in rows]

    def count(self, table: str) -> int:
        """Rows in one of the tables, of any status and user."""
        if table not in TABLES:
            raise KeyError(table)
        return self.count_where(table)

    def count_live_memories(self) -> int:
        """Memories of every user and status but deleted: the rows the index holds."""
        return self.count_where("memories", "status <> 'deleted'")

    def count_where(self, table: str, where: str = "true", params: Sequence[Any] = ()) -> int:
        """Rows matching a DuckDB condition: for tests and benchmarks that check the file itself.
        Not in MemoryStore: the engine asks for what it needs by name."""
        return int(self.execute(f"SELECT count(*) FROM {table} WHERE {where}", list(params)).fetchone()[0])

    # -- edges ---------------------------------------------------------------
    def add_edges(self, user_id: str, edges: Sequence[tuple[str, str, float]], new_source: bool = False) -> None:
        """Insert or replace edges; new_source: every edge starts at a memory inserted just now."""
        if not edges:
            return

        def put(p: _Pending) -> None:
            into = p.new_edges if new_source else p.edges
            for src, dst, w in edges:  # a later weight for the same pair wins, as with one INSERT each
                into[(src, dst)] = [src, dst, float(w), user_id]
        self._add(put)

    def delete_edges_of(self, ids: Sequence[str]) -> None:
        if ids:
            self.execute("DELETE FROM edges WHERE list_contains(?, src) OR list_contains(?, dst)",
                         [list(ids), list(ids)])

    def all_edges(self) -> list[tuple[str, str, float, str]]:
        return self.execute("SELECT src, dst, weight, user_id FROM edges").fetchall()

    # -- tasks ---------------------------------------------------------------
    def insert_task(self, t: Task) -> None:
        self.execute(f"INSERT INTO tasks ({', '.join(TASK_COLUMNS)}) VALUES ({', '.join('?' * len(TASK_COLUMNS))})",
                     [t.id, t.name, t.goal, t.status, json.dumps(t.metadata), t.user_id,
                      _ts(t.created_at), _ts(t.updated_at), t.project])

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        sets, params = ["updated_at = ?"], [_ts(now)]
        for k, v in fields.items():
            if k not in ("name", "goal", "status", "metadata"):
                raise KeyError(k)
            sets.append(f"{k} = ?")
            params.append(json.dumps(v) if k == "metadata" else v)
        self.execute(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", params + [task_id])

    def get_task(self, task_id: str) -> Task | None:
        r = self.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE id = ?", [task_id]).fetchone()
        return row_to_task(r) if r else None

    def list_tasks(self, user_id: str, status: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Task]:
        scoped, params = project_filter(scope)
        where, params = f"user_id = ? AND {scoped}", [user_id, *params]
        if status:
            where += " AND status = ?"
            params.append(status)
        rows = self.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE {where} "
                            "ORDER BY updated_at DESC", params).fetchall()
        return [row_to_task(r) for r in rows]

    def task_last_activity(self, user_id: str) -> dict[str, tuple[datetime, str, str]]:
        """Per task of the user: when its newest memory was written, its type and its content."""
        # Ties on the time (a batch, a virtual clock) go to the later id: ids sort in write order.
        rows = self.execute(
            "SELECT task_id, created_at, memory_type, content FROM ("
            "SELECT task_id, created_at, memory_type, content, row_number() OVER "
            "(PARTITION BY task_id ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE user_id = ? AND task_id IS NOT NULL AND status <> 'deleted') WHERE k = 1",
            [user_id]).fetchall()
        return {r[0]: (_aware(r[1]), r[2], r[3]) for r in rows}

    def task_sessions(self, task_id: str, status: str) -> list[Session]:
        rows = self.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE task_id = ? "
                            "AND status = ? ORDER BY started_at, id", [task_id, status]).fetchall()
        return [row_to_session(r) for r in rows]

    # -- sessions ------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        r = self.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE id = ?",
                         [session_id]).fetchone()
        return row_to_session(r) if r else None

    def upsert_session(self, s: Session) -> None:
        self.execute(
            f"INSERT OR REPLACE INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
            f"({', '.join('?' * len(SESSION_COLUMNS))})",
            [s.id, s.user_id, s.client, s.pid, s.status, _ts(s.started_at), _ts(s.last_heartbeat),
             _ts(s.ended_at), s.task_id, s.outcome, s.outcome_notes, s.reported, s.interruption,
             s.project, s.branch])

    def update_session(self, session_id: str, **fields: Any) -> None:
        values = session_field_values(fields)
        sets, params = [f"{k} = ?" for k, _ in values], [v for _, v in values]
        self.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", params + [session_id])

    def _sessions_where(self, where: str, params: Sequence[Any] = ()) -> list[Session]:
        rows = self.execute(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE {where} "
                            "ORDER BY started_at", list(params)).fetchall()
        return [row_to_session(r) for r in rows]

    def user_sessions(self, user_id: str) -> list[Session]:
        """The user's sessions, oldest first."""
        return self._sessions_where("user_id = ?", [user_id])

    def sessions_of_task(self, user_id: str, task_id: str) -> list[Session]:
        """The user's sessions that named the task or wrote one of its memories, oldest first."""
        return self._sessions_where(
            "user_id = ? AND (task_id = ? OR id IN (SELECT DISTINCT session_id FROM memories "
            "WHERE task_id = ? AND user_id = ? AND session_id IS NOT NULL))",
            [user_id, task_id, task_id, user_id])

    def stale_sessions(self, before: datetime) -> list[Session]:
        """Active sessions of any user whose last heartbeat is older than `before`."""
        return self._sessions_where("status = 'active' AND last_heartbeat < ?", [_ts(before)])

    def unreported_interruptions(self, user_id: str, stale_before: datetime,
                                 exclude: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Session]:
        """The user's sessions not reported yet that are interrupted, or active with a last
        heartbeat older than `stale_before` (silent: as good as interrupted), but `exclude`."""
        where, params = project_filter(scope)
        return self._sessions_where(
            "NOT reported AND user_id = ? AND id <> ? AND (status = 'interrupted' OR "
            f"(status = 'active' AND last_heartbeat < ?)) AND {where}",
            [user_id, exclude or "", _ts(stale_before), *params])

    def projects(self, user_id: str) -> list[tuple[str, int, int]]:
        """(project, memories, tasks) of every project the user's live memories or tasks belong to."""
        rows = self.execute(
            "SELECT project, sum(m), sum(t) FROM (SELECT project, 1 AS m, 0 AS t FROM memories "
            "WHERE user_id = ? AND project IS NOT NULL AND status <> 'deleted' UNION ALL "
            "SELECT project, 0, 1 FROM tasks WHERE user_id = ? AND project IS NOT NULL) "
            "GROUP BY project ORDER BY project", [user_id, user_id]).fetchall()
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        """Count one success or failure of the session and keep it as its latest outcome."""
        col = {"success": "successes", "failure": "failures"}[outcome]
        self.execute(f"UPDATE sessions SET {col} = coalesce({col}, 0) + 1, outcome = ?, "
                     "outcome_notes = ? WHERE id = ?", [outcome, notes, session_id])

    def session_outcomes(self) -> dict[str, tuple[int, int]]:
        rows = self.execute("SELECT id, coalesce(successes, 0), coalesce(failures, 0) FROM sessions "
                            "WHERE coalesce(successes, 0) + coalesce(failures, 0) > 0").fetchall()
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    # -- maintenance, stats, transfer (appended for engram.maintenance / engram.transfer) ----------
    def open_task_ids(self) -> set[str]:
        rows = self.execute("SELECT id FROM tasks WHERE status NOT IN ('done', 'abandoned')").fetchall()
        return {r[0] for r in rows}

    def latest_handoff_ids(self) -> set[str]:
        """The newest active handoff of every (user, task) pair, the task-less ones included."""
        rows = self.execute(
            "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY user_id, task_id "
            "ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE memory_type = 'handoff' AND status = 'active') WHERE k = 1").fetchall()
        return {r[0] for r in rows}

    def retired_memories(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None, datetime | None]]:
        """(id, status, superseded_by, valid_to) of memories out of normal recall."""
        rows = self.execute("SELECT id, status, superseded_by, valid_to FROM memories "
                            "WHERE list_contains(?, status)", [list(statuses)]).fetchall()
        return [(r[0], r[1], r[2], _aware(r[3])) for r in rows]

    def existing_ids(self, table: str, ids: Sequence[str]) -> set[str]:
        if table not in ("memories", "tasks", "sessions") or not ids:
            return set()
        rows = self.execute(f"SELECT id FROM {table} WHERE list_contains(?, id)", [list(ids)]).fetchall()
        return {r[0] for r in rows}

    def memory_counts(self, user_id: str | None = None) -> list[tuple[str, str, str, int]]:
        """(user_id, memory_type, status, count) groups."""
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        return [(r[0], r[1], r[2], int(r[3])) for r in self.execute(
            f"SELECT user_id, memory_type, status, count(*) FROM memories WHERE {where} "
            "GROUP BY ALL ORDER BY ALL", params).fetchall()]

    def status_counts(self, table: str, user_id: str | None = None) -> dict[str, int]:
        if table not in ("tasks", "sessions"):
            raise KeyError(table)
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        rows = self.execute(f"SELECT status, count(*) FROM {table} WHERE {where} GROUP BY status",
                            params).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def table_counts(self, user_id: str | None = None) -> dict[str, int]:
        """Rows per exported table (memory_events counted through their memory's user)."""
        uw, p = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        out = {t: self.count_where(t, uw, p) for t in ("memories", "tasks", "sessions", "edges")}
        mw = "m.user_id = ?" if user_id is not None else "true"
        out["memory_events"] = int(self.execute(
            f"SELECT count(*) FROM memory_events e JOIN memories m ON m.id = e.memory_id WHERE {mw}",
            p).fetchone()[0])
        return out

    def iter_memory_rows(self, user_id: str | None = None, batch: int = 2000
                         ) -> Iterable[tuple[Memory, bytes | None]]:
        """Every memory row of any status, with its embedding, oldest first."""
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        with self._lock:
            self._write_held()
            cur = self.con.cursor()
        try:
            cur.execute(f"SELECT {_MEM_SELECT}, embedding FROM memories WHERE {where} "
                        "ORDER BY created_at, id", params)
            while rows := cur.fetchmany(batch):
                for r in rows:
                    yield row_to_memory(r[:-1]), r[-1]
        finally:
            cur.close()

    def events_by_memory(self, user_id: str | None = None) -> dict[str, list[dict]]:
        where, params = ("m.user_id = ?", [user_id]) if user_id is not None else ("true", [])
        rows = self.execute(
            "SELECT e.memory_id, e.happened_at, e.action, e.detail FROM memory_events e "
            f"JOIN memories m ON m.id = e.memory_id WHERE {where} "
            "ORDER BY e.memory_id, e.happened_at", params).fetchall()
        out: dict[str, list[dict]] = {}
        for r in rows:
            out.setdefault(r[0], []).append({"at": _aware(r[1]).isoformat(), "action": r[2],
                                             "detail": json.loads(r[3]) if r[3] else {}})
        return out

    def all_tasks(self, user_id: str | None = None) -> list[Task]:
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        rows = self.execute(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE {where} "
                            "ORDER BY created_at, id", params).fetchall()
        return [row_to_task(r) for r in rows]

    def sessions_with_counts(self, user_id: str | None = None) -> list[tuple[Session, int, int]]:
        """Sessions with their success and failure counts."""
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        rows = self.execute(f"SELECT {', '.join(SESSION_COLUMNS)}, coalesce(successes, 0), "
                            f"coalesce(failures, 0) FROM sessions WHERE {where} "
                            "ORDER BY started_at, id", params).fetchall()
        return [(row_to_session(r[:-2]), int(r[-2]), int(r[-1])) for r in rows]

    def user_edges(self, user_id: str | None = None) -> list[tuple[str, str, float, str]]:
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        return self.execute(f"SELECT src, dst, weight, user_id FROM edges WHERE {where} "
                            "ORDER BY src, dst", params).fetchall()

    def file_size(self) -> int | None:
        """Bytes on disk: the database file plus its write-ahead log (None in memory)."""
        if self.path == ":memory:":
            return None
        return sum(p.stat().st_size for p in (Path(self.path), Path(self.path + ".wal")) if p.exists())

    def checkpoint(self) -> None:
        with self._lock:
            self._flush_recalls()
            self.con.execute("CHECKPOINT")

    def backup(self, dest: Path) -> int:
        """A consistent copy of the database at dest; returns its size in bytes.

        Under the store's lock no statement runs, and after CHECKPOINT the file holds every
        committed row (the WAL is empty), so a byte copy of it is the database as of now. This
        takes milliseconds per 10 MB where COPY FROM DATABASE rewrites every row (35 times
        slower, benchmarks/faults.py); writes wait for the copy.
        """
        from ..backup import copy_file

        if self.path == ":memory:":
            raise EngramError("an in-memory database has no file to back up")
        with self._lock:
            if self._depth:
                raise EngramError("cannot back up inside a transaction")
            self._write_held()
            self.con.execute("CHECKPOINT")
            return copy_file(self.path, dest)

    def compact(self) -> bool:
        """Rewrite the database into a fresh file and swap it in.

        CHECKPOINT only marks deleted rows' blocks free: their bytes stay in the file until
        reused, and rows deleted from a live row group stay in it. Copying the live rows into
        a new file is DuckDB's documented way to make deleted text leave the disk.
        Returns False for an in-memory database.
        """
        if self.path == ":memory:":
            return False
        tmp = Path(self.path + ".compact")
        with self._lock:
            if self._depth:
                raise EngramError("cannot compact inside a transaction")
            for p in (tmp, Path(str(tmp) + ".wal")):
                p.unlink(missing_ok=True)
            self._flush_recalls()
            self.con.execute("CHECKPOINT")
            db = self.con.execute("SELECT current_database()").fetchone()[0]
            quoted = str(tmp).replace("'", "''")
            self.con.execute(f"ATTACH '{quoted}' AS engram_compact")
            try:
                self.con.execute(f'COPY FROM DATABASE "{db}" TO engram_compact')
                self.con.execute("CHECKPOINT engram_compact")
            finally:
                self.con.execute("DETACH engram_compact")
            self.con.close()
            tmp.replace(self.path)
            Path(self.path + ".wal").unlink(missing_ok=True)
            self.con = _Connection(self.path, self._runtime_error)
            load_extensions(self.con.raw, LOADED_BY_STORE)
            self.con.execute("DELETE FROM meta WHERE key = ?", [ERASURE_PENDING])
            return True

    # -- per-user keys ---------------------------------------------------------
    def insert_key(self, key_id: str, user_id: str, key_hash: str, label: str | None, now: datetime) -> None:
        self.execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, NULL)",
                     [key_id, user_id, key_hash, label, _ts(now)])

    def key_user(self, key_hash: str) -> str | None:
        r = self.execute("SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
                         [key_hash]).fetchone()
        return r[0] if r else None

    def list_keys(self, user_id: str | None) -> list[dict]:
        where, params = ("user_id = ?", [user_id]) if user_id is not None else ("true", [])
        rows = self.execute(f"SELECT {KEY_COLS} FROM api_keys "
                            f"WHERE {where} ORDER BY created_at, id", params).fetchall()
        return [row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str, now: datetime) -> bool:
        r = self.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
                         [_ts(now), key_id]).fetchone()
        return r is not None

    def keys_in_use(self) -> bool:
        return self.execute("SELECT EXISTS (SELECT 1 FROM api_keys)").fetchone()[0]

    def erasure_pending(self) -> bool:
        """True when deleted rows may still have bytes in the file (compact() clears it)."""
        return self.get_meta(ERASURE_PENDING) is not None
