"""DuckDB access: transactions, bulk inserts, held recall counts, the file's backup and compaction.
The SQL both backends share is in sql.py; the connection that names a full disk or a damaged file,
and the checks of a file's integrity, in duckdb_file.py."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import duckdb
import numpy as np

# DuckDB's Python client tries `import pandas` several times per execute() to check
# parameter types; without pandas each failed import walks sys.path (~10 ms a call).
# Marking it absent makes the failure instant. Harmless where pandas is installed.
if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
    sys.modules["pandas"] = None  # type: ignore[assignment]

from engram.core.errors import DatabaseDamaged, DatabaseLocked, DiskFull
from engram.core.types import EngramError, Memory
from engram.store import schema as _schema
from engram.store.backup_files import copy_file, latest_backup
from engram.store.dialect import DUCKDB, Pending, Rows
from engram.store.duckdb_file import FileConnection, first_line, is_disk_full, missing_bytes
from engram.store.extensions import LOADED_BY_STORE, load_extensions
from engram.store.rows import MEM_SELECT, MEMORY_FIELDS, aware, memory_values, row_to_memory, ts
from engram.store.schema import SQL_TYPES, migrate
from engram.store.sql import ERASURE_PENDING, SqlStore

# Column types for bulk inserts (unnest of one list per column), embedding last.
_MEM_TYPES = tuple(SQL_TYPES["duckdb"][c.kind] for c in MEMORY_FIELDS) + ("BLOB",)
_MEM_INSERT = f"INSERT INTO memories ({MEM_SELECT}, embedding)"

# Recall counts are held and written together (see reinforce): with a write at least this many
# seconds after the first of them, or once this many memories have counts held.
RECALL_WRITE_DELAY_S = 1.0
RECALL_WRITE_MAX = 256


def _unnest(types: Sequence[str]) -> str:
    return ", ".join(f"unnest(?::{t}[])" for t in types)


def _columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows)]


class Store(SqlStore):
    """A DuckDB file (or :memory:) holding engram's canonical rows."""

    dialect = DUCKDB

    def __init__(self, path: str | Path, now: datetime):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = (
                duckdb.connect(self.path) if self.path == ":memory:" else FileConnection(self.path, self._runtime_error)
            )
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
        self._pending: Pending | None = None
        self._recalls: dict[str, tuple[int, datetime, float]] = {}  # id -> (n, at, stability): see reinforce()
        self._recalls_since = 0.0  # time.monotonic() of the oldest count held

    def _damaged(self, e: BaseException | str) -> EngramError:
        """The refusal of a file DuckDB cannot open or read; the file is left exactly as it is."""
        if self.path == ":memory:":
            return EngramError(f"cannot open an in-memory database: {e}")
        if is_disk_full(e):
            return DiskFull(
                f"cannot open {self.path}: the disk holding it is full ({first_line(e)}); "
                "free some space and try again. Nothing was changed"
            )
        newest = latest_backup(self.path)
        advice = (
            f"the newest backup is {newest}: `engram restore {newest}` puts it in place (the "
            "damaged file is kept aside)"
            if newest
            else f"no backup was found in {Path(self.path).parent / 'backups'}"
        )
        return DatabaseDamaged(
            f"cannot open the engram database {self.path}: {first_line(e)}. The file is damaged or "
            f"is not an engram database; engram left it untouched (it did not rename, move, truncate "
            f"or replace it). {advice[0].upper() + advice[1:]}."
        )

    def _runtime_error(self, e: Exception, fatal: bool = False) -> EngramError | None:
        """What a failed statement means to the user: a full disk, a damaged file, else None.

        fatal: a checkpoint failed (DuckDB's own at a commit, or engram's): the commit it followed
        is in the WAL, so the write that met it may be stored after all.
        """
        if is_disk_full(e):
            done = (
                "a checkpoint could not be written, so this write may or may not be stored (look before repeating it)"
                if fatal
                else "this write was not stored"
            )
            return DiskFull(
                f"the disk holding {self.path} is full: {done}. Reads keep working and "
                f"writes resume by themselves once space is freed ({first_line(e)})"
            )
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

    # -- transactions (SqlStore.transaction) ---------------------------------------
    def _begin(self) -> None:
        self._flush()  # rows held before the transaction are not its to roll back
        self.con.execute("BEGIN TRANSACTION")
        self._begun_with = self._recalls

    def _in_transaction(self) -> None:
        if self._recalls and (
            len(self._recalls) >= RECALL_WRITE_MAX or time.monotonic() - self._recalls_since >= RECALL_WRITE_DELAY_S
        ):
            self._flush_recalls()  # counted recalls ride on this commit

    def _before_commit(self) -> None:
        self._flush()

    def _commit(self) -> None:
        self.con.execute("COMMIT")

    def _rollback(self) -> None:
        self.con.execute("ROLLBACK")
        recalls = self._begun_with
        if recalls is not self._recalls:  # written in this transaction: not lost with it
            for mid, (n, at, stability) in recalls.items():
                self._count_recall(mid, n, at, stability)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Rows:
        # Fetch under the lock: the connection holds one pending result, and a thread that
        # fetched after releasing it could read the rows of another thread's query.
        with self._lock:
            self._write_held()
            return Rows(self.con.execute(sql, params or []).fetchall())

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.execute(sql, params).fetchall()

    def _vector(self, embedding: np.ndarray) -> bytes:
        return np.asarray(embedding, dtype=np.float32).tobytes()

    def _write_held(self) -> None:
        """Write the held rows and recall counts: every statement but a recall's own read runs after.

        Recall counts are what reads leave behind: on a full disk they stay held (and are written
        with a later statement once space is freed) rather than fail the read that follows them.
        """
        self._flush()
        with suppress(DiskFull):
            self._flush_recalls()

    def _send(self, p: Pending) -> None:
        if len(p.memories) == 1:  # one row binds faster as VALUES (about 1 ms)
            self.con.execute(f"{_MEM_INSERT} VALUES ({', '.join('?' * len(_MEM_TYPES))})", p.memories[0])
        elif p.memories:
            self.con.execute(f"{_MEM_INSERT} SELECT {_unnest(_MEM_TYPES)}", _columns(p.memories))
        if p.events:
            self.con.execute(
                "INSERT INTO memory_events SELECT " + _unnest(("VARCHAR", "TIMESTAMP", "VARCHAR", "VARCHAR")),
                _columns(p.events),
            )
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

    def hold_lock(self, name: str) -> None:
        # One process writes a DuckDB file, and its transactions hold the store's lock already.
        if not self._depth:
            raise RuntimeError("hold_lock must be called inside a transaction")

    # -- memories ------------------------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None:
        row = memory_values(m) + [None if embedding is None else self._vector(embedding)]
        self._add(lambda p: p.memories.append(row))

    def reinforce(
        self, ids: Sequence[str], now: datetime, grow: Callable[[Memory, datetime], float]
    ) -> dict[str, Memory]:
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
        return replace(m, recall_count=m.recall_count + n, last_recalled_at=aware(ts(at)), stability=stability)

    def _flush_recalls(self) -> None:
        if not self._recalls:
            return
        counted, self._recalls = self._recalls, {}
        since = self._recalls_since
        ids = list(counted)
        try:
            self._update_recalls(ids, counted)
        except DiskFull:
            if not self._depth:  # in a transaction, its rollback holds them again (_rollback)
                for mid, (n, at, stability) in counted.items():
                    self._count_recall(mid, n, at, stability)
                self._recalls_since = since
            raise

    def _update_recalls(self, ids: list[str], counted: dict[str, tuple[int, datetime, float]]) -> None:
        self.con.execute(
            "UPDATE memories SET recall_count = recall_count + c.n, last_recalled_at = c.at, "
            "stability = c.s FROM (SELECT unnest(?::VARCHAR[]) AS id, unnest(?::INTEGER[]) AS n, "
            "unnest(?::TIMESTAMP[]) AS at, unnest(?::DOUBLE[]) AS s) c WHERE memories.id = c.id",
            [ids, [counted[i][0] for i in ids], [ts(counted[i][1]) for i in ids], [counted[i][2] for i in ids]],
        )

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        with self._lock:
            self._flush()
            return {m.id: self._counted(m) for m in self._read_memories(ids)}

    def _read_memories(self, ids: Sequence[str]) -> list[Memory]:
        """The rows of these ids as they are in the table (the caller decides what is written first)."""
        if not ids:
            return []
        where, params = DUCKDB.key_in("id", ids)
        rows = self.con.execute(f"SELECT {MEM_SELECT} FROM memories WHERE {where}", params).fetchall()
        return [row_to_memory(r) for r in rows]

    def _iter_rows(self, where: str, params: Sequence[Any], batch: int) -> Iterable[tuple[Memory, bytes | None]]:
        """Memory rows with their embeddings, oldest first, from a cursor of their own."""
        with self._lock:
            self._write_held()
            cur = self.con.cursor()
        try:
            cur.execute(f"SELECT {MEM_SELECT}, embedding FROM memories WHERE {where} ORDER BY created_at, id", params)
            while rows := cur.fetchmany(batch):
                for r in rows:
                    yield row_to_memory(r[:-1]), r[-1]
        finally:
            cur.close()

    def index_rows(self, ids: Sequence[str]) -> list[tuple[Memory, bytes | None]]:
        out: list[tuple[Memory, bytes | None]] = []
        with self._lock:
            self._flush()
            for i in range(0, len(ids), 1000):
                part = list(ids[i : i + 1000])
                where, params = DUCKDB.key_in("id", part)
                rows = self.con.execute(
                    f"SELECT {MEM_SELECT}, embedding FROM memories WHERE {where} AND status <> 'deleted'", params
                ).fetchall()
                out += [(self._counted(row_to_memory(r[:-1])), r[-1]) for r in rows]
        return out

    # -- the file ----------------------------------------------------------------
    def file_size(self) -> int | None:
        """Bytes on disk: the database file plus its write-ahead log (None in memory)."""
        if self.path == ":memory:":
            return None
        return sum(p.stat().st_size for p in (Path(self.path), Path(self.path + ".wal")) if p.exists())

    def flush_wal(self) -> None:
        """Fold the write-ahead log into the file (DuckDB's CHECKPOINT): the file alone then holds
        every committed write."""
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
            db = _schema.one(self.con, "SELECT current_database()")
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
            self.con = FileConnection(self.path, self._runtime_error)
            load_extensions(self.con.raw, LOADED_BY_STORE)
            self.con.execute("DELETE FROM meta WHERE key = ?", [ERASURE_PENDING])
            return True
