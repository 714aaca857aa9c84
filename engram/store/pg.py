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

import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from engram.core.errors import DatabaseUnavailable
from engram.core.types import EngramError, Memory
from engram.store.dialect import POSTGRES, Pending, Rows
from engram.store.rows import MEM_SELECT, MEMORY_COLUMNS, aware, memory_values, row_to_memory, ts
from engram.store.schema import PG_MIGRATIONS, schema_too_new
from engram.store.sql import ERASURE_PENDING, SqlStore

try:
    import psycopg
    from pgvector.psycopg import register_vector
except ImportError:  # the optional `postgres` extra
    psycopg = None  # type: ignore[assignment]

_MEM_INSERT = f"INSERT INTO memories ({MEM_SELECT}, embedding) VALUES ({', '.join(['%s'] * len(MEMORY_COLUMNS))}, %b)"
_EDGE_UPSERT = (
    "INSERT INTO edges (src, dst, weight, user_id) VALUES (%s, %s, %s, %s) ON CONFLICT (src, dst) "
    "DO UPDATE SET weight = excluded.weight, user_id = excluded.user_id"
)
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
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"], safe="/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _marks(sql: str) -> str:
    """SQL written with ? placeholders (sql.py) in psycopg's: %s, and a literal % doubled."""
    return sql.replace("%", "%%").replace("?", "%s")


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
            f"{shown}: PostgreSQL support is not installed; run: pip install 'engram-recall[postgres]'"
        )
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


def _lost(con: Any, e: psycopg.Error) -> bool:
    """Whether an OperationalError means the connection is gone. The server's own word for it
    (class 57P: shutting down, crashed, cannot connect now; class 08: connection failure) can
    arrive before the client has seen the socket close, while the connection still looks open."""
    return con.broken or (e.sqlstate or "").startswith(("57P", "08"))


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
    applied: list[int] = []
    while True:
        with con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version integer PRIMARY KEY, description text, applied_at timestamp)"
            )
            have = current_version(con)
            if have > latest:
                raise schema_too_new(have, latest)
            if have >= target:
                return applied
            description, statements = PG_MIGRATIONS[have]
            for sql in statements:
                con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (%s, %s, %s)", [have + 1, description, ts(now)])
        applied.append(have + 1)


class PgStore(SqlStore):
    """A PostgreSQL database holding engram's canonical rows; any number of servers may share it."""

    dialect = POSTGRES

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
        self._pending: Pending | None = None
        self._pruned_at = 0.0

    def close(self) -> None:
        with self._lock:
            if not self.con.broken:  # a lost connection: nothing to send, and no reconnecting to close
                with suppress(psycopg.Error):
                    super()._flush()  # not through _connection: no reconnecting to close
            self.con.close()

    # -- transactions (SqlStore.transaction) ---------------------------------------
    def _begin(self) -> None:
        with self._connection():
            self._flush()  # rows held before the transaction are not its to roll back
            self.con.execute("BEGIN")

    def _before_commit(self) -> None:
        with self._connection():
            self._flush()

    def _commit(self) -> None:
        with self._connection():
            self.con.execute("COMMIT")

    def _rollback(self) -> None:
        if self.con.broken:  # a lost connection rolled back with it
            return
        # The server going away mid-transaction fails the ROLLBACK too: the error that ended the
        # transaction is the one to report, and the next call finds the connection lost.
        with suppress(psycopg.OperationalError):
            self.con.execute("ROLLBACK")

    def _flush(self) -> None:
        # Also called where no other statement guards it (the end of a buffered block: a memory
        # stored outside a transaction), so a lost connection here is named as one.
        with self._connection():
            super()._flush()

    def _send(self, p: Pending) -> None:
        with self.con.cursor() as cur:
            if p.memories:
                cur.executemany(_MEM_INSERT, p.memories)
            if p.events:
                cur.executemany("INSERT INTO memory_events VALUES (%s, %s, %s, %s)", p.events)
            if p.new_edges or p.edges:  # an upsert either way: a round trip costs more than the check
                cur.executemany(_EDGE_UPSERT, [*p.new_edges.values(), *p.edges.values()])

    def _rows(self, sql: str, params: Sequence[Any] = (), binary: bool = False) -> list[tuple]:
        with self._lock, self._connection():
            self._flush()
            with self.con.cursor(binary=binary) as cur:
                cur.execute(sql, list(params) if params else None)  # None: a literal % stays one
                return cur.fetchall() if cur.description else []

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
            if not (_lost(self.con, e) or (e.sqlstate is None and not self._answers())):
                raise
            self.con = connect(self.url)
            raise DatabaseUnavailable(
                f"{self.path}: the connection was lost ({str(e).strip()}); reconnected, try again"
            ) from None

    def _answers(self) -> bool:
        """Whether the connection still serves a statement. A failure libpq reports itself (no
        SQLSTATE: sending or reading failed) can come while the connection still looks open."""
        try:
            self.con.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        except psycopg.Error:
            pass  # it answered, with an error of its own (an aborted transaction)
        return True

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Rows:
        """Run SQL with ? placeholders, as Store.execute takes it: for tests and benchmarks that
        check the database itself. Not in MemoryStore: the engine asks for what it needs by name."""
        return Rows(self._rows(_marks(sql) if params else sql, params or ()))

    def _sql(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.execute(sql, params).fetchall()

    def _vector(self, embedding: np.ndarray) -> Any:
        return _vec(embedding)

    # -- memories ------------------------------------------------------------
    def insert_memory(self, m: Memory, embedding: np.ndarray | None) -> None:
        row = memory_values(m) + [_vec(embedding)]
        self._add(lambda p: p.memories.append(row))

    def reinforce(
        self, ids: Sequence[str], now: datetime, grow: Callable[[Memory, datetime], float]
    ) -> dict[str, Memory]:
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
            rows = self._rows(
                f"SELECT {MEM_SELECT} FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [list(ids)]
            )
            if not rows:
                return {}
            out = {}
            for r in rows:
                m = row_to_memory(r)
                out[m.id] = replace(
                    m, recall_count=m.recall_count + 1, last_recalled_at=aware(ts(now)), stability=grow(m, now)
                )
            self._run(
                "UPDATE memories SET recall_count = recall_count + 1, last_recalled_at = %s, "
                "stability = c.s FROM unnest(%s::text[], %s::double precision[]) AS c(id, s) "
                "WHERE memories.id = c.id",
                [ts(now), list(out), [m.stability for m in out.values()]],
            )
            return out

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        rows = self._rows(f"SELECT {MEM_SELECT} FROM memories WHERE id = ANY(%s)", [list(ids)])
        return {r[0]: row_to_memory(r) for r in rows}

    def _iter_rows(self, where: str, params: Sequence[Any], batch: int) -> Iterable[tuple[Memory, bytes | None]]:
        """Memory rows with their embeddings, oldest first, read in batches by keyset (created_at,
        id) so no cursor stays open between batches (the connection serves other threads)."""
        after: tuple | None = None
        while True:
            cond, p = where, list(params)
            if after is not None:
                cond += " AND (created_at, id) > (?, ?)"
                p += list(after)
            sql = (
                f"SELECT {MEM_SELECT}, embedding FROM memories WHERE {cond} ORDER BY created_at, id LIMIT {int(batch)}"
            )
            rows = self._rows(_marks(sql) if p else sql, p, binary=True)
            for r in rows:
                yield row_to_memory(r[:-1]), _vec_bytes(r[-1])
            if len(rows) < batch:
                return
            after = (rows[-1][5], rows[-1][0])

    def index_rows(self, ids: Sequence[str]) -> list[tuple[Memory, bytes | None]]:
        if not ids:
            return []
        rows = self._rows(
            f"SELECT {MEM_SELECT}, embedding FROM memories WHERE id = ANY(%s) AND status <> 'deleted'",
            [list(ids)],
            binary=True,
        )
        return [(row_to_memory(r[:-1]), _vec_bytes(r[-1])) for r in rows]

    # -- the database ------------------------------------------------------------
    def file_size(self) -> int | None:
        """Bytes the database takes on the server's disk (pg_database_size)."""
        return int(self._rows("SELECT pg_database_size(current_database())")[0][0])

    def flush_wal(self) -> None:
        """Nothing to fold: every commit is already durable in Postgres' write-ahead log, and the
        server checkpoints its data files itself (a client CHECKPOINT needs superuser rights)."""
        with self._lock:
            self._flush()

    def backup(self, dest: Any) -> int:
        raise EngramError(
            "engram backup copies a DuckDB file; a PostgreSQL database is backed up "
            "with its own tools: pg_dump (see docs/backups.md)"
        )

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
                "ORDER BY c.seq",
                [str(mark)],
            )
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

    def hold_lock(self, name: str) -> None:
        if not self._depth:
            raise RuntimeError("hold_lock must be called inside a transaction")
        # Transaction-scoped: released by the COMMIT or ROLLBACK, never left behind by a crash.
        self._sql("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", [f"engram:{name}"])

    def try_lease(self, name: str, holder: str, now: datetime, seconds: float) -> bool:
        """Take the named lease for `seconds` when it is free, expired or already `holder`'s;
        True when `holder` holds it now. One statement: two servers asking at once cannot both
        get it (the primary key serialises them)."""
        rows = self._rows(
            "INSERT INTO leases VALUES (%s, %s, %s) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "until = excluded.until WHERE leases.until < %s OR leases.holder = excluded.holder RETURNING holder",
            [name, holder, ts(now + timedelta(seconds=seconds)), ts(now)],
        )
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
        return {
            "path": store.path,
            "via": "postgres",
            "server_version": server,
            "pgvector": vector,
            "schema_version": store.schema_version(),
            "migrated": store.migrated,
            "memories": store.count("memories"),
        }
    finally:
        store.close()
