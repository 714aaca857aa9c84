"""Schema migrations: append-only, each applied in its own transaction with a ledger row."""

from __future__ import annotations

from datetime import datetime

import duckdb

# Never edit a shipped migration: add a new one at the end.
MIGRATIONS: list[tuple[str, list[str]]] = [
    ("initial schema", [
        """CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
        """CREATE TABLE memories (
            id VARCHAR PRIMARY KEY,
            content VARCHAR NOT NULL,
            memory_type VARCHAR NOT NULL,
            importance DOUBLE NOT NULL,
            recall_count INTEGER NOT NULL DEFAULT 0,
            created_at TIMESTAMP NOT NULL,
            last_recalled_at TIMESTAMP,
            user_id VARCHAR NOT NULL,
            task_id VARCHAR,
            session_id VARCHAR,
            tags VARCHAR[],
            metadata VARCHAR,
            provenance VARCHAR[],
            status VARCHAR NOT NULL,
            valid_from TIMESTAMP,
            valid_to TIMESTAMP,
            supersedes VARCHAR,
            superseded_by VARCHAR,
            embedding BLOB
        )""",
        """CREATE TABLE tasks (
            id VARCHAR PRIMARY KEY,
            name VARCHAR NOT NULL,
            goal VARCHAR,
            status VARCHAR NOT NULL,
            metadata VARCHAR,
            user_id VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )""",
        """CREATE TABLE sessions (
            id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            client VARCHAR,
            pid INTEGER,
            status VARCHAR NOT NULL,
            started_at TIMESTAMP NOT NULL,
            last_heartbeat TIMESTAMP NOT NULL,
            ended_at TIMESTAMP,
            task_id VARCHAR,
            outcome VARCHAR,
            outcome_notes VARCHAR,
            reported BOOLEAN NOT NULL DEFAULT false
        )""",
        """CREATE TABLE edges (
            src VARCHAR NOT NULL,
            dst VARCHAR NOT NULL,
            weight DOUBLE NOT NULL,
            user_id VARCHAR NOT NULL,
            PRIMARY KEY (src, dst)
        )""",
    ]),
    # DuckDB 1.5 cannot commit two ALTERs of one table (holding rows) in a single
    # transaction, so each migration alters a table at most once.
    ("pinned memories", ["ALTER TABLE memories ADD COLUMN pinned BOOLEAN DEFAULT false"]),
    ("memory update time", ["ALTER TABLE memories ADD COLUMN updated_at TIMESTAMP"]),
    ("session successes, memory history", [
        "ALTER TABLE sessions ADD COLUMN successes INTEGER DEFAULT 0",
        """CREATE TABLE memory_events (
            memory_id VARCHAR NOT NULL,
            happened_at TIMESTAMP NOT NULL,
            action VARCHAR NOT NULL,
            detail VARCHAR
        )""",
    ]),
    ("session failures", ["ALTER TABLE sessions ADD COLUMN failures INTEGER DEFAULT 0"]),
    # Only memories of one conversation share neighbour context (see index.py).
    ("memory conversation", ["ALTER TABLE memories ADD COLUMN conversation VARCHAR"]),
    # Spaced stability replaces the flat recall-count multiplier (decay.py). NULL means "never
    # recalled: the initial stability applies". A memory recalled before this version keeps the
    # benefit it had: S₀ × (1 + 0.2 × recall_count), with S₀ from the rates of that time.
    ("memory stability", [
        "ALTER TABLE memories ADD COLUMN stability DOUBLE",
        """UPDATE memories SET stability = (1 + 0.2 * recall_count) / ((CASE memory_type
            WHEN 'strategy' THEN 0.10 WHEN 'assumption' THEN 0.20 WHEN 'failure' THEN 0.35
            WHEN 'handoff' THEN 0.05 ELSE 0.16 END) * (1 - 0.8 * importance))
            WHERE recall_count > 0""",
    ]),
    # Why a session stopped, when it said so (report_interruption); NULL for a killed one.
    ("session interruption reason", ["ALTER TABLE sessions ADD COLUMN interruption VARCHAR"]),
    # Per-user keys for a team (engram/keys.py): only each key's hash is kept, never the key.
    ("api keys", ["""CREATE TABLE api_keys (
            id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            key_hash VARCHAR NOT NULL UNIQUE,
            label VARCHAR,
            created_at TIMESTAMP NOT NULL,
            revoked_at TIMESTAMP
        )"""]),
]

SCHEMA_VERSION = len(MIGRATIONS)


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    v = con.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    return int(v or 0)


def migrate(con: duckdb.DuckDBPyConnection, now: datetime, target: int | None = None) -> list[int]:
    """Apply pending migrations up to target (default: all). Returns the versions applied."""
    target = SCHEMA_VERSION if target is None else target
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)"
    )
    have = current_version(con)
    if have > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema v{have} is newer than this engram (v{SCHEMA_VERSION}); upgrade engram"
        )
    applied = []
    for version in range(have + 1, target + 1):
        description, statements = MIGRATIONS[version - 1]
        con.execute("BEGIN")
        try:
            for sql in statements:
                con.execute(sql)
            con.execute(
                "INSERT INTO schema_version VALUES (?, ?, ?)",
                [version, description, now.replace(tzinfo=None)],
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied
