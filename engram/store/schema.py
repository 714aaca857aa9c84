"""Schema migrations: append-only, each applied in its own transaction with a ledger row.

Two lists, one per backend, side by side: MIGRATIONS (DuckDB) and PG_MIGRATIONS (PostgreSQL,
applied by pg.py). Version N means the same tables and columns on both, so a new DuckDB
migration needs its Postgres twin at the same position (tests/store/test_schema.py fails while the
lists' lengths or the columns they produce differ).

The memories table's statements come from its declaration (rows.MEMORY_TABLE, memory_ddl): the
CREATE of version 1 and each later ADD COLUMN, in each backend's types (SQL_TYPES). They are the
statements the shipped versions ran, word for word; a new memory column is a Column there with
`since` = its new version, and that version's entry here calls memory_ddl. The other tables'
statements stay literal, as shipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engram.core.errors import SchemaTooNew
from engram.core.version import VERSION
from engram.store.extensions import Connection
from engram.store.rows import MEMORY_TABLE, Column

# The SQL type of each column kind (rows.KINDS) per backend. Postgres: naive UTC timestamps (as
# on DuckDB), pgvector's vector without a fixed dimension (the model decides it, meta.model_dim
# records it), and ids COLLATE "C" (sorted by bytes, as DuckDB sorts them).
SQL_TYPES: dict[str, dict[str, str]] = {
    "duckdb": {
        "key": "VARCHAR",
        "text": "VARCHAR",
        "float": "DOUBLE",
        "int": "INTEGER",
        "bool": "BOOLEAN",
        "time": "TIMESTAMP",
        "list": "VARCHAR[]",
        "json": "VARCHAR",
        "vector": "BLOB",
    },
    "postgres": {
        "key": 'text COLLATE "C"',
        "text": "text",
        "float": "double precision",
        "int": "integer",
        "bool": "boolean",
        "time": "timestamp",
        "list": "text[]",
        "json": "text",
        "vector": "vector",
    },
}


def column_sql(c: Column, backend: str) -> str:
    """The column's definition in a CREATE TABLE or ADD COLUMN."""
    words = [c.name, SQL_TYPES[backend][c.kind]]
    if c.kind == "key":
        words.append("PRIMARY KEY")
    elif c.required:
        words.append("NOT NULL")
    if c.default is not None:
        words.append(f"DEFAULT {c.default}")
    return " ".join(words)


def memory_ddl(backend: str, version: int) -> list[str]:
    """What schema version `version` does to the memories table, from its declaration: the
    CREATE at version 1, an ADD COLUMN for a column added later (DuckDB 1.5 cannot commit two
    ALTERs of one table holding rows in one transaction: one column a version)."""
    columns = [c for c in MEMORY_TABLE if c.since == version]
    if version == 1:
        body = ",\n            ".join(column_sql(c, backend) for c in columns)
        return [f"CREATE TABLE memories (\n            {body}\n        )"]
    if len(columns) > 1:
        raise ValueError(f"schema v{version} adds {len(columns)} memory columns; one a version")
    return [f"ALTER TABLE memories ADD COLUMN {column_sql(c, backend)}" for c in columns]


# Version 7 on both backends: a memory recalled before spaced stability keeps the benefit it had.
STABILITY_BACKFILL = """UPDATE memories SET stability = (1 + 0.2 * recall_count) / ((CASE memory_type
    WHEN 'strategy' THEN 0.10 WHEN 'assumption' THEN 0.20 WHEN 'failure' THEN 0.35
    WHEN 'handoff' THEN 0.05 ELSE 0.16 END) * (1 - 0.8 * importance))
    WHERE recall_count > 0"""


def tier_backfill(has_tag: str) -> str:
    """Version 16: each stored memory's tier from its type, conversation and tags, as
    engram.core.types.default_tier gives a new one (`has_tag`: the backend's test that tags holds
    the tag in {tag})."""
    auto, convention = has_tag.format(tag="'auto-capture'"), has_tag.format(tag="'convention'")
    return f"""UPDATE memories SET tier = CASE
        WHEN conversation IS NOT NULL THEN 'episodic'
        WHEN memory_type IN ('handoff', 'progress') THEN 'working'
        WHEN memory_type IN ('episode', 'assumption') THEN 'episodic'
        WHEN memory_type = 'strategy' AND NOT coalesce({auto}, false) THEN 'procedural'
        WHEN memory_type = 'fact' AND coalesce({convention}, false) AND NOT coalesce({auto}, false)
            THEN 'procedural'
        ELSE 'semantic' END"""


# Never edit a shipped migration: add a new one at the end.
MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        "initial schema",
        [
            """CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
            *memory_ddl("duckdb", 1),
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
        ],
    ),
    # DuckDB 1.5 cannot commit two ALTERs of one table (holding rows) in a single
    # transaction, so each migration alters a table at most once.
    ("pinned memories", memory_ddl("duckdb", 2)),
    ("memory update time", memory_ddl("duckdb", 3)),
    (
        "session successes, memory history",
        [
            "ALTER TABLE sessions ADD COLUMN successes INTEGER DEFAULT 0",
            """CREATE TABLE memory_events (
            memory_id VARCHAR NOT NULL,
            happened_at TIMESTAMP NOT NULL,
            action VARCHAR NOT NULL,
            detail VARCHAR
        )""",
        ],
    ),
    ("session failures", ["ALTER TABLE sessions ADD COLUMN failures INTEGER DEFAULT 0"]),
    # Only memories of one conversation share neighbour context (see search/memory_index.py).
    ("memory conversation", memory_ddl("duckdb", 6)),
    # Spaced stability replaces the flat recall-count multiplier (search/decay.py). NULL means "never
    # recalled: the initial stability applies". A memory recalled before this version keeps the
    # benefit it had: S₀ × (1 + 0.2 × recall_count), with S₀ from the rates of that time.
    (
        "memory stability",
        [
            *memory_ddl("duckdb", 7),
            STABILITY_BACKFILL,
        ],
    ),
    # Why a session stopped, when it said so (report_interruption); NULL for a killed one.
    ("session interruption reason", ["ALTER TABLE sessions ADD COLUMN interruption VARCHAR"]),
    # Per-user keys for a team (engram/admin/keys.py): only each key's hash is kept, never the key.
    (
        "api keys",
        [
            """CREATE TABLE api_keys (
            id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            key_hash VARCHAR NOT NULL UNIQUE,
            label VARCHAR,
            created_at TIMESTAMP NOT NULL,
            revoked_at TIMESTAMP
        )"""
        ],
    ),
    # Projects (engram/core/project.py, docs/projects.md): NULL is "no project", so every row stored
    # before this version stays visible from inside and outside any project. One ALTER per
    # table per migration (see above), hence four.
    ("memory project", memory_ddl("duckdb", 10)),
    ("task project", ["ALTER TABLE tasks ADD COLUMN project VARCHAR"]),
    ("session project", ["ALTER TABLE sessions ADD COLUMN project VARCHAR"]),
    ("session branch", ["ALTER TABLE sessions ADD COLUMN branch VARCHAR"]),
    # Task claims (engram/continuity/claims.py): the primary key lets one session at a time hold a task;
    # a claim is taken by an insert that finds no row, or by an update conditional on the holder
    # read before it, so two racing sessions cannot both win. claim_notices tells a session,
    # on its next call, that another took its task over.
    (
        "task claims",
        [
            """CREATE TABLE claims (
            task_id VARCHAR PRIMARY KEY,
            user_id VARCHAR NOT NULL,
            session_id VARCHAR NOT NULL,
            client VARCHAR,
            claimed_at TIMESTAMP NOT NULL
        )""",
            """CREATE TABLE claim_notices (
            session_id VARCHAR NOT NULL,
            task_id VARCHAR NOT NULL,
            by_session VARCHAR NOT NULL,
            by_client VARCHAR,
            happened_at TIMESTAMP NOT NULL
        )""",
        ],
    ),
    # Token vectors of the late-interaction reader (models/late_interaction.py), derived like the
    # embedding but kept in a table of their own: int8, several KB a memory, read only when
    # that stage is on. text_hash says which text they were computed from (a changed text is
    # encoded again); rows of deleted memories go with them (sql.delete_memories).
    (
        "token vectors",
        [
            """CREATE TABLE token_vectors (
            memory_id VARCHAR PRIMARY KEY,
            text_hash VARCHAR NOT NULL,
            vectors BLOB NOT NULL
        )""",
        ],
    ),
    # Tiers (docs/lifecycle.md): every stored memory gets the tier a new one of its kind would.
    ("memory tier", [*memory_ddl("duckdb", 16), tier_backfill("list_contains(tags, {tag})")]),
    ("memory expiry", memory_ddl("duckdb", 17)),
]

SCHEMA_VERSION = len(MIGRATIONS)
# Every table MIGRATIONS makes (plus the ledger): what a backup's integrity check reads in full.
TABLES = (
    "schema_version",
    "meta",
    "memories",
    "tasks",
    "sessions",
    "edges",
    "memory_events",
    "api_keys",
    "token_vectors",
)

# The Postgres twins, position for position, in SQL_TYPES' types. Ids sort COLLATE "C" (bytes, as
# DuckDB sorts them) whatever the database's locale: ids sort in write order. Version 1 also creates what only Postgres
# has: the change feed (changes, filled by triggers in the writing transaction) and leases,
# which let several servers share one database (see pg.py).
PG_MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        "initial schema",
        [
            """CREATE TABLE meta (key text PRIMARY KEY, value text)""",
            *memory_ddl("postgres", 1),
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
        ],
    ),
    ("pinned memories", memory_ddl("postgres", 2)),
    ("memory update time", memory_ddl("postgres", 3)),
    (
        "session successes, memory history",
        [
            "ALTER TABLE sessions ADD COLUMN successes integer DEFAULT 0",
            """CREATE TABLE memory_events (
            memory_id text COLLATE "C" NOT NULL,
            happened_at timestamp NOT NULL,
            action text NOT NULL,
            detail text
        )""",
            "CREATE INDEX memory_events_memory ON memory_events (memory_id)",
        ],
    ),
    ("session failures", ["ALTER TABLE sessions ADD COLUMN failures integer DEFAULT 0"]),
    ("memory conversation", memory_ddl("postgres", 6)),
    (
        "memory stability",
        [
            *memory_ddl("postgres", 7),
            STABILITY_BACKFILL,
        ],
    ),
    ("session interruption reason", ["ALTER TABLE sessions ADD COLUMN interruption text"]),
    (
        "api keys",
        [
            """CREATE TABLE api_keys (
            id text COLLATE "C" PRIMARY KEY,
            user_id text NOT NULL,
            key_hash text NOT NULL UNIQUE,
            label text,
            created_at timestamp NOT NULL,
            revoked_at timestamp
        )"""
        ],
    ),
    ("memory project", memory_ddl("postgres", 10)),
    ("task project", ["ALTER TABLE tasks ADD COLUMN project text"]),
    ("session project", ["ALTER TABLE sessions ADD COLUMN project text"]),
    ("session branch", ["ALTER TABLE sessions ADD COLUMN branch text"]),
    (
        "task claims",
        [
            """CREATE TABLE claims (
            task_id text COLLATE "C" PRIMARY KEY,
            user_id text NOT NULL,
            session_id text COLLATE "C" NOT NULL,
            client text,
            claimed_at timestamp NOT NULL
        )""",
            "CREATE INDEX claims_session ON claims (session_id)",
            """CREATE TABLE claim_notices (
            session_id text COLLATE "C" NOT NULL,
            task_id text COLLATE "C" NOT NULL,
            by_session text NOT NULL,
            by_client text,
            happened_at timestamp NOT NULL
        )""",
            "CREATE INDEX claim_notices_session ON claim_notices (session_id)",
        ],
    ),
    (
        "token vectors",
        [
            """CREATE TABLE token_vectors (
            memory_id text COLLATE "C" PRIMARY KEY,
            text_hash text NOT NULL,
            vectors bytea NOT NULL
        )""",
        ],
    ),
    ("memory tier", [*memory_ddl("postgres", 16), tier_backfill("{tag} = ANY(tags)")]),
    ("memory expiry", memory_ddl("postgres", 17)),
]
PG_ONLY_TABLES = ("changes", "leases")  # what PG_MIGRATIONS adds beyond MIGRATIONS


def schema_too_new(have: int, latest: int) -> SchemaTooNew:
    """The refusal of a store a newer engram migrated (both backends)."""
    return SchemaTooNew(
        f"the database is at schema v{have}, newer than this engram {VERSION} reads (schema "
        f"v{latest}): a newer engram migrated it. Nothing was changed. Upgrade engram (pip install -U "
        "engram-recall) and run it again, or restore a backup taken before the upgrade (engram restore)"
    )


def current_version(con: Connection) -> int:
    # An aggregate always returns one row.
    exists = one(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'")
    if not exists:
        return 0
    return int(one(con, "SELECT max(version) FROM schema_version") or 0)


def one(con: Connection, sql: str, params: list | None = None) -> Any:
    """The single value of a query that returns one row (an aggregate); None when it returns none."""
    row = con.execute(sql, params or []).fetchone()
    return None if row is None else row[0]


def migrate(con: Connection, now: datetime, target: int | None = None) -> list[int]:
    """Apply pending migrations up to target (default: all). Returns the versions applied."""
    target = SCHEMA_VERSION if target is None else target
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, description VARCHAR, applied_at TIMESTAMP)"
    )
    have = current_version(con)
    if have > SCHEMA_VERSION:
        raise schema_too_new(have, SCHEMA_VERSION)
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
