"""The SQL both backends run alike, written once: SqlStore, the base of Store (db.py, DuckDB) and
PgStore (pg.py, PostgreSQL).

Every statement here (and in sql_tasks.py, the tasks, sessions and claims) is written with `?`
placeholders and runs through the backend's `_sql(sql, params)`, which writes held rows first and
returns the rows. What the two dialects spell differently is in one Dialect per backend
(dialect.py). What a backend does its own way stays in its file: connecting and its errors, the
steps of a transaction (begin, commit, roll back), bulk inserts, reading memories (DuckDB holds
recall counts, PostgreSQL locks rows), the change feed and leases, backup and compaction.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from engram.core.types import EVERY_PROJECT, Memory, Scope
from engram.store.dialect import Dialect, Pending, of_user, project_filter
from engram.store.rows import (
    KEY_COLUMNS,
    MEM_SELECT,
    TABLES,
    aware,
    event_dict,
    memory_field_values,
    row_to_key,
    row_to_memory,
    ts,
)
from engram.store.sql_tasks import TaskRows

ERASURE_PENDING = "erasure_pending"  # meta key: rows were deleted since the file was last rewritten


class SqlStore(TaskRows):
    """The MemoryStore methods both backends share (those of tasks, sessions and claims in
    TaskRows). A backend provides `dialect`, `_lock`, `_pending`, `_depth`, `_sql`, `_send`,
    `_vector`, the transaction steps and the methods it does its own way."""

    dialect: Dialect
    _lock: threading.RLock  # one statement or transaction of this store at a time
    _pending: Pending | None
    _depth: int  # open transaction blocks: 0 outside any

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run one statement (? placeholders) after writing what is held; its rows."""
        raise NotImplementedError

    def _flush(self) -> None:
        """Write the held rows, if any; an open buffer stays open, empty."""
        p = self._pending
        if not p:
            return
        self._pending = Pending()
        self._send(p)

    def _send(self, p: Pending) -> None:
        """Insert the held rows, each table's in as few statements as the backend can."""
        raise NotImplementedError

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories with these ids, by id (each backend reads a list of ids its own way)."""
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
        self._sql("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [key, value])

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
        if not sets:
            return
        with self.transaction():
            self._sql(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", params + [memory_id])
            if "content" in fields:
                # Derived from the old text (which a scrub may be removing): computed again.
                self._sql("DELETE FROM token_vectors WHERE memory_id = ?", [memory_id])

    def _iter_rows(self, where: str, params: Sequence[Any], batch: int) -> Iterable[tuple[Memory, bytes | None]]:
        """Memory rows matching `where` with their embeddings' bytes, oldest first, `batch` at a time."""
        raise NotImplementedError

    def iter_index_rows(self, batch: int = 5000) -> Iterable[tuple[Memory, bytes | None]]:
        return self._iter_rows("status <> 'deleted'", [], batch)

    def iter_memory_rows(self, user_id: str | None = None, batch: int = 2000) -> Iterable[tuple[Memory, bytes | None]]:
        where, params = of_user(user_id)
        return self._iter_rows(where, params, batch)

    def get_memory(self, memory_id: str) -> Memory | None:
        return self.get_memories([memory_id]).get(memory_id)

    def _memories_where(
        self, where: str, params: Sequence[Any] = (), order: str = "created_at, id", limit: int | None = None
    ) -> list[Memory]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._sql(f"SELECT {MEM_SELECT} FROM memories WHERE {where} ORDER BY {order}{tail}", params)
        return [row_to_memory(r) for r in rows]

    def task_memories(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where("task_id = ? AND user_id = ? AND status <> 'deleted'", [task_id, user_id])

    def task_handoffs(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = ? AND task_id = ? AND memory_type = 'handoff' AND status <> 'deleted'", [user_id, task_id]
        )

    def latest_handoff(
        self,
        user_id: str,
        task_id: str | None = None,
        tags: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> Memory | None:
        where = "user_id = ? AND memory_type = 'handoff' AND status = 'active'"
        params: list[Any] = [user_id]
        if now is not None:  # an expired handoff is never returned (docs/lifecycle.md)
            where += " AND (expires_at IS NULL OR expires_at > ?)"
            params.append(ts(now))
        if task_id is not None:
            where += " AND task_id = ?"
            params.append(task_id)
        rows = self._memories_where(where, params, order="created_at DESC, id DESC")
        if tags:  # few handoffs per user: filtered here, as recall filters tags
            rows = [m for m in rows if set(tags) & set(m.tags)]
        return rows[0] if rows else None

    def last_session_progress(self, session_id: str) -> Memory | None:
        rows = self._memories_where(
            "session_id = ? AND memory_type = 'progress' AND status <> 'deleted'",
            [session_id],
            order="created_at DESC, id DESC",
            limit=1,
        )
        return rows[0] if rows else None

    def active_failures_tagged(self, user_id: str, tag: str, scope: Scope = EVERY_PROJECT) -> list[Memory]:
        where, params = project_filter(scope)
        return self._memories_where(
            f"user_id = ? AND memory_type = 'failure' AND status = 'active' AND "
            f"{self.dialect.holds.format(col='tags')} AND {where}",
            [user_id, tag, *params],
            order="created_at DESC",
        )

    def active_failures_of_task(self, user_id: str, task_id: str) -> list[Memory]:
        return self._memories_where(
            "user_id = ? AND memory_type = 'failure' AND status = 'active' AND task_id = ?",
            [user_id, task_id],
            order="created_at DESC",
        )

    def active_failure_tags(self, user_id: str, prefix: str, scope: Scope = EVERY_PROJECT) -> list[str]:
        where, params = project_filter(scope)
        rows = self._sql(
            "SELECT DISTINCT t FROM (SELECT unnest(tags) AS t FROM memories WHERE user_id = ? "
            f"AND memory_type = 'failure' AND status = 'active' AND {where}) s WHERE starts_with(t, ?)",
            [user_id, *params, prefix],
        )
        return [r[0] for r in rows]

    def delete_memories(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        d = self.dialect
        with self.transaction():
            # Deleted rows' bytes stay on disk until the database is rewritten: the next
            # maintenance run compacts while this flag is set (see compact()).
            self.set_meta(ERASURE_PENDING, "1")
            self._sql(
                f"DELETE FROM edges WHERE {d.one_of.format(col='src')} OR {d.one_of.format(col='dst')}",
                [list(ids), list(ids)],
            )
            self._sql(f"DELETE FROM memory_events WHERE {d.one_of.format(col='memory_id')}", [list(ids)])
            self._sql(f"DELETE FROM token_vectors WHERE {d.one_of.format(col='memory_id')}", [list(ids)])
            where, params = d.key_in("id", ids)
            self._sql(f"DELETE FROM memories WHERE {where}", params)

    # -- token vectors (late interaction; derived, like the embedding) ----------
    def put_token_vectors(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """Keep (memory_id, text_hash, vectors) rows, replacing a memory's earlier ones."""
        with self.transaction():
            for mid, text_hash, blob in rows:
                self._sql(
                    "INSERT INTO token_vectors VALUES (?, ?, ?) ON CONFLICT (memory_id) DO UPDATE "
                    "SET text_hash = excluded.text_hash, vectors = excluded.vectors",
                    [mid, text_hash, blob],
                )

    def token_hashes(self) -> dict[str, str]:
        """The text hash of every kept row, by memory id (without the vectors)."""
        return dict(self._sql("SELECT memory_id, text_hash FROM token_vectors"))

    def token_vectors(self, ids: Sequence[str] | None = None) -> list[tuple[str, str, bytes]]:
        """The kept (memory_id, text_hash, vectors) rows: every one, or those of `ids`."""
        if ids is None:
            rows = self._sql("SELECT memory_id, text_hash, vectors FROM token_vectors")
            return [(m, h, bytes(b)) for m, h, b in rows]
        if not ids:
            return []
        where, params = self.dialect.key_in("memory_id", ids)
        return [
            (m, h, bytes(b))
            for m, h, b in self._sql(f"SELECT memory_id, text_hash, vectors FROM token_vectors WHERE {where}", params)
        ]

    def add_event(self, memory_id: str, now: datetime, action: str, detail: dict | None = None) -> None:
        self._add(lambda p: p.events.append([memory_id, ts(now), action, json.dumps(detail) if detail else None]))

    def set_event_detail(self, memory_id: str, at: datetime, action: str, detail: dict | None) -> None:
        self._sql(
            "UPDATE memory_events SET detail = ? WHERE memory_id = ? AND happened_at = ? AND action = ?",
            [json.dumps(detail) if detail else None, memory_id, ts(at), action],
        )

    def events(self, memory_id: str) -> list[dict]:
        rows = self._sql(
            "SELECT happened_at, action, detail FROM memory_events WHERE memory_id = ? ORDER BY happened_at",
            [memory_id],
        )
        return [event_dict(*r) for r in rows]

    def count(self, table: str) -> int:
        """Rows in one of the tables, of any status and user."""
        if table not in TABLES:
            raise KeyError(table)
        return self.count_where(table)

    def count_live_memories(self) -> int:
        return self.count_where("memories", "status <> 'deleted'")

    def orphan_counts(self) -> dict[str, int]:
        gone = "NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = {col})"
        return {
            "edges": self.count_where("edges", f"{gone.format(col='src')} OR {gone.format(col='dst')}"),
            "history": self.count_where("memory_events", gone.format(col="memory_id")),
            "token vectors": self.count_where("token_vectors", gone.format(col="memory_id")),
        }

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
            self._sql(
                f"DELETE FROM edges WHERE {d.one_of.format(col='src')} OR {d.one_of.format(col='dst')}",
                [list(ids), list(ids)],
            )

    def delete_edges(self, pairs: Sequence[tuple[str, str]]) -> None:
        with self.transaction():
            for src, dst in pairs:
                self._sql("DELETE FROM edges WHERE src = ? AND dst = ?", [src, dst])

    def edges_from(self, ids: Sequence[str]) -> list[tuple[str, str, float]]:
        if not ids:
            return []
        return self._sql(
            f"SELECT src, dst, weight FROM edges WHERE {self.dialect.one_of.format(col='src')}", [list(ids)]
        )

    def all_edges(self) -> list[tuple[str, str, float, str]]:
        return self._sql("SELECT src, dst, weight, user_id FROM edges")

    # -- maintenance and stats -------------------------------------------------
    def latest_handoff_ids(self) -> set[str]:
        rows = self._sql(
            "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY user_id, task_id "
            "ORDER BY created_at DESC, id DESC) AS k FROM memories "
            "WHERE memory_type = 'handoff' AND status = 'active') ranked WHERE k = 1"
        )
        return {r[0] for r in rows}

    def retired_memories(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None, datetime | None]]:
        rows = self._sql(
            "SELECT id, status, superseded_by, valid_to FROM memories "
            f"WHERE {self.dialect.one_of.format(col='status')}",
            [list(statuses)],
        )
        return [(r[0], r[1], r[2], aware(r[3])) for r in rows]

    def existing_ids(self, table: str, ids: Sequence[str]) -> set[str]:
        if table not in ("memories", "tasks", "sessions") or not ids:
            return set()
        return {
            r[0] for r in self._sql(f"SELECT id FROM {table} WHERE {self.dialect.one_of.format(col='id')}", [list(ids)])
        }

    def memory_counts(self, user_id: str | None = None) -> list[tuple[str, str, str, int]]:
        where, params = of_user(user_id)
        c = self.dialect.collate
        return [
            (r[0], r[1], r[2], int(r[3]))
            for r in self._sql(
                f"SELECT user_id, memory_type, status, count(*) FROM memories WHERE {where} "
                f"GROUP BY 1, 2, 3 ORDER BY user_id{c}, memory_type{c}, status{c}, 4",
                params,
            )
        ]

    def status_counts(self, table: str, user_id: str | None = None) -> dict[str, int]:
        if table not in ("tasks", "sessions"):
            raise KeyError(table)
        where, params = of_user(user_id)
        return {
            r[0]: int(r[1])
            for r in self._sql(f"SELECT status, count(*) FROM {table} WHERE {where} GROUP BY status", params)
        }

    def erasure_pending(self) -> bool:
        """True when deleted rows may still have bytes on disk (compact() clears it)."""
        return self.get_meta(ERASURE_PENDING) is not None

    # -- export and import -----------------------------------------------------
    def table_counts(self, user_id: str | None = None) -> dict[str, int]:
        """Rows per exported table (memory_events counted through their memory's user)."""
        where, params = of_user(user_id)
        out = {t: self.count_where(t, where, params) for t in ("memories", "tasks", "sessions", "edges")}
        where, params = of_user(user_id, "m.user_id")
        out["memory_events"] = int(
            self._sql(
                f"SELECT count(*) FROM memory_events e JOIN memories m ON m.id = e.memory_id WHERE {where}", params
            )[0][0]
        )
        return out

    def events_by_memory(self, user_id: str | None = None) -> dict[str, list[dict]]:
        where, params = of_user(user_id, "m.user_id")
        rows = self._sql(
            "SELECT e.memory_id, e.happened_at, e.action, e.detail FROM memory_events e "
            f"JOIN memories m ON m.id = e.memory_id WHERE {where} "
            f"ORDER BY e.memory_id{self.dialect.collate}, e.happened_at",
            params,
        )
        out: dict[str, list[dict]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(event_dict(*r[1:]))
        return out

    def user_edges(self, user_id: str | None = None) -> list[tuple[str, str, float, str]]:
        where, params = of_user(user_id)
        c = self.dialect.collate
        return self._sql(f"SELECT src, dst, weight, user_id FROM edges WHERE {where} ORDER BY src{c}, dst{c}", params)

    # -- per-user keys ---------------------------------------------------------
    def insert_key(self, key_id: str, user_id: str, key_hash: str, label: str | None, now: datetime) -> None:
        self._sql("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, NULL)", [key_id, user_id, key_hash, label, ts(now)])

    def key_user(self, key_hash: str) -> str | None:
        r = self._sql("SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", [key_hash])
        return r[0][0] if r else None

    def list_keys(self, user_id: str | None) -> list[dict]:
        where, params = of_user(user_id)
        rows = self._sql(f"SELECT {', '.join(KEY_COLUMNS)} FROM api_keys WHERE {where} ORDER BY created_at, id", params)
        return [row_to_key(r) for r in rows]

    def revoke_key(self, key_id: str, now: datetime) -> bool:
        return bool(
            self._sql(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id", [ts(now), key_id]
            )
        )

    def keys_in_use(self) -> bool:
        return bool(self._sql("SELECT EXISTS (SELECT 1 FROM api_keys)")[0][0])
