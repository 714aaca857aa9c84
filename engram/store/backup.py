"""Backups of a DuckDB store: where they live, how they are checked, kept and brought back.

A backup is a plain DuckDB file, copied by the daemon that owns the store (Store.backup: a
checkpoint, then a byte copy under the store's lock, so no write lands halfway through it).
They live in a `backups` folder beside the database file. The maintenance job takes a
`daily-*` one a day and keeps the newest `ENGRAM_BACKUP_KEEP`; a backup taken by hand
(`engram backup`) is never removed by rotation. PostgreSQL has its own tools (pg_dump).

Restoring (`restore`) never loses the current file: it is moved aside (and kept) only after
the backup passed `check_backup`, and moved back if the copy into place fails.
"""

from __future__ import annotations

import contextlib
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram.core.errors import BackupInvalid
from engram.store.backup_files import (
    BACKUP_DIR,
    DAILY,
    DAILY_EVERY_S,
    backup_dir,
    backup_path,
    copy_file,
    latest_backup,
    list_backups,
)
from engram.store.duckdb_file import inspect_file

__all__ = [
    "BACKUP_DIR",
    "BackupInvalid",
    "backup_dir",
    "backup_path",
    "check_backup",
    "copy_file",
    "daily_due",
    "is_url",
    "list_backups",
    "latest_backup",
    "restore",
    "rotate",
]


def rotate(db_path: str | Path, keep: int) -> list[str]:
    """Remove the daily backups beyond the newest `keep`; returns the removed paths."""
    removed = []
    for p in list_backups(db_path, DAILY)[keep:]:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(str(p))
    return removed


def daily_due(db_path: str | Path, now: float | None = None) -> bool:
    found = list_backups(db_path, DAILY)
    if not found:
        return True
    return (now or time.time()) - found[0].stat().st_mtime >= DAILY_EVERY_S


def is_url(path: str) -> bool:
    return "://" in str(path)


def check_backup(path: str | Path) -> dict[str, Any]:
    """Open a backup read-only and check it: its size against its used blocks, the schema
    version, each table's rows read in full (engram.store.duckdb_file.inspect_file).

    Returns {"path", "bytes", "schema_version", "counts"}; raises BackupInvalid naming the file
    and what is wrong.
    """

    p = Path(path).expanduser()
    if not p.is_file():
        raise BackupInvalid(f"{p}: no such backup file")
    report = inspect_file(p)
    return {"path": str(p), "bytes": p.stat().st_size, **report}


def restore(backup: str | Path, db_path: str | Path, now: datetime) -> dict[str, Any]:
    """Put a checked backup in place of the store at db_path (no daemon may hold it open).

    The current file (and its WAL) is moved aside to <name>.before-restore-<time> and kept; the
    backup is copied beside the store, checked again, then renamed into place. Any failure
    puts the current file back.
    """
    report = check_backup(backup)
    db = Path(db_path)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    staged = db.with_name(f".{db.name}.restoring")
    copy_file(backup, staged)
    try:
        check_backup(staged)  # the copy, on the store's own disk
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    aside = db.with_name(f"{db.name}.before-restore-{stamp}")
    moved: list[tuple[Path, Path]] = []
    try:
        for cur in (db, Path(str(db) + ".wal")):
            if cur.exists():
                target = aside if cur == db else Path(str(aside) + ".wal")
                os.replace(cur, target)
                moved.append((target, cur))
        os.replace(staged, db)
    except BaseException:
        for target, cur in reversed(moved):
            os.replace(target, cur)
        staged.unlink(missing_ok=True)
        raise
    report["restored_to"] = str(db)
    report["previous"] = str(aside) if moved else None
    return report
