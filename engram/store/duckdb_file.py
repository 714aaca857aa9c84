"""The DuckDB file as engram meets it: the connection that names a full disk or a damaged file
(and reopens the file after a fatal error), whether a file holds all its blocks, and the check of a
file engram did not open (a backup). engram.store.db's Store opens its file through these."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any, Callable

import duckdb

from engram.core.errors import BackupInvalid
from engram.core.types import EngramError
from engram.store import schema as _schema
from engram.store.extensions import LOADED_BY_STORE, Connection, load_extensions
from engram.store.schema import SCHEMA_VERSION


def is_disk_full(e: BaseException | str) -> bool:
    """A DuckDB (or OS) error caused by a full disk (or quota)."""
    if isinstance(e, OSError):
        import errno

        return e.errno in (errno.ENOSPC, errno.EDQUOT)
    text = str(e).lower()
    return "no space left" in text or "disk quota" in text or "disk full" in text


def first_line(e: BaseException | str) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class FileConnection:
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


def missing_bytes(con: Connection, path: str) -> int:
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
    row = con.execute(
        "SELECT block_size, used_blocks FROM pragma_database_size() WHERE database_name = current_database()"
    ).fetchone()
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
        raise BackupInvalid(f"{path} is not a usable engram backup: {first_line(e)}") from None
    try:
        try:
            short = missing_bytes(con, str(path))
            version = _schema.one(con, "SELECT max(version) FROM schema_version")
        except duckdb.Error as e:
            raise BackupInvalid(f"{path} is not an engram database ({first_line(e)})") from None
        if short:
            raise BackupInvalid(f"{path} is truncated: {short} bytes of its blocks are missing")
        if version is None or version > SCHEMA_VERSION:
            raise BackupInvalid(
                f"{path} has schema v{version}; this engram reads up to v{SCHEMA_VERSION}"
                + ("; upgrade engram to restore it" if version else "")
            )
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        counts = {}
        for table in _schema.TABLES:  # every table, the ledger too (rows.TABLES: the countable ones)
            if table not in present and version < SCHEMA_VERSION:
                continue  # an older schema without this table: migrating it on open adds it
            try:
                n = _schema.one(con, f"SELECT count(*), bit_xor(hash(t)) FROM {table} t")
            except duckdb.Error as e:
                raise BackupInvalid(f"{path}: table {table} cannot be read: {first_line(e)}") from None
            counts[table] = int(n)
    finally:
        con.close()
    return {"schema_version": int(version), "counts": counts}
