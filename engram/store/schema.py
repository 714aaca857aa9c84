"""Schema migrations: append-only, each applied in its own transaction with a ledger row.

Two lists, one per backend, side by side: MIGRATIONS (DuckDB) and PG_MIGRATIONS (PostgreSQL,
applied by pg.py). Version N means the same tables and columns on both, so a new DuckDB
migration needs its Postgres twin at the same position (tests/store/test_schema.py fails while the
lists' lengths or the columns they produce differ).
"""

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

# The Postgres twins, position for position. Types: text, double precision, integer, boolean,
# timestamp (naive UTC, as on DuckDB), text[] and pgvector's vector (no fixed dimension: the
# model decides it, and meta.model_dim records it). Ids sort COLLATE "C" (bytes, as DuckDB
# sorts them) whatever the database's locale: ids sort in write order. Version 1 also creates what only Postgres
# has: the change feed (changes, filled by triggers in the writing transaction) and leases,
# which let several servers share one database (see pg.py).
PG_MIGRATIONS: list[tuple[str, list[str]]] = [
    ("initial schema", [
        """CREATE TABLE meta (key text PRIMARY KEY, value text)""",
        """CREATE TABLE memories (
            id text COLLATE "C" PRIMARY KEY,
            content text NOT NULL,
            memory_type text NOT NULL,
            importance double precision NOT NULL,
            recall_count integer NOT NULL DEFAULT 0,
            created_at timestamp NOT NULL,
            last_recalled_at timestamp,
            user_id text NOT NULL,
            task_id text,
            session_id text,
            tags text[],
            metadata text,
            provenance text[],
            status text NOT NULL,
            valid_from timestamp,
            valid_to timestamp,
            supersedes text,
            superseded_by text,
            embedding vector
        )""",
        "CREATE INDEX memories_user_task ON memories (user_id, task_id)",
        # iter_index_rows / iter_memory_rows read in (created_at, id) order, a batch at a time.
        "CREATE INDEX memories_created ON memories (created_at, id)",
        "CREATE INDEX memories_session ON memories (session_id)",
        """CREATE TABLE tasks (
            id text COLLATE "C" PRIMARY KEY,
            name text NOT NULL,
            goal text,
            status text NOT NULL,
            metadata text,
            user_id text NOT NULL,
            created_at timestamp NOT NULL,
            updated_at timestamp NOT NULL
        )""",
        """CREATE TABLE sessions (
            id text COLLATE "C" PRIMARY KEY,
            user_id text NOT NULL,
            client text,
            pid integer,
            status text NOT NULL,
            started_at timestamp NOT NULL,
            last_heartbeat timestamp NOT NULL,
            ended_at timestamp,
            task_id text,
            outcome text,
            outcome_notes text,
            reported boolean NOT NULL DEFAULT false
        )""",
        """CREATE TABLE edges (
            src text COLLATE "C" NOT NULL,
            dst text COLLATE "C" NOT NULL,
            weight double precision NOT NULL,
            user_id text NOT NULL,
            PRIMARY KEY (src, dst)
        )""",
        "CREATE INDEX edges_dst ON edges (dst)",
        # The change feed: one row per memory written (memory_id) or per statement that changed
        # edges (memory_id NULL), stamped with the writing transaction's id so a reader hands
        # out only rows no running transaction can still add to (PgStore.changes_since).
        """CREATE TABLE changes (
            seq bigserial PRIMARY KEY,
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            memory_id text,
            at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
        "CREATE INDEX changes_xid ON changes (xid)",
        "CREATE INDEX changes_at ON changes (at)",
        """CREATE FUNCTION engram_memory_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO changes (memory_id) VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
                RETURN NULL;
            END $$""",
        """CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE ON memories
            FOR EACH ROW EXECUTE FUNCTION engram_memory_changed()""",
        # Edges change in bulk: one row per statement that touched any (transition tables
        # tell an empty DELETE apart; they allow one event per trigger, hence three).
        """CREATE FUNCTION engram_edges_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF EXISTS (SELECT 1 FROM touched) THEN
                    INSERT INTO changes (memory_id) VALUES (NULL);
                END IF;
                RETURN NULL;
            END $$""",
        """CREATE TRIGGER edges_inserted AFTER INSERT ON edges REFERENCING NEW TABLE AS touched
            FOR EACH STATEMENT EXECUTE FUNCTION engram_edges_changed()""",
        """CREATE TRIGGER edges_updated AFTER UPDATE ON edges REFERENCING NEW TABLE AS touched
            FOR EACH STATEMENT EXECUTE FUNCTION engram_edges_changed()""",
        """CREATE TRIGGER edges_deleted AFTER DELETE ON edges REFERENCING OLD TABLE AS touched
            FOR EACH STATEMENT EXECUTE FUNCTION engram_edges_changed()""",
        """CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL, until timestamp NOT NULL)""",
    ]),
    ("pinned memories", ["ALTER TABLE memories ADD COLUMN pinned boolean DEFAULT false"]),
    ("memory update time", ["ALTER TABLE memories ADD COLUMN updated_at timestamp"]),
    ("session successes, memory history", [
        "ALTER TABLE sessions ADD COLUMN successes integer DEFAULT 0",
        """CREATE TABLE memory_events (
            memory_id text COLLATE "C" NOT NULL,
            happened_at timestamp NOT NULL,
            action text NOT NULL,
            detail text
        )""",
        "CREATE INDEX memory_events_memory ON memory_events (memory_id)",
    ]),
    ("session failures", ["ALTER TABLE sessions ADD COLUMN failures integer DEFAULT 0"]),
    ("memory conversation", ["ALTER TABLE memories ADD COLUMN conversation text"]),
    ("memory stability", [
        "ALTER TABLE memories ADD COLUMN stability double precision",
        """UPDATE memories SET stability = (1 + 0.2 * recall_count) / ((CASE memory_type
            WHEN 'strategy' THEN 0.10 WHEN 'assumption' THEN 0.20 WHEN 'failure' THEN 0.35
            WHEN 'handoff' THEN 0.05 ELSE 0.16 END) * (1 - 0.8 * importance))
            WHERE recall_count > 0""",
    ]),
    ("session interruption reason", ["ALTER TABLE sessions ADD COLUMN interruption text"]),
    ("api keys", ["""CREATE TABLE api_keys (
            id text COLLATE "C" PRIMARY KEY,
            user_id text NOT NULL,
            key_hash text NOT NULL UNIQUE,
            label text,
            created_at timestamp NOT NULL,
            revoked_at timestamp
        )"""]),
]
PG_ONLY_TABLES = ("changes", "leases")  # what PG_MIGRATIONS adds beyond MIGRATIONS


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
