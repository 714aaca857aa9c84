"""Where a DuckDB store's backups live, how they are named and how one is copied: the backups folder beside the file,
`memories-<time>.duckdb` by hand and `daily-<time>.duckdb` by maintenance, newest first. The
store (db.py, which names the newest backup when a file is damaged) and backup.py read it."""

from __future__ import annotations

import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

BACKUP_DIR = "backups"
# memories-20261201T232400Z.duckdb (by hand) / daily-20261201T232400Z.duckdb (maintenance).
_NAME = re.compile(r"^(memories|daily)-(\d{8}T\d{6}(?:\d{3})?Z)\.duckdb$")
DAILY = "daily"
DAILY_EVERY_S = 23 * 3600  # a little under a day: a run every 12 h takes one each day


def backup_dir(db_path: str | Path) -> Path:
    return Path(db_path).parent / BACKUP_DIR


def backup_path(db_path: str | Path, dest: str | Path | None, now: datetime, kind: str = "memories") -> Path:
    """Where a backup goes: `dest` (a file, or an existing folder), else the store's backups folder."""
    name = f"{kind}-{now.astimezone(UTC).strftime('%Y%m%dT%H%M%S%f')[:-3]}Z.duckdb"
    if dest is None:
        return backup_dir(db_path) / name
    p = Path(dest).expanduser()
    return p / name if p.is_dir() else p


def list_backups(db_path: str | Path, kind: str | None = None) -> list[Path]:
    """The backups in the store's backups folder, newest first (by the time in their names)."""
    folder = backup_dir(db_path)
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        m = _NAME.match(p.name)
        if m and (kind is None or m.group(1) == kind):
            found.append((m.group(2).rstrip("Z").ljust(18, "0"), p))  # names without milliseconds too
    return [p for _, p in sorted(found, reverse=True)]


def latest_backup(db_path: str | Path) -> Path | None:
    found = list_backups(db_path)
    return found[0] if found else None


def copy_file(src: str | Path, dest: Path) -> int:
    """Copy src to dest through a temporary file, synced before it takes dest's name.

    A failure (a full disk) leaves no partial file under dest's name. Returns the bytes copied.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
            fout.flush()
            os.fsync(fout.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest.stat().st_size
