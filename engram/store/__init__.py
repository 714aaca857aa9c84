"""The only package that speaks SQL: the interface the engine needs (base.py), the SQL both
backends share (sql.py, over rows.py: the memories table declared once and the row mapping), its
DuckDB implementation (db.py, the default) and its PostgreSQL one (pg.py), picked by open_store;
the migrations of both in schema.py."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from engram.core.settings import is_database_url
from engram.store.base import MemoryStore
from engram.store.db import Store


def open_store(path_or_url: str | Path, now: datetime) -> MemoryStore:
    """The store at a PostgreSQL URL (PgStore) or a DuckDB file / ":memory:" (Store)."""
    if is_database_url(path_or_url):
        from engram.store.pg import PgStore  # psycopg is an optional extra: imported only when asked for

        return PgStore(str(path_or_url), now)
    return Store(path_or_url, now)


__all__ = ["MemoryStore", "Store", "is_database_url", "open_store"]
