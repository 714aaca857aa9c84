"""The DuckDB and PostgreSQL migration lists stay twins: same length, same tables and columns."""

import duckdb
import pytest

from engram.store.schema import MIGRATIONS, PG_MIGRATIONS, PG_ONLY_TABLES, migrate
from tests.conftest import START


def test_every_duckdb_migration_has_its_postgres_twin():
    # A new DuckDB migration needs the same change in PG_MIGRATIONS, at the same position.
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)
    assert [d for d, _ in PG_MIGRATIONS] == [d for d, _ in MIGRATIONS]


def _duckdb_columns(target: int) -> dict[str, set[str]]:
    con = duckdb.connect(":memory:")
    migrate(con, START, target=target)
    rows = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    con.close()
    out: dict[str, set[str]] = {}
    for t, c in rows:
        out.setdefault(t, set()).add(c)
    return out


def _pg_columns(url: str) -> dict[str, set[str]]:
    import psycopg

    with psycopg.connect(url) as con:
        rows = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
        ).fetchall()
    out: dict[str, set[str]] = {}
    for t, c in rows:
        if t not in PG_ONLY_TABLES:
            out.setdefault(t, set()).add(c)
    return out


def test_both_lists_make_the_same_tables_and_columns_at_every_version(pg_server):
    from engram.store.pg import connect
    from engram.store.pg import migrate as pg_migrate

    url = pg_server.new_database(migrated=False)
    try:
        con = connect(url)
        for version in range(1, len(MIGRATIONS) + 1):
            assert pg_migrate(con, START, target=version) == [version]
            assert _pg_columns(url) == _duckdb_columns(version), f"v{version}"
        con.close()
    finally:
        pg_server.drop(url)


@pytest.mark.parametrize("table", PG_ONLY_TABLES)
def test_postgres_only_tables_exist(pg_url, table):
    import psycopg

    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT to_regclass(%s)", [table]).fetchone()[0] == table


def test_a_new_store_has_the_declared_memory_columns_in_order(pg_server):
    # The memories table is what engram.store.rows.MEMORY_TABLE declares, on both backends.
    from engram.store.pg import connect
    from engram.store.pg import migrate as pg_migrate
    from engram.store.rows import MEMORY_TABLE

    want = [c.name for c in MEMORY_TABLE]
    con = duckdb.connect(":memory:")
    migrate(con, START)
    got = [
        r[0]
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories' ORDER BY ordinal_position"
        ).fetchall()
    ]
    con.close()
    assert got == want
    url = pg_server.new_database(migrated=False)
    try:
        con = connect(url)
        pg_migrate(con, START)
        got = [
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE "
                "table_name = 'memories' ORDER BY ordinal_position"
            ).fetchall()
        ]
        con.close()
        assert got == want
    finally:
        pg_server.drop(url)
