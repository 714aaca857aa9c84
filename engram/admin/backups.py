"""Backups of the engine's store, taken over the facade: `backup_store` (the `backup_store` operation,
`engram backup`) and the maintenance job's daily one. Where a backup lives, how it is checked,
rotated and restored is the store's (engram.store.backup)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engram.core.errors import BackupInvalid, DiskFull, EngramError
from engram.engram import Engram
from engram.store.backup import check_backup, daily_due, is_url, rotate
from engram.store.backup_files import DAILY, backup_path
from engram.store.duckdb_file import is_disk_full

__all__ = ["backup_store", "daily_backup"]


def backup_store(eng: Engram, dest: str | Path | None = None, kind: str = "memories") -> dict[str, Any]:
    """Back up the engine's store (in the process that owns it) and check the copy.

    Returns check_backup's report plus "seconds" (copy and check). A copy that fails its check
    is removed: a backup that cannot be restored must not be found as the newest.
    """
    if is_url(eng.path):
        raise EngramError(
            "engram backup copies a DuckDB file; a PostgreSQL database is backed up "
            "with its own tools: pg_dump (see docs/backups.md)"
        )
    t0 = time.perf_counter()
    target = backup_path(eng.path, dest, eng.clock.now(), kind)
    if target.resolve() == Path(eng.path).resolve():
        raise EngramError(f"{target} is the database itself; name another file or folder")
    try:
        eng.backup(target)
    except OSError as e:
        if is_disk_full(e):
            raise DiskFull(
                f"cannot write the backup {target}: the disk is full; nothing was written and the store is unchanged"
            ) from None
        raise EngramError(f"cannot write the backup {target}: {e.strerror or e}") from None
    try:
        report = check_backup(target)
    except BackupInvalid:
        target.unlink(missing_ok=True)
        raise
    report["seconds"] = round(time.perf_counter() - t0, 3)
    return report


def daily_backup(eng: Engram, keep: int) -> dict[str, Any] | None:
    """The maintenance job's backup: one a day, the newest `keep` daily ones kept (0: none).

    None when nothing was due (a PostgreSQL store, keep 0, or one taken less than a day ago).
    """
    if keep <= 0 or is_url(eng.path) or eng.path == ":memory:" or not daily_due(eng.path):
        return None
    report = backup_store(eng, kind=DAILY)
    report["removed"] = rotate(eng.path, keep)
    return report
