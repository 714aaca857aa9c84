"""The SQL both backends run alike, written once: SqlStore, the base of Store (db.py, DuckDB) and
PgStore (pg.py, PostgreSQL).

Every statement here is written with `?` placeholders and runs through the backend's
`_sql(sql, params)`, which flushes held rows first (each backend holds inserts its own way) and
returns the rows. What the two dialects spell differently is in one Dialect per backend. What a
backend does its own way stays in its file: connecting and its errors, transactions, bulk inserts,
reading memories (DuckDB holds recall counts, PostgreSQL locks rows), the change feed and leases,
backup and compaction.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from ..types import EVERY_PROJECT, Claim, Memory, Scope, Session, Task
from .rows import (
    KEY_COLUMNS,
    MEM_SELECT,
    SESSION_COLUMNS,
    TABLES,
    TASK_COLUMNS,
    aware,
    event_dict,
    memory_field_values,
    row_to_claim,
    row_to_key,
    row_to_memory,
    row_to_session,
    row_to_task,
    session_field_values,
    session_values,
    task_values,
    ts,
)

ERASURE_PENDING = "erasure_pending"  # meta key: rows were deleted since the file was last rewritten
_SESSION_SELECT = f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions"
_TASK_SELECT = f"SELECT {', '.join(TASK_COLUMNS)} FROM tasks"
# The claim with its holder's heartbeat and status (a LEFT JOIN: a session row may be gone).
_CLAIM_SELECT = ("SELECT c.task_id, c.user_id, c.session_id, c.client, c.claimed_at, s.last_heartbeat, "
                 "s.status FROM claims c LEFT JOIN sessions s ON s.id = c.session_id")


@dataclass(frozen=True)
class Dialect:
    """What the shared SQL spells differently per backend (`{col}` names the column)."""

    one_of: str  # the column's value is in the list bound to ?
    holds: str  # the array column holds the value bound to ?
    collate: str  # after a text sort key: byte order (DuckDB's own), whatever the locale

    def key_in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: the condition and its parameters."""
        return self.one_of.format(col=column), [list(values)]


class _DuckDialect(Dialect):
    def key_in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        # `id IN (?, ?, ...)`: unlike list_contains it can use the primary-key index.
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)


DUCKDB = _DuckDialect(one_of="list_contains(?, {col})", holds="list_contains({col}, ?)", collate="")
POSTGRES = Dialect(one_of="{col} = ANY(?)", holds="? = ANY({col})", collate=' COLLATE "C"')


def project_filter(scope: Scope) -> tuple[str, list[Any]]:
    """The SQL condition (and its parameters) for the rows a Scope sees. A row of no project
    (NULL) is seen from every project."""
    if scope.everything:
        return "true", []
    if scope.project is None:
        return "project IS NULL", []
    return "(project IS NULL OR project = ?)", [scope.project]


def _of_user(user_id: str | None, column: str = "user_id") -> tuple[str, list[Any]]:
    """The rows of the user, or every row when None."""
    return (f"{column} = ?", [user_id]) if user_id is not None else ("true", [])


class Rows:
    """A query's rows, already fetched (what the backends' execute() returns)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def fetchall(self) -> list[tuple]:
        return self.rows

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None


class Pending:
    """Inserts held back by buffered(), sent together by the backend's _flush."""

    def __init__(self) -> None:
        self.memories: list[list[Any]] = []
        self.events: list[list[Any]] = []
        self.edges: dict[tuple[str, str], list[Any]] = {}
        self.new_edges: dict[tuple[str, str], list[Any]] = {}  # from new memories: no pair exists yet

    def __bool__(self) -> bool:
        return bool(self.memories or self.events or self.edges or self.new_edges)


class SqlStore:
    """The MemoryStore methods both backends share. A backend provides `dialect`, `_lock`,
    `_pending`, `_sql`, `_flush`, `_vector` and the methods it does its own way."""

    dialect: Dialect
    _pending: Pending | None
    _depth: int  # open transaction blocks: 0 outside any

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run one statement (? placeholders) after writing what is held; its rows."""
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def _vector(self, embedding: np.ndarray) -> Any:
        """The embedding as the backend binds it."""
        raise NotImplementedError

    # -- transactions and held inserts ------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all; nested blocks join the outer one.
        The backend begins (_begin: a failure leaves no transaction open), commits and rolls
        back in its own way."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._begin()
            self._depth = 1
            try:
                self._in_transaction()
                yield
                self._before_commit()
            except BaseException:
                self._depth = 0
                if self._pending is not None:
                    self._pending = Pending()
                self._rollback()
                raise
            self._depth = 0
            self._commit()

    def _in_transaction(self) -> None:
        """What the backend writes first in each transaction it opens (DuckDB: held recall counts)."""

    def _begin(self) -> None:
        raise NotImplementedError

    def _before_commit(self) -> None:
        raise NotImplementedError

    def _commit(self) -> None:
        raise NotImplementedError

    def _rollback(self) -> None:
        raise NotImplementedError

    @contextmanager
    def buffered(self) -> Iterator[None]:
        """Hold back inserts of memories, events and edges and send each table's together: a
        statement (or a round trip) per row dominated bulk stores. Any other statement flushes
        first, so every read and update sees the held rows."""
        with self._lock:
            if self._pending is not None:
                yield
                return
            self._pending = Pending()
            try:
                yield
                self._flush()
            finally:
                self._pending = None

    def _add(self, put: Any) -> None:
        """Queue rows in the open buffer, or write them at once when none is open."""
        with self._lock, self.buffered():
            put(self._pending)

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        r = self._sql("SELECT value FROM meta WHERE key = ?", [key])
        return r[0][0] if r else None

    def set_meta(self, key: str, value: str) -> None:
        self._sql("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                  [key, value])

    def meta_items(self) -> dict[str, str]:
        return dict(self._sql(f"SELECT key, value FROM meta ORDER BY key{self.dialect.collate}"))

    def schema_version(self) -> int:
        return int(self._sql("SELECT max(version) FROM schema_version")[0][0])

    # -- memories ------------------------------------------------------------
    def update_memory(self, memory_id: str, embedding: np.ndarray | None = None, **fields: Any) -> None:
        values = memory_field_values(fields)
        sets, params = [f"{k} = ?" for k, _ in values], [v for _, v in values]
        if embedding is not None:
            sets.append("embedding = ?")
            params.append(self._vector(embedding))
        if sets:
            self._sql(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", params + [memory_id])

    def _iter_rows(self, where: str, params: Sequence[Any], batch: int) -> Iterable[tuple[Memory, bytes | None]]:
        """Memory rows matching `where` with their embeddings' bytes, oldest first, `batch` at a time."""
        raise NotImplementedError

    def iter_index_rows(self, batch: int = 5000) -> Iterable[tuple[Memory, bytes | None]]:
        return self._iter_rows("status <> 'deleted'", [], batch)

    def iter_memory_rows(self, user_id: str | None = None, batch: int = 2000
                         ) -> Iterable[tuple[Memory, bytes | None]]:
        where, params = _of_user(user_id)
        return self._iter_rows(where, params, batch)

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.get_memories([memory_id]).get(memory_id)

    def _memories_where(self, where: str, params: Sequence[Any] = (), order: str = "created_at, id",
                        limit: int | None = None) -> list[Memory]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._sql(f"SELECT {MEM_SELECT} FROM memories WHERE {where} ORDER BY {order}{tail}", params)
        return [row_to_memory(r) for r in rows]

    def task_memories(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where("task_id = ? AND user_id = ? AND status <> 'deleted'", [task_id, user_id])

    def task_handoffs(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = ? AND task_id = ? AND memory_type = 'handoff' AND status <> 'deleted'", [user_id, task_id])

    def latest_handoff(self, user_id: str, task_id: str | None = None,
                       tags: Sequence[str] | None = None) -> Memory | None:
        where, params = "user_id = ? AND memory_type = 'handoff' AND status = 'active'", [user_id]
        if task_id is not None:
            where += " AND task_id = ?"
            params.append(task_id)
        rows = self._memories_where(where, params, order="created_at DESC, id DESC")
        if tags:  # few handoffs per user: filtered here, as recall filters tags
            rows = [m for m in rows if set(tags) & set(m.tags)]
        return rows[0] if rows else None

    def last_session_progress(self, session_id: str) -> Memory | None:
        rows = self._memories_where(
            "session_id = ? AND memory_type = 'progress' AND status <> 'deleted'", [session_id],
            order="created_at DESC, id DESC", limit=1)
        return rows[0] if rows else None

    def active_failures_tagged(self, user_id: str, tag: str, scope: Scope = EVERY_PROJECT) -> list[Memory]:
        where, params = project_filter(scope)
        return self._memories_where(
            f"user_id = ? AND memory_type = 'failure' AND status = 'active' AND "
            f"{self.dialect.holds.format(col='tags')} AND {where}",
            [user_id, tag, *params], order="created_at DESC")

    def active_failures_of_task(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = ? AND memory_type = 'failure' AND status = 'active' AND task_id = ?",
            [user_id, task_id], order="created_at DESC")

    def active_failure_tags(self, user_id: str, prefix: str, scope: Scope = EVERY_PROJECT) -> list[str]:
        where, params = project_filter(scope)
        rows = self._sql(
            "SELECT DISTINCT t FROM (SELECT unnest(tags) AS t FROM memories WHERE user_id = ? "
            f"AND memory_type = 'failure' AND status = 'active' AND {where}) s WHERE starts_with(t, ?)",
            [user_id, *params, prefix])
        return [r[0] for r in rows]

    def delete_memories(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        d = self.dialect
        with self.transaction():
            # Deleted rows' bytes stay on disk until the database is rewritten: the next
            # maintenance run compacts while this flag is set (see compact()).
            self.set_meta(ERASURE_PENDING, "1")
            self._sql(f"DELETE FROM edges WHERE {d.one_of.format(col='src')} OR {d.one_of.format(col='dst')}",
                      [list(ids), list(ids)])
            self._sql(f"DELETE FROM memory_events WHERE {d.one_of.format(col='memory_id')}", [list(ids)])
            where, params = d.key_in("id", ids)
            self._sql(f"DELETE FROM memories WHERE {where}", params)

    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None:
        self._add(lambda p: p.events.append([memory_id, ts(now), action, json.dumps(detail) if detail else None]))

    def events(self, memory_id: str) -> list[dict]:
        rows = self._sql("SELECT happened_at, action, detail FROM memory_events "
                         "WHERE memory_id = ? ORDER BY happened_at", [memory_id])
        return [event_dict(*r) for r in rows]

    def count(self, table: str) -> int:
        """Rows in one of the tables, of any status and user."""
        if table not in TABLES:
            raise KeyError(table)
        return self.count_where(table)

    def count_live_memories(self) -> int:
        return self.count_where("memories", "status <> 'deleted'")

    def count_where(self, table: str, where: str = "true", params: Sequence[Any] = ()) -> int:
        """Rows matching a condition (? placeholders): for tests and benchmarks that check the
        database itself. Not in MemoryStore: the engine asks for what it needs by name."""
        return int(self._sql(f"SELECT count(*) FROM {table} WHERE {where}", params)[0][0])

    # -- edges ---------------------------------------------------------------
    def add_edges(self, user_id: str, edges: Sequence[tuple[str, str, float]], new_source: bool = False) -> None:
        """Insert or replace edges; new_source: every edge starts at a memory inserted just now."""
        if not edges:
            return

        def put(p: Pending) -> None:
            into = p.new_edges if new_source else p.edges
            for src, dst, w in edges:  # a later weight for the same pair wins, as with one INSERT each
                into[(src, dst)] = [src, dst, float(w), user_id]
        self._add(put)

    def delete_edges_of(self, ids: Sequence[str]) -> None:
        if ids:
            d = self.dialect
            self._sql(f"DELETE FROM edges WHERE {d.one_of.format(col='src')} OR {d.one_of.format(col='dst')}",
                      [list(ids), list(ids)])

    def all_edges(self) -> list[tuple[str, str, float, str]]:
        return self._sql("SELECT src, dst, weight, user_id FROM edges")

    # -- tasks ---------------------------------------------------------------
    def insert_task(self, t: Task) -> None:
        self._sql(f"INSERT INTO tasks ({', '.join(TASK_COLUMNS)}) VALUES ({', '.join('?' * len(TASK_COLUMNS))})",
                  task_values(t))

    def update_task(self, task_id: str, now: datetime, **fields: Any) -> None:
        sets, params = ["updated_at = ?"], [ts(now)]
        for k, v in fields.items():
            if k not in ("name", "goal", "status", "metadata"):
                raise KeyError(k)
            sets.append(f"{k} = ?")
            params.append(json.dumps(v) if k == "metadata" else v)
        self._sql(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", params + [task_id])

    def get_task(self, task_id: str) -> Task | None:
        r = self._sql(f"{_TASK_SELECT} WHERE id = ?", [task_id])
        return row_to_task(r[0]) if r else None

    def list_tasks(self, user_id: str, status: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Task]:
        scoped, params = project_filter(scope)
        where, params = f"user_id = ? AND {scoped}", [user_id, *params]
        if status:
            where += " AND status = ?"
            params.append(status)
        return [row_to_task(r) for r in self._sql(f"{_TASK_SELECT} WHERE {where} ORDER BY updated_at DESC", params)]

    def task_last_activity(self, user_id: str) -> dict[str, tuple[datetime, str, str]]:
        # Ties on the time (a batch, a virtual clock) go to the later id: ids sort in write order.
        rows = self._sql(
            "SELECT task_id, created_at, memory_type, content FROM ("
            "SELECT task_id, created_at, memory_type, content, row_number() OVER "
            "(PARTITION BY task_id ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE user_id = ? AND task_id IS NOT NULL AND status <> 'deleted') ranked WHERE k = 1",
            [user_id])
        return {r[0]: (aware(r[1]), r[2], r[3]) for r in rows}

    def task_sessions(self, task_id: str, status: str) -> list[Session]:
        return self._sessions_where("task_id = ? AND status = ?", [task_id, status], "started_at, id")

    def open_task_ids(self) -> set[str]:
        return {r[0] for r in self._sql("SELECT id FROM tasks WHERE status NOT IN ('done', 'abandoned')")}

    def all_tasks(self, user_id: str | None = None) -> list[Task]:
        where, params = _of_user(user_id)
        return [row_to_task(r) for r in self._sql(f"{_TASK_SELECT} WHERE {where} ORDER BY created_at, id", params)]

    # -- sessions ------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        r = self._sql(f"{_SESSION_SELECT} WHERE id = ?", [session_id])
        return row_to_session(r[0]) if r else None

    def upsert_session(self, s: Session) -> None:
        self._sql(f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES "
                  f"({', '.join('?' * len(SESSION_COLUMNS))}) ON CONFLICT (id) DO UPDATE SET "
                  + ", ".join(f"{c} = excluded.{c}" for c in SESSION_COLUMNS[1:]), session_values(s))

    def update_session(self, session_id: str, **fields: Any) -> None:
        values = session_field_values(fields)
        if values:
            self._sql(f"UPDATE sessions SET {', '.join(f'{k} = ?' for k, _ in values)} WHERE id = ?",
                      [v for _, v in values] + [session_id])

    def _sessions_where(self, where: str, params: Sequence[Any] = (), order: str = "started_at") -> list[Session]:
        return [row_to_session(r) for r in self._sql(f"{_SESSION_SELECT} WHERE {where} ORDER BY {order}", params)]

    def user_sessions(self, user_id: str) -> list[Session]:
        return self._sessions_where("user_id = ?", [user_id])

    def sessions_of_task(self, user_id: str, task_id: str) -> list[Session]:
        return self._sessions_where(
            "user_id = ? AND (task_id = ? OR id IN (SELECT DISTINCT session_id FROM memories "
            "WHERE task_id = ? AND user_id = ? AND session_id IS NOT NULL))",
            [user_id, task_id, task_id, user_id])

    def stale_sessions(self, before: datetime) -> list[Session]:
        return self._sessions_where("status = 'active' AND last_heartbeat < ?", [ts(before)])

    def unreported_interruptions(self, user_id: str, stale_before: datetime,
                                 exclude: str | None = None, scope: Scope = EVERY_PROJECT) -> list[Session]:
        """Interrupted sessions, and active ones silent since `stale_before` (as good as
        interrupted), not reported yet, but `exclude`."""
        where, params = project_filter(scope)
        return self._sessions_where(
            "NOT reported AND user_id = ? AND id <> ? AND (status = 'interrupted' OR "
            f"(status = 'active' AND last_heartbeat < ?)) AND {where}",
            [user_id, exclude or "", ts(stale_before), *params])

    def projects(self, user_id: str) -> list[tuple[str, int, int]]:
        rows = self._sql(
            "SELECT project, sum(m), sum(t) FROM (SELECT project, 1 AS m, 0 AS t FROM memories "
            "WHERE user_id = ? AND project IS NOT NULL AND status <> 'deleted' UNION ALL "
            "SELECT project, 0, 1 FROM tasks WHERE user_id = ? AND project IS NOT NULL) u "
            "GROUP BY project ORDER BY project", [user_id, user_id])
        return [(r[0], int(r[1]), int(r[2])) for r in rows]

    def add_session_outcome(self, session_id: str, outcome: str, notes: str) -> None:
        col = {"success": "successes", "failure": "failures"}[outcome]
        self._sql(f"UPDATE sessions SET {col} = coalesce({col}, 0) + 1, outcome = ?, "
                  "outcome_notes = ? WHERE id = ?", [outcome, notes, session_id])

    def session_outcomes(self) -> dict[str, tuple[int, int]]:
        rows = self._sql("SELECT id, coalesce(successes, 0), coalesce(failures, 0) FROM sessions "
                         "WHERE coalesce(successes, 0) + coalesce(failures, 0) > 0")
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def sessions_with_counts(self, user_id: str | None = None) -> list[tuple[Session, int, int]]:
        where, params = _of_user(user_id)
        rows = self._sql(f"SELECT {', '.join(SESSION_COLUMNS)}, coalesce(successes, 0), "
                         f"coalesce(failures, 0) FROM sessions WHERE {where} ORDER BY started_at, id", params)
        return [(row_to_session(r[:-2]), int(r[-2]), int(r[-1])) for r in rows]

    # -- maintenance and stats -------------------------------------------------
    def latest_handoff_ids(self) -> set[str]:
        rows = self._sql(
            "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY user_id, task_id "
            "ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE memory_type = 'handoff' AND status = 'active') ranked WHERE k = 1")
        return {r[0] for r in rows}

    def retired_memories(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None, datetime | None]]:
        rows = self._sql("SELECT id, status, superseded_by, valid_to FROM memories "
                         f"WHERE {self.dialect.one_of.format(col='status')}", [list(statuses)])
        return [(r[0], r[1], r[2], aware(r[3])) for r in rows]

    def existing_ids(self, table: str, ids: Sequence[str]) -> set[str]:
        if table not in ("memories", "tasks", "sessions") or not ids:
            return set()
        return {r[0] for r in self._sql(f"SELECT id FROM {table} WHERE {self.dialect.one_of.format(col='id')}",
                                        [list(ids)])}

    def memory_counts(self, user_id: str | None = None) -> list[tuple[str, str, str, int]]:
        where, params = _of_user(user_id)
        c = self.dialect.collate
        return [(r[0], r[1], r[2], int(r[3])) for r in self._sql(
            f"SELECT user_id, memory_type, status, count(*) FROM memories WHERE {where} "
            f"GROUP BY 1, 2, 3 ORDER BY user_id{c}, memory_type{c}, status{c}, 4", params)]

    def status_counts(self, table: str, user_id: str | None = None) -> dict[str, int]:
        if table not in ("tasks", "sessions"):
            raise KeyError(table)
        where, params = _of_user(user_id)
        return {r[0]: int(r[1]) for r in self._sql(
            f"SELECT status, count(*) FROM {table} WHERE {where} GROUP BY status", params)}

    def erasure_pending(self) -> bool:
        """True when deleted rows may still have bytes on disk (compact() clears it)."""
        return self.get_meta(ERASURE_PENDING) is not None

    # -- export and import -----------------------------------------------------
    def table_counts(self, user_id: str | None = None) -> dict[str, int]:
        """Rows per exported table (memory_events counted through their memory's user)."""
        where, params = _of_user(user_id)
        out = {t: self.count_where(t, where, params) for t in ("memories", "tasks", "sessions", "edges")}
        where, params = _of_user(user_id, "m.user_id")
        out["memory_events"] = int(self._sql(
            f"SELECT count(*) FROM memory_events e JOIN memories m ON m.id = e.memory_id WHERE {where}",
            params)[0][0])
        return out

    def events_by_memory(self, user_id: str | None = None) -> dict[str, list[dict]]:
        where, params = _of_user(user_id, "m.user_id")
        rows = self._sql(
            "SELECT e.memory_id, e.happened_at, e.action, e.detail FROM memory_events e "
            f"JOIN memories m ON m.id = e.memory_id WHERE {where} "
            f"ORDER BY e.memory_id{self.dialect.collate}, e.happened_at", params)
        out: dict[str, list[dict]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(event_dict(*r[1:]))
        return out

    def user_edges(self, user_id: str | None = None) -> list[tuple[str, str, float, str]]:
        where, params = _of_user(user_id)
        c = self.dialect.collate
        return self._sql(f"SELECT src, dst, weight, user_id FROM edges WHERE {where} ORDER BY src{c}, dst{c}",
                         params)

    # -- per-user keys ---------------------------------------------------------
    def insert_key(self, key_id: str, user_id: str, key_hash: str, label: str | None, now: datetime) -> None:
        self._sql("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, NULL)", [key_id, user_id, key_hash, label, ts(now)])

    def key_user(self, key_hash: str) -> str | None:
        r = self._sql("SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", [key_hash])
        return r[0][0] if r else None

    def list_keys(self, user_id: str | None) -> list[dict]:
        where, params = _of_user(user_id)
        rows = self._sql(f"SELECT {', '.join(KEY_COLUMNS)} FROM api_keys WHERE {where} ORDER BY created_at, id",
                         params)
        return [row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str, now: datetime) -> bool:
        return bool(self._sql("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
                              [ts(now), key_id]))

    def keys_in_use(self) -> bool:
        return bool(self._sql("SELECT EXISTS (SELECT 1 FROM api_keys)")[0][0])

    # -- task claims (engram/claims.py) ------------------------------------------
    # Exactly one session holds a task: the primary key on task_id refuses a second insert, and
    # a take-over is an update conditional on the holder the caller read, so of two sessions
    # racing for one task one wins and the other finds no row changed (Claims retries it).
    def get_claim(self, task_id: str) -> Claim | None:
        rows = self._sql(f"{_CLAIM_SELECT} WHERE c.task_id = ?", [task_id])
        return row_to_claim(rows[0]) if rows else None

    def task_claims(self, user_id: str) -> dict[str, Claim]:
        return {r[0]: row_to_claim(r) for r in self._sql(f"{_CLAIM_SELECT} WHERE c.user_id = ?", [user_id])}

    def insert_claim(self, task_id: str, user_id: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(self._sql(
            "INSERT INTO claims VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING RETURNING task_id",
            [task_id, user_id, session_id, client, ts(now)]))

    def swap_claim(self, task_id: str, holder: str, session_id: str, client: str, now: datetime) -> bool:
        return bool(self._sql(
            "UPDATE claims SET session_id = ?, client = ?, claimed_at = ? WHERE task_id = ? AND session_id = ? "
            "RETURNING task_id", [session_id, client, ts(now), task_id, holder]))

    def delete_claim(self, task_id: str, session_id: str | None = None) -> bool:
        if session_id is None:
            return bool(self._sql("DELETE FROM claims WHERE task_id = ? RETURNING task_id", [task_id]))
        return bool(self._sql("DELETE FROM claims WHERE task_id = ? AND session_id = ? RETURNING task_id",
                              [task_id, session_id]))

    def delete_session_claims(self, session_id: str) -> list[str]:
        return [r[0] for r in self._sql("DELETE FROM claims WHERE session_id = ? RETURNING task_id", [session_id])]

    def add_claim_notice(self, session_id: str, task_id: str, by_session: str, by_client: str,
                         now: datetime) -> None:
        self._sql("INSERT INTO claim_notices VALUES (?, ?, ?, ?, ?)",
                  [session_id, task_id, by_session, by_client, ts(now)])

    def take_claim_notices(self, session_id: str) -> list[dict]:
        # Read first: every call asks, and a DELETE that finds nothing still costs a write.
        if not self._sql("SELECT 1 FROM claim_notices WHERE session_id = ? LIMIT 1", [session_id]):
            return []
        rows = self._sql("DELETE FROM claim_notices WHERE session_id = ? "
                         "RETURNING task_id, by_session, by_client, happened_at", [session_id])
        return sorted(({"task_id": r[0], "by_session": r[1], "by_client": r[2] or "", "at": aware(r[3])}
                       for r in rows), key=lambda n: n["at"])
