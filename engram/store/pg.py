"""PostgreSQL access (psycopg 3 + pgvector): the MemoryStore of a database several servers share.

Same rows and behaviour as the DuckDB Store (db.py), with what sharing needs:
- recall counts are written in the reinforce call, under a row lock, so another server sees
  them and two servers reinforcing one memory both count (db.Store holds them a while);
- a change feed (table `changes`, filled by triggers in the writing transaction) tells every
  server which memories and edges others wrote (change_mark / changes_since);
- leases (table `leases`) let one server of many run the upkeep (try_lease).
Times are stored as naive UTC `timestamp`, as on DuckDB; embeddings as pgvector `vector`.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ..errors import DatabaseUnavailable
from ..types import EVERY_PROJECT, EngramError, Memory, Scope, Session, Task
from .db import (
    ERASURE_PENDING,
    KEY_COLS,
    MEMORY_COLUMNS,
    SESSION_COLUMNS,
    TABLES,
    TASK_COLUMNS,
    ClaimRows,
    Rows,
    _aware,
    _ts,
    memory_field_values,
    project_filter,
    row_to_key,
    row_to_memory,
    row_to_session,
    row_to_task,
    session_field_values,
)
from .schema import PG_MIGRATIONS, schema_too_new

try:
    import psycopg
    from pgvector.psycopg import register_vector
except ImportError:  # the optional `postgres` extra
    psycopg = None  # type: ignore[assignment]

_MEM_SELECT = ", ".join(MEMORY_COLUMNS)
_MEM_INSERT = (f"INSERT INTO memories ({_MEM_SELECT}, embedding) VALUES "
               f"({', '.join(['%s'] * len(MEMORY_COLUMNS))}, %b)")
_EDGE_UPSERT = ("INSERT INTO edges (src, dst, weight, user_id) VALUES (%s, %s, %s, %s) ON CONFLICT (src, dst) "
                "DO UPDATE SET weight = excluded.weight, user_id = excluded.user_id")
_SESSION_UPSERT = (f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
                   f"({', '.join(['%s'] * len(SESSION_COLUMNS))}) ON CONFLICT (id) DO UPDATE SET "
                   + ", ".join(f"{c} = excluded.{c}" for c in SESSION_COLUMNS[1:]))
# Two servers starting at once must not both migrate: every migration step takes this
# transaction-scoped advisory lock first (an arbitrary constant: "engram" in ASCII).
MIGRATION_LOCK = 0x656E6772616D
CHANGES_KEPT_S = 3600.0  # change-feed rows older than this are pruned: a reader gone longer rebuilds
PRUNE_EVERY_S = 60.0


def redact_url(url: str) -> str:
    """The URL without its password (in the user part or a password= parameter): safe to show."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if k != "password"], safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _vec(embedding: np.ndarray | None) -> Any:
    return None if embedding is None else np.asarray(embedding, dtype=np.float32)


def _vec_bytes(v: Any) -> bytes | None:
    """A pgvector value (Vector or array) as the float32 bytes the engine reads."""
    if v is None:
        return None
    arr = v.to_numpy() if hasattr(v, "to_numpy") else v
    return np.asarray(arr, dtype=np.float32).tobytes()


def connect(url: str) -> Any:
    """An autocommit connection with pgvector's types, or DatabaseUnavailable naming the problem."""
    shown = redact_url(url)
    if psycopg is None:
        raise DatabaseUnavailable(
            f"{shown}: PostgreSQL support is not installed; run: pip install 'engram-recall[postgres]'")
    try:
        con = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        raise DatabaseUnavailable(f"cannot connect to {shown}: {str(e).strip()}") from None
    try:
        if con.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            con.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
            try:
                con.execute("CREATE EXTENSION IF NOT EXISTS vector")
            finally:
                con.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK])
        register_vector(con)
    except psycopg.Error as e:
        con.close()
        raise DatabaseUnavailable(
            f"{shown}: the pgvector extension is missing and cannot be created ({str(e).strip()}); "
            "install pgvector on the server or have an administrator run CREATE EXTENSION vector"
        ) from None
    return con


def current_version(con: Any) -> int:
    if con.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None:
        return 0
    return int(con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0])


def migrate(con: Any, now: datetime, target: int | None = None) -> list[int]:
    """Apply pending PG_MIGRATIONS up to target (default: all), each in its own transaction
    under the migration lock (another server may be migrating at the same moment: whoever
    waited finds the step done). Returns the versions this call applied."""
    latest = len(PG_MIGRATIONS)
    target = latest if target is None else target
    applied = []
    while True:
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            con.execute("CREATE TABLE IF NOT EXISTS schema_version "
                        "(version integer PRIMARY KEY, description text, applied_at timestamp)")
            have = current_version(con)
            if have > latest:
                raise schema_too_new(have, latest)
            if have >= target:
                return applied
            description, statements = PG_MIGRATIONS[have]
            for sql in statements:
                con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (%s, %s, %s)", [have + 1, description, _ts(now)])
        applied.append(have + 1)


class _Pending:
    """Inserts held back by PgStore.buffered(), sent per table as one pipelined executemany."""

    def __init__(self) -> None:
        self.memories: list[list[Any]] = []
        self.events: list[list[Any]] = []
        self.edges: dict[tuple[str, str], list[Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.memories or self.events or self.edges)


class PgStore(ClaimRows):
    """A PostgreSQL database holding engram's canonical rows; any number of servers may share it."""

    def __init__(self, url: str, now: datetime):
        self.url = url
        self.path = redact_url(url)  # shown in health and setup output
        self.con = connect(url)
        try:
            self.migrated = migrate(self.con, now)  # the versions this open applied
        except psycopg.Error as e:
            self.con.close()
            raise DatabaseUnavailable(f"{self.path}: cannot migrate the schema: {str(e).strip()}") from None
        except BaseException:  # a schema newer than this engram
            self.con.close()
            raise
        self._lock = threading.RLock()
        self._depth = 0
        self._pending: _Pending | None = None
        self._pruned_at = 0.0

    def close(self) -> None:
        with self._lock:
            with suppress(psycopg.Error):
                self._flush()
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
            with self._connection():
                self._flush()  # rows held before the transaction are not its to roll back
                self.con.execute("BEGIN")
            self._depth = 1
            try:
                yield
                with self._connection():
                    self._flush()
            except BaseException:
                self._depth = 0
                if self._pending is not None:
                    self._pending = _Pending()
                if not self.con.broken:  # a lost connection rolled back with it
                    self.con.execute("ROLLBACK")
                raise
            self._depth = 0
            with self._connection():
                self.con.execute("COMMIT")

    @contextmanager
    def buffered(self) -> Iterator[None]:
        """Hold back inserts of memories, events and edges and send each table's in one pipeline
        (executemany): one round trip instead of one per row. Any other statement flushes first.
        COPY was slower: its text form of the vectors cost more than executemany's binary
        parameters (607 against 2,864 memories/s with their events, 500 a batch, 2026-12-01)."""
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

    def _flush(self) -> None:
        p = self._pending
        if not p:
            return
        self._pending = _Pending()
        with self.con.cursor() as cur:
            if p.memories:
                cur.executemany(_MEM_INSERT, p.memories)
            if p.events:
                cur.executemany("INSERT INTO memory_events VALUES (%s, %s, %s, %s)", p.events)
            if p.edges:
                cur.executemany(_EDGE_UPSERT, list(p.edges.values()))

    def _add(self, put: Any) -> None:
        """Queue rows in the open buffer, or write them at once when none is open."""
        with self._lock, self.buffered():
            put(self._pending)

    def _rows(self, sql: str, params: Sequence[Any] = (), binary: bool = False) -> list[tuple]:
        with self._lock, self._connection():
            self._flush()
            with self.con.cursor(binary=binary) as cur:
                cur.execute(sql, list(params) if params else None)  # None: a literal % stays one
                return cur.fetchall() if cur.description else []

    def _claim_sql(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        return self._rows(sql.replace("?", "%s"), params)

    def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        with self._lock, self._connection():
            self._flush()
            return self.con.execute(sql, list(params) if params else None).rowcount

    @contextmanager
    def _connection(self) -> Iterator[None]:
        """A lost connection (the server restarted, the network dropped) fails this call with
        DatabaseUnavailable and is replaced, so the next call works. The call is not retried:
        whether a write that lost its answer was committed is unknown."""
        try:
            yield
        except psycopg.OperationalError as e:
            if not self.con.broken:
                raise
            self.con = connect(self.url)
            raise DatabaseUnavailable(
                f"{self.path}: the connection was lost ({str(e).strip()}); reconnected, try again") from None

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Rows:
        """Run SQL with ? placeholders, as Store.execute takes it: for tests and benchmarks that
        check the database itself. Not in MemoryStore: the engine asks for what it needs by name."""
        if params:
            sql = sql.replace("%", "%%").replace("?", "%s")
        return Rows(self._rows(sql, params or ()))

    def count_where(self, table: str, where: str = "true", params: Sequence[Any] = ()) -> int:
        """Rows matching a condition with ? placeholders, as Store.count_where takes them."""
        return int(self.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0])

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        r = self._rows("SELECT value FROM meta WHERE key = %s", [key])
        return r[0][0] if r else None

    def set_meta(self, key: str, value: str) -> None:
        self._run("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                  [key, value])

    def meta_items(self) -> dict[str, str]:
        return dict(self._rows('SELECT key, value FROM meta ORDER BY key COLLATE "C"'))

    def schema_version(self) -> int:
        return int(self._rows("SELECT max(version) FROM schema_version")[0][0])

    # -- memories ------------------------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None:
        self._add(lambda p: p.memories.append(
            [m.id, m.content, m.memory_type, m.importance, m.recall_count, _ts(m.created_at),
             _ts(m.last_recalled_at), m.user_id, m.task_id, m.session_id, list(m.tags),
             json.dumps(m.metadata) if m.metadata else None, list(m.provenance), m.status,
             _ts(m.valid_from), _ts(m.valid_to), m.supersedes, m.superseded_by, m.pinned,
             _ts(m.updated_at), m.conversation, m.stability, m.project, _vec(embedding)]))

    def update_memory(self, memory_id: str, embedding: np.ndarray | None = None, **fields: Any) -> None:
        values = memory_field_values(fields)
        sets, params = [f"{k} = %s" for k, _ in values], [v for _, v in values]
        if embedding is not None:
            sets.append("embedding = %b")
            params.append(_vec(embedding))
        if sets:
            self._run(f"UPDATE memories SET {', '.join(sets)} WHERE id = %s", params + [memory_id])

    def reinforce(self, ids: Sequence[str], now: datetime,
                  grow: Callable[[Memory, datetime], float]) -> dict[str, Memory]:
        """Count a recall of each memory and set its stability to grow(memory, now), written now.

        Another server must see the counts, and two servers may reinforce one memory at once:
        the rows are locked (SELECT ... FOR UPDATE, in id order so two callers cannot deadlock)
        before grow() reads them, so each call grows the stability the other left.
        """
        if not ids:
            return {}
        with self.transaction():
            if self._depth == 1:  # a transaction of its own
                # A recall is a read: it should not wait for a disk flush (about 30 ms here). The
                # commit is visible to every server at once and a crash can lose only the last
                # few recall counts, never a memory: DuckDB's Store makes the same trade.
                self._run("SET LOCAL synchronous_commit = off")
            rows = self._rows(f"SELECT {_MEM_SELECT} FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                              [list(ids)])
            if not rows:
                return {}
            out = {}
            for r in rows:
                m = row_to_memory(r)
                out[m.id] = replace(m, recall_count=m.recall_count + 1, last_recalled_at=_aware(_ts(now)),
                                    stability=grow(m, now))
            self._run("UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = %s, "
                      "stability = c.s FROM unnest(%s::text[], %s::double precision[]) AS c(id, s) "
                      "WHERE memories.id = c.id",
                      [_ts(now), list(out), [m.stability for m in out.values()]])
            return out

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        rows = self._rows(f"SELECT {_MEM_SELECT} FROM memories WHERE id = ANY(%s)", [list(ids)])
        return {r[0]: row_to_memory(r) for r in rows}

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.get_memories([memory_id]).get(memory_id)

    def _memories_where(self, where: str, params: Sequence[Any] = (), order: str = "created_at, id",
                        limit: int | None = None) -> list[Memory]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._rows(f"SELECT {_MEM_SELECT} FROM memories WHERE {where} ORDER BY {order}{tail}", params)
        return [row_to_memory(r) for r in rows]

    def task_memories(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where("task_id = %s AND user_id = %s AND status <> 'deleted'", [task_id, user_id])

    def task_handoffs(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = %s AND task_id = %s AND memory_type = 'handoff' AND status <> 'deleted'", [user_id, task_id])

    def latest_handoff(self, user_id: str, task_id: str | None = None,
                       tags: Sequence[str] | None = None) -> Memory | None:
        where, params = "user_id = %s AND memory_type = 'handoff' AND status = 'active'", [user_id]
        if task_id is not None:
            where += " AND task_id = %s"
            params.append(task_id)
        rows = self._memories_where(where, params, order="created_at DESC, id DESC")
        if tags:  # few handoffs per user: filtered here, as on DuckDB
            rows = [m for m in rows if set(tags) & set(m.tags)]
        return rows[0] if rows else None

    def last_session_progress(self, session_id: str) -> Memory | None:
        rows = self._memories_where(
            "session_id = %s AND memory_type = 'progress' AND status <> 'deleted'", [session_id],
            order="created_at DESC, id DESC", limit=1)
        return rows[0] if rows else None

    def active_failures_tagged(self, user_id: str, tag: str, scope: Scope = EVERY_PROJECT) -> list[Memory]:
        where, params = project_filter(scope, "%s")
        return self._memories_where(
            f"user_id = %s AND memory_type = 'failure' AND status = 'active' AND %s = ANY(tags) AND {where}",
            [user_id, tag, *params], order="created_at DESC")

    def active_failures_of_task(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = %s AND memory_type = 'failure' AND status = 'active' AND task_id = %s",
            [user_id, task_id], order="created_at DESC")

    def active_failure_tags(self, user_id: str, prefix: str, scope: Scope = EVERY_PROJECT) -> list[str]:
        where, params = project_filter(scope, "%s")
        rows = self._rows(
            "SELECT DISTINCT t FROM (SELECT unnest(tags) AS t FROM memories WHERE user_id = %s "
            f"AND memory_type = 'failure' AND status = 'active' AND {where}) s WHERE starts_with(t, %s)",
            [user_id, *params, prefix])
        return [r[0] for r in rows]

    def _iter_rows(self, where: str, params: Sequence[Any], batch: int) -> Iterable[tuple[Memory, bytes | None]]:
        """Memory rows with their embeddings, oldest first, read in batches by keyset (created_at,
        id) so no cursor stays open between batches (the connection serves other threads)."""
        after: tuple | None = None
        while True:
            cond, p = where, list(params)
            if after is not None:
                cond += " AND (created_at, id) > (%s, %s)"
                p += list(after)
            rows = self._rows(f"SELECT {_MEM_SELECT}, embedding FROM memories WHERE {cond} "
                              f"ORDER BY created_at, id LIMIT {int(batch)}", p, binary=True)
            for r in rows:
                yield row_to_memory(r[:-1]), _vec_bytes(r[-1])
            if len(rows) < batch:
                return
            after = (rows[-1][5], rows[-1][0])

    def iter_index_rows(self, batch: int = 5000) -> Iterable[tuple[Memory, bytes | None]]:
        return self._iter_rows("status <> 'deleted'", [], batch)

    def iter_memory_rows(self, user_id: str | None = None, batch: int = 2000
                         ) -> Iterable[tuple[Memory, bytes | None]]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        return self._iter_rows(where, params, batch)

    def index_rows(self, ids: Sequence[str]) -> list[tuple[Memory, bytes | None]]:
        if not ids:
            return []
        rows = self._rows(f"SELECT {_MEM_SELECT}, embedding FROM memories WHERE id = ANY(%s) "
                          "AND status <> 'deleted'", [list(ids)], binary=True)
        return [(row_to_memory(r[:-1]), _vec_bytes(r[-1])) for r in rows]

    def delete_memories(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        ids = list(ids)
        with self.transaction():
            # Deleted rows' bytes stay in the table files until VACUUM FULL rewrites them (compact).
            self.set_meta(ERASURE_PENDING, "1")
            self._run("DELETE FROM edges WHERE src = ANY(%s) OR dst = ANY(%s)", [ids, ids])
            self._run("DELETE FROM memory_events WHERE memory_id = ANY(%s)", [ids])
            self._run("DELETE FROM memories WHERE id = ANY(%s)", [ids])

    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None:
        self._add(lambda p: p.events.append([memory_id, _ts(now), action, json.dumps(detail) if detail else None]))

    def events(self, memory_id: str) -> list[dict]:
        rows = self._rows("SELECT happened_at, action, detail FROM memory_events "
                          "WHERE memory_id = %s ORDER BY happened_at", [memory_id])
        return [{"at": _aware(r[0]).isoformat(), "action": r[1],
                 "detail": json.loads(r[2]) if r[2] else {}} for r in rows]

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise KeyError(table)
        return int(self._rows(f"SELECT count(*) FROM {table}")[0][0])

    def count_live_memories(self) -> int:
        return int(self._rows("SELECT count(*) FROM memories WHERE status <> 'deleted'")[0][0])

    # -- edges ---------------------------------------------------------------
    def add_edges(self, user_id: str, edges: Sequence[tuple[str, str, float]], new_source: bool = False) -> None:
        if not edges:
            return

        def put(p: _Pending) -> None:
            for src, dst, w in edges:  # a later weight for the same pair wins, as with one INSERT each
                p.edges[(src, dst)] = [src, dst, float(w), user_id]
        self._add(put)

    def delete_edges_of(self, ids: Sequence[str]) -> None:
        if ids:
            self._run("DELETE FROM edges WHERE src = ANY(%s) OR dst = ANY(%s)", [list(ids), list(ids)])

    def all_edges(self) -> list[tuple[str, str, float, str]]:
        return self._rows("SELECT src, dst, weight, user_id FROM edges")

    # -- tasks ---------------------------------------------------------------
    def insert_task(self, t: Task) -> None:
        self._run(f"INSERT INTO tasks ({', '.join(TASK_COLUMNS)}) VALUES ({', '.join(['%s'] * len(TASK_COLUMNS))})",
                  [t.id, t.name, t.goal, t.status, json.dumps(t.metadata), t.user_id,
                   _ts(t.created_at), _ts(t.updated_at), t.project])

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        sets, params = ["updated_at = %s"], [_ts(now)]
        for k, v in fields.items():
            if k not in ("name", "goal", "status", "metadata"):
                raise KeyError(k)
            sets.append(f"{k} = %s")
            params.append(json.dumps(v) if k == "metadata" else v)
        self._run(f"UPDATE tasks SET {', '.join(sets)} WHERE id = %s", params + [task_id])

    def get_task(self, task_id: str) -> Task | None:
        r = self._rows(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE id = %s", [task_id])
        return row_to_task(r[0]) if r else None

    def list_tasks(self, user_id: str, status: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Task]:
        scoped, params = project_filter(scope, "%s")
        where, params = f"user_id = %s AND {scoped}", [user_id, *params]
        if status:
            where += " AND status = %s"
            params.append(status)
        rows = self._rows(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE {where} "
                          "ORDER BY updated_at DESC", params)
        return [row_to_task(r) for r in rows]

    def task_last_activity(self, user_id: str) -> dict[str, tuple[datetime, str, str]]:
        # Ties on the time (a batch, a virtual clock) go to the later id: ids sort in write order.
        rows = self._rows(
            "SELECT DISTINCT ON (task_id) task_id, created_at, memory_type, content FROM memories "
            "WHERE user_id = %s AND task_id IS NOT NULL AND status <> 'deleted' "
            "ORDER BY task_id, created_at DESC, id DESC", [user_id])
        return {r[0]: (_aware(r[1]), r[2], r[3]) for r in rows}

    def task_sessions(self, task_id: str, status: str) -> list[Session]:
        return self._sessions_where("task_id = %s AND status = %s", [task_id, status], "started_at, id")

    # -- sessions ------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        r = self._sessions_where("id = %s", [session_id])
        return r[0] if r else None

    def upsert_session(self, s: Session) -> None:
        self._run(_SESSION_UPSERT,
                  [s.id, s.user_id, s.client, s.pid, s.status, _ts(s.started_at), _ts(s.last_heartbeat),
                   _ts(s.ended_at), s.task_id, s.outcome, s.outcome_notes, s.reported, s.interruption,
                   s.project, s.branch])

    def update_session(self, session_id: str, **fields: Any) -> None:
        values = session_field_values(fields)
        sets, params = [f"{k} = %s" for k, _ in values], [v for _, v in values]
        if sets:
            self._run(f"UPDATE sessions SET {', '.join(sets)} WHERE id = %s", params + [session_id])

    def _sessions_where(self, where: str, params: Sequence[Any] = (), order: str = "started_at") -> list[Session]:
        rows = self._rows(f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions WHERE {where} ORDER BY {order}",
                          params)
        return [row_to_session(r) for r in rows]

    def user_sessions(self, user_id: str) -> list[Session]:
        return self._sessions_where("user_id = %s", [user_id])

    def sessions_of_task(self, user_id: str, task_id: str) -> list[Session]:
        return self._sessions_where(
            "user_id = %s AND (task_id = %s OR id IN (SELECT DISTINCT session_id FROM memories "
            "WHERE task_id = %s AND user_id = %s AND session_id IS NOT NULL))",
            [user_id, task_id, task_id, user_id])

    def stale_sessions(self, before: datetime) -> list[Session]:
        return self._sessions_where("status = 'active' AND last_heartbeat < %s", [_ts(before)])

    def unreported_interruptions(self, user_id: str, stale_before: datetime,
                                 exclude: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Session]:
        where, params = project_filter(scope, "%s")
        return self._sessions_where(
            "NOT reported AND user_id = %s AND id <> %s AND (status = 'interrupted' OR "
            f"(status = 'active' AND last_heartbeat < %s)) AND {where}",
            [user_id, exclude or "", _ts(stale_before), *params])

    def projects(self, user_id: str) -> list[tuple[str, int, int]]:
        rows = self._rows(
            "SELECT project, sum(m), sum(t) FROM (SELECT project, 1 AS m, 0 AS t FROM memories "
            "WHERE user_id = %s AND project IS NOT NULL AND status <> 'deleted' UNION ALL "
            "SELECT project, 0, 1 FROM tasks WHERE user_id = %s AND project IS NOT NULL) u "
            "GROUP BY project ORDER BY project", [user_id, user_id])
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        col = {"success": "successes", "failure": "failures"}[outcome]
        self._run(f"UPDATE sessions SET {col} = coalesce({col}, 0) + 1, outcome = %s, "
                  "outcome_notes = %s WHERE id = %s", [outcome, notes, session_id])

    def session_outcomes(self) -> dict[str, tuple[int, int]]:
        rows = self._rows("SELECT id, coalesce(successes, 0), coalesce(failures, 0) FROM sessions "
                          "WHERE coalesce(successes, 0) + coalesce(failures, 0) > 0")
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    # -- maintenance and stats -------------------------------------------------
    def open_task_ids(self) -> set[str]:
        return {r[0] for r in self._rows("SELECT id FROM tasks WHERE status NOT IN ('done', 'abandoned')")}

    def latest_handoff_ids(self) -> set[str]:
        rows = self._rows(
            "SELECT DISTINCT ON (user_id, task_id) id FROM memories "
            "WHERE memory_type = 'handoff' AND status = 'active' "
            "ORDER BY user_id, task_id, created_at DESC, id DESC")
        return {r[0] for r in rows}

    def retired_memories(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None, datetime | None]]:
        rows = self._rows("SELECT id, status, superseded_by, valid_to FROM memories WHERE status = ANY(%s)",
                          [list(statuses)])
        return [(r[0], r[1], r[2], _aware(r[3])) for r in rows]

    def existing_ids(self, table: str, ids: Sequence[str]) -> set[str]:
        if table not in ("memories", "tasks", "sessions") or not ids:
            return set()
        return {r[0] for r in self._rows(f"SELECT id FROM {table} WHERE id = ANY(%s)", [list(ids)])}

    def memory_counts(self, user_id: str | None = None) -> list[tuple[str, str, str, int]]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        # COLLATE "C": the byte order DuckDB sorts strings in, whatever the database's locale.
        return [(r[0], r[1], r[2], int(r[3])) for r in self._rows(
            f"SELECT user_id, memory_type, status, count(*) FROM memories WHERE {where} "
            'GROUP BY 1, 2, 3 ORDER BY user_id COLLATE "C", memory_type COLLATE "C", status COLLATE "C", 4',
            params)]

    def status_counts(self, table: str, user_id: str | None = None) -> dict[str, int]:
        if table not in ("tasks", "sessions"):
            raise KeyError(table)
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        rows = self._rows(f"SELECT status, count(*) FROM {table} WHERE {where} GROUP BY status", params)
        return {r[0]: int(r[1]) for r in rows}

    def file_size(self) -> int | None:
        """Bytes the database takes on the server's disk (pg_database_size)."""
        return int(self._rows("SELECT pg_database_size(current_database())")[0][0])

    def checkpoint(self) -> None:
        """Nothing to do: every commit is already durable in Postgres' write-ahead log, and the
        server checkpoints its data files itself (a client CHECKPOINT needs superuser rights)."""
        with self._lock:
            self._flush()

    def backup(self, dest: Any) -> int:
        raise EngramError("engram backup copies a DuckDB file; a PostgreSQL database is backed up "
                          "with its own tools: pg_dump (see docs/backups.md)")

    def compact(self) -> bool:
        """VACUUM FULL the tables deleted rows live in: each is rewritten into new files and the
        old ones (holding the dead rows' bytes) are removed. Plain VACUUM only marks the space
        reusable. Takes an exclusive lock on each table while it runs; must run outside a
        transaction (VACUUM cannot run inside one)."""
        with self._lock:
            if self._depth:
                raise EngramError("cannot compact inside a transaction")
            self._flush()
            for table in ("memories", "memory_events", "edges"):  # changes holds ids, never text
                self.con.execute(f"VACUUM FULL {table}")
            self.con.execute("DELETE FROM meta WHERE key = %s", [ERASURE_PENDING])
            return True

    def erasure_pending(self) -> bool:
        """True when deleted rows may still have bytes in the table files (compact() clears it)."""
        return self.get_meta(ERASURE_PENDING) is not None

    # -- export and import -----------------------------------------------------
    def table_counts(self, user_id: str | None = None) -> dict[str, int]:
        uw, p = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        out = {t: int(self._rows(f"SELECT count(*) FROM {t} WHERE {uw}", p)[0][0])
               for t in ("memories", "tasks", "sessions", "edges")}
        mw = "m.user_id = %s" if user_id is not None else "true"
        out["memory_events"] = int(self._rows(
            f"SELECT count(*) FROM memory_events e JOIN memories m ON m.id = e.memory_id WHERE {mw}", p)[0][0])
        return out

    def events_by_memory(self, user_id: str | None = None) -> dict[str, list[dict]]:
        where, params = ("m.user_id = %s", [user_id]) if user_id is not None else ("true", [])
        rows = self._rows(
            "SELECT e.memory_id, e.happened_at, e.action, e.detail FROM memory_events e "
            f"JOIN memories m ON m.id = e.memory_id WHERE {where} "
            'ORDER BY e.memory_id COLLATE "C", e.happened_at', params)
        out: dict[str, list[dict]] = {}
        for r in rows:
            out.setdefault(r[0], []).append({"at": _aware(r[1]).isoformat(), "action": r[2],
                                             "detail": json.loads(r[3]) if r[3] else {}})
        return out

    def all_tasks(self, user_id: str | None = None) -> list[Task]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        rows = self._rows(f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks WHERE {where} "
                          "ORDER BY created_at, id", params)
        return [row_to_task(r) for r in rows]

    def sessions_with_counts(self, user_id: str | None = None) -> list[tuple[Session, int, int]]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        rows = self._rows(f"SELECT {', '.join(SESSION_COLUMNS)}, coalesce(successes, 0), "
                          f"coalesce(failures, 0) FROM sessions WHERE {where} ORDER BY started_at, id", params)
        return [(row_to_session(r[:-2]), int(r[-2]), int(r[-1])) for r in rows]

    def user_edges(self, user_id: str | None = None) -> list[tuple[str, str, float, str]]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        return self._rows(f"SELECT src, dst, weight, user_id FROM edges WHERE {where} "
                          'ORDER BY src COLLATE "C", dst COLLATE "C"', params)

    # -- per-user keys ---------------------------------------------------------
    def insert_key(self, key_id: str, user_id: str, key_hash: str, label: str | None, now: datetime) -> None:
        self._run("INSERT INTO api_keys VALUES (%s, %s, %s, %s, %s, NULL)",
                  [key_id, user_id, key_hash, label, _ts(now)])

    def key_user(self, key_hash: str) -> str | None:
        r = self._rows("SELECT user_id FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL", [key_hash])
        return r[0][0] if r else None

    def list_keys(self, user_id: str | None) -> list[dict]:
        where, params = ("user_id = %s", [user_id]) if user_id is not None else ("true", [])
        rows = self._rows(f"SELECT {KEY_COLS} FROM api_keys "
                          f"WHERE {where} ORDER BY created_at, id", params)
        return [row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str, now: datetime) -> bool:
        return self._run("UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                         [_ts(now), key_id]) > 0

    def keys_in_use(self) -> bool:
        return bool(self._rows("SELECT EXISTS (SELECT 1 FROM api_keys)")[0][0])

    # -- change feed and leases (several servers on one database) ---------------
    def change_mark(self) -> int:
        """The newest change number now: a later changes_since(mark) returns only newer writes.

        The mark is a transaction id, not a row's seq: seqs are taken at insert but become
        visible at commit, so a reader that advanced past the newest visible seq could skip a
        lower one committed later. Every transaction below the snapshot's xmin has ended, so
        rows of ids in [mark, xmin) are final once xmin has passed them. Writes of transactions
        still running now (ids >= xmin) come in a later call, even if some committed just now
        and the caller read them already: a repeat, never a loss."""
        return int(self._rows("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")[0][0])

    def changes_since(self, mark: int) -> tuple[int, list[str], bool]:
        """Writes committed by any process after `mark`: (the new mark, ids of memories inserted,
        updated or deleted, in change order without repeats, whether any edge changed)."""
        with self._lock:
            self._prune_changes()
            rows = self._rows(
                "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) "
                "SELECT (SELECT xmin FROM s)::text::bigint, c.seq, c.memory_id FROM (SELECT 1) one "
                "LEFT JOIN changes c ON c.xid >= %s::text::xid8 AND c.xid < (SELECT xmin FROM s) "
                "ORDER BY c.seq", [str(mark)])
        new_mark = int(rows[0][0]) if rows else mark
        ids: dict[str, None] = {}
        edges = False
        for _, seq, memory_id in rows:
            if seq is None:
                continue
            if memory_id is None:
                edges = True
            else:
                ids[memory_id] = None
        return max(new_mark, mark), list(ids), edges

    def _prune_changes(self) -> None:
        """Drop feed rows older than CHANGES_KEPT_S, at most once a PRUNE_EVERY_S."""
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = time.monotonic()
        self._run("DELETE FROM changes WHERE at < clock_timestamp() - %s", [timedelta(seconds=CHANGES_KEPT_S)])

    def try_lease(self, name: str, holder: str, now: datetime, seconds: float) -> bool:
        """Take the named lease for `seconds` when it is free, expired or already `holder`'s;
        True when `holder` holds it now. One statement: two servers asking at once cannot both
        get it (the primary key serialises them)."""
        rows = self._rows(
            "INSERT INTO leases VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "until = excluded.until WHERE leases.until < %s OR leases.holder = excluded.holder RETURNING holder",
            [name, holder, _ts(now + timedelta(seconds=seconds)), _ts(now)])
        return bool(rows)


def check_database(url: str, now: datetime) -> dict[str, Any]:
    """What engram-setup reports of a PostgreSQL URL: the server, pgvector and the schema,
    migrated to this engram's version on the way. Raises DatabaseUnavailable naming the problem."""
    store = PgStore(url, now)  # connects, creates the vector extension if needed, migrates
    try:
        con = store.con
        with store._lock:
            server = con.execute("SHOW server_version").fetchone()[0]
            vector = con.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        return {"path": store.path, "via": "postgres", "server_version": server, "pgvector": vector,
                "schema_version": store.schema_version(), "migrated": store.migrated,
                "memories": store.count("memories")}
    finally:
        store.close()
