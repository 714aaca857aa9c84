"""What only the PostgreSQL store has: the migration ledger under an advisory lock, the change
feed, leases, row-locked reinforcement, compaction, and the errors of a bad URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from engram import Engram, Settings
from engram.core.errors import DatabaseUnavailable, SchemaTooNew
from engram.core.types import Memory
from engram.models.embedding import FakeEmbedder
from engram.store.schema import PG_MIGRATIONS
from tests.conftest import START

REPO = Path(__file__).resolve().parents[2]

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL tests need psycopg")


def _store(url):
    from engram.store.pg import PgStore

    return PgStore(url, START)


def _memory(mid: str, content: str = "a fact") -> Memory:
    return Memory(
        id=mid,
        content=content,
        memory_type="fact",
        importance=0.5,
        recall_count=0,
        created_at=START,
        last_recalled_at=None,
        user_id="u",
        task_id=None,
        session_id=None,
        tags=("x",),
        metadata={},
        provenance=(),
        status="active",
        valid_from=START,
        valid_to=None,
        supersedes=None,
        superseded_by=None,
        pinned=False,
        updated_at=START,
        conversation=None,
        stability=None,
    )


def test_url_password_never_shown():
    from engram.store.pg import redact_url

    assert redact_url("postgresql://bob:s3cret@db.example:5432/engram") == "postgresql://bob@db.example:5432/engram"
    assert redact_url("postgres://db/engram?password=s3cret&sslmode=require") == "postgres://db/engram?sslmode=require"
    assert redact_url("postgresql://bob@/engram?host=/tmp/x") == "postgresql://bob@/engram?host=/tmp/x"


def test_unreachable_server_is_a_clear_error_without_the_password():
    from engram.store import open_store

    url = "postgresql://bob:s3cret@127.0.0.1:1/engram?connect_timeout=2"
    with pytest.raises(DatabaseUnavailable, match=r"cannot connect to postgresql://bob@127\.0\.0\.1:1/engram") as e:
        open_store(url, START)
    assert "s3cret" not in str(e.value)


def test_a_database_url_that_is_not_postgres_is_refused():
    with pytest.raises(ValueError, match="ENGRAM_DATABASE_URL must be a postgresql:// or postgres:// URL"):
        Settings.from_env({"ENGRAM_DATABASE_URL": "mysql://db/engram"})


def test_a_missing_database_names_it(pg_server):
    url = pg_server.url("no_such_database")
    with pytest.raises(DatabaseUnavailable, match='database "no_such_database" does not exist'):
        _store(url)


def test_the_ledger_records_each_version_once(pg_url):
    from engram.store.pg import PgStore

    s = PgStore(pg_url, START)  # the template was migrated: nothing to apply
    assert s.migrated == [] and s.schema_version() == len(PG_MIGRATIONS)
    s.close()
    with psycopg.connect(pg_url) as con:
        rows = con.execute("SELECT version, description FROM schema_version ORDER BY version").fetchall()
    assert rows == [(i + 1, d) for i, (d, _) in enumerate(PG_MIGRATIONS)]


def test_newer_schema_is_refused(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("INSERT INTO schema_version VALUES (999, 'future', '2030-01-01')")
    with pytest.raises(SchemaTooNew, match="newer than this engram"):
        _store(pg_url)


def test_servers_starting_at_once_migrate_once(pg_server):
    """Four processes open one empty database at the same moment: each version is applied by
    exactly one of them (the advisory lock), and every one of them opens at the latest."""
    url = pg_server.new_database(migrated=False)
    code = (
        "import sys, json; from tests.conftest import START; from engram.store.pg import PgStore; "
        "sys.stdin.readline(); s = PgStore(sys.argv[1], START); "
        "print(json.dumps([s.migrated, s.schema_version()])); s.close()"
    )
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
            )
            for _ in range(4)
        ]
        for p in procs:  # all imported and waiting: release them together
            p.stdin.write("go\n")
            p.stdin.flush()
        out = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        assert all(p.returncode == 0 for p in procs)
        applied = sorted(v for migrated, _ in out for v in migrated)
        assert applied == list(range(1, len(PG_MIGRATIONS) + 1))
        assert {version for _, version in out} == {len(PG_MIGRATIONS)}
    finally:
        pg_server.drop(url)


def test_the_change_feed_never_skips_a_write_committed_late(pg_url):
    """Transaction A takes its change number first and commits last; a reader polling in
    between must not move past A's write (the outbox pitfall): it gets it once A commits."""
    reader, writer = _store(pg_url), _store(pg_url)
    mark = reader.change_mark()
    with psycopg.connect(pg_url) as a:  # not autocommit: one open transaction
        a.execute(
            "INSERT INTO memories (id, content, memory_type, importance, created_at, user_id, status) "
            "VALUES ('early', 'x', 'fact', 0.5, now(), 'u', 'active')"
        )
        writer.insert_memory(_memory("late"), np.ones(4, dtype=np.float32))  # commits at once
        mark, ids, edges = reader.changes_since(mark)
        assert "early" not in ids and not edges  # still in flight: invisible
        a.commit()
    seen = set(ids)
    mark, ids, _ = reader.changes_since(mark)
    seen |= set(ids)
    assert seen == {"early", "late"}
    assert reader.changes_since(mark)[1] == []  # nothing twice once both are handed out
    reader.close()
    writer.close()


def test_the_change_feed_reports_updates_deletes_and_edges_in_order(pg_url):
    s = _store(pg_url)
    mark = s.change_mark()
    for mid in ("m1", "m2"):
        s.insert_memory(_memory(mid), None)
    s.update_memory("m1", content="changed")
    mark, ids, edges = s.changes_since(mark)
    assert ids == ["m1", "m2"] and not edges  # m1 once, at its first change
    s.add_edges("u", [("m1", "m2", 0.5)])
    mark, ids, edges = s.changes_since(mark)
    assert ids == [] and edges
    s.delete_edges_of(["nothing"])  # a delete that touches no edge is no change
    assert s.changes_since(mark)[2] is False
    s.delete_memories(["m2"])
    mark, ids, edges = s.changes_since(mark)
    assert ids == ["m2"] and edges  # its edge went with it
    with s.transaction():
        s.insert_memory(_memory("m3"), None)
    with pytest.raises(RuntimeError, match="roll back"), s.transaction():
        s.insert_memory(_memory("m4"), None)
        raise RuntimeError("roll back")
    mark, ids, _ = s.changes_since(mark)
    assert ids == ["m3"]  # the rolled-back insert is no change
    s.close()


def test_a_lease_is_held_by_one_holder_until_it_expires(pg_url):
    a, b = _store(pg_url), _store(pg_url)
    assert a.try_lease("upkeep", "server-a", START, 60)
    assert not b.try_lease("upkeep", "server-b", START + timedelta(seconds=30), 60)
    assert a.try_lease("upkeep", "server-a", START + timedelta(seconds=30), 60)  # renewed to +90 s
    assert not b.try_lease("upkeep", "server-b", START + timedelta(seconds=80), 60)
    assert b.try_lease("upkeep", "server-b", START + timedelta(seconds=91), 60)  # expired: taken over
    assert not a.try_lease("upkeep", "server-a", START + timedelta(seconds=92), 60)
    assert a.try_lease("other", "server-a", START, 60)  # leases are by name
    a.close()
    b.close()


def test_a_lease_asked_for_at_once_goes_to_one(pg_url):
    stores = [_store(pg_url) for _ in range(6)]
    got: list[bool] = [False] * len(stores)
    gate = threading.Barrier(len(stores))

    def ask(i: int) -> None:
        gate.wait()
        got[i] = stores[i].try_lease("upkeep", f"server-{i}", START, 60)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(got) == 1
    for s in stores:
        s.close()


def test_two_servers_reinforcing_one_memory_both_count(pg_url):
    """Each reinforce reads the row under a lock, so grow() sees the other's stability."""
    stores = [_store(pg_url) for _ in range(2)]
    stores[0].insert_memory(_memory("m"), None)
    per_store = 25

    def grow(m: Memory, now) -> float:
        return (m.stability or 0.0) + 1.0

    def recall(s) -> None:
        for _ in range(per_store):
            s.reinforce(["m"], START, grow)

    threads = [threading.Thread(target=recall, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    m = stores[0].get_memory("m")
    assert m.recall_count == 2 * per_store and m.stability == 2 * per_store
    for s in stores:
        s.close()


def test_embeddings_come_back_as_their_float32_bytes(pg_url):
    s = _store(pg_url)
    vec = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    s.insert_memory(_memory("m"), vec)
    [(m, raw)] = list(s.iter_index_rows())
    assert m.id == "m" and raw == vec.tobytes()
    s.close()


def test_compact_rewrites_the_tables_deleted_rows_were_in(pg_server, pg_url):
    """After delete + compact the table files hold no byte of the deleted text (Postgres' WAL
    still may until it is recycled: the README says so)."""
    secret = "zqxj-" + "confidential-plan " * 4
    s = _store(pg_url)
    s.insert_memory(_memory("gone", secret), None)
    s.insert_memory(_memory("kept", "an ordinary memory"), None)
    s.delete_memories(["gone"])
    assert s.erasure_pending()
    with psycopg.connect(pg_server.admin) as con:
        datadir = con.execute("SHOW data_directory").fetchone()[0]
    path = s._rows("SELECT pg_relation_filepath('memories')")[0][0]
    s._rows("CHECKPOINT")  # the dead row reaches the table file, so the check below can fail
    assert secret.encode() in Path(datadir, path).read_bytes()
    assert s.compact()
    assert not s.erasure_pending()
    s._rows("CHECKPOINT")
    path = s._rows("SELECT pg_relation_filepath('memories')")[0][0]
    data = Path(datadir, path).read_bytes()
    assert secret.encode() not in data and b"an ordinary memory" in data
    assert s.file_size() > 0
    s.close()


def test_engram_on_postgres_reports_the_url_without_its_password(pg_url, settings, clock):
    url = pg_url.replace("postgres:@", "postgres:hunter2@", 1)
    assert url != pg_url
    e = Engram(url, settings=settings, embedder=FakeEmbedder(), clock=clock)
    try:
        assert e.path.startswith("postgresql://postgres@") and "hunter2" not in e.path
        e.store("The release train leaves on Thursdays.")
        assert e.recall("release train")[0].memory.content == "The release train leaves on Thursdays."
    finally:
        e.close()


@pytest.mark.model
def test_engram_setup_checks_and_migrates_a_database(pg_server, model_home):
    url = pg_server.new_database(migrated=False)
    env = {**os.environ, "ENGRAM_HOME": str(model_home), "HF_HUB_OFFLINE": "1"}
    env.pop("ENGRAM_DATABASE_URL", None)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "engram.setup_command", "--database-url", url, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        pg = report["postgres"]
        assert pg["migrated"] == list(range(1, len(PG_MIGRATIONS) + 1))
        assert pg["pgvector"] and pg["server_version"].startswith("18")
        assert report["database"]["via"] == "postgres" and report["selfcheck"]["ok"]
        assert report["mcp"]["env"]["ENGRAM_DATABASE_URL"] == url
        again = subprocess.run(
            [sys.executable, "-m", "engram.setup_command", "--database-url", url, "--skip-selfcheck"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert again.returncode == 0, again.stderr
        assert f"schema v{len(PG_MIGRATIONS)}" in again.stdout and "migrated" not in again.stdout
        bad = subprocess.run(
            [
                sys.executable,
                "-m",
                "engram.setup_command",
                "--database-url",
                "postgresql://bob:s3cret@127.0.0.1:1/x?connect_timeout=2",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert bad.returncode == 1 and "cannot connect to postgresql://bob@127.0.0.1:1/x" in bad.stderr
        assert "s3cret" not in bad.stderr
    finally:
        pg_server.drop(url)


def _drop_connection(s, url: str) -> None:
    """The server ends the store's connection (pg_terminate_backend from another session), as a
    restart or a dropped network would."""
    pid = s._rows("SELECT pg_backend_pid()")[0][0]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_lost_connection_fails_one_call_and_the_next_works(pg_url):
    s = _store(pg_url)
    s.insert_memory(_memory("m"), None)
    _drop_connection(s, pg_url)
    with pytest.raises(DatabaseUnavailable, match="the connection was lost"):
        s.get_memory("m")
    assert s.get_memory("m").id == "m"  # reconnected
    with s.transaction():
        s.update_memory("m", content="after")
    assert s.get_memory("m").content == "after"
    s.close()


def test_a_connection_lost_under_a_held_insert_fails_it_clearly_and_the_next_works(pg_url):
    """A memory stored outside a transaction is held and sent when its block ends; a lost
    connection there is DatabaseUnavailable too (it was an OperationalError: an internal error
    to the user, seen in the three-server restart test)."""
    s = _store(pg_url)
    s.insert_memory(_memory("m"), None)
    _drop_connection(s, pg_url)
    with pytest.raises(DatabaseUnavailable, match="the connection was lost"):
        s.insert_memory(_memory("n"), None)
    s.insert_memory(_memory("o"), None)  # reconnected
    assert s.get_memory("m").id == "m" and s.get_memory("o").id == "o"
    s.close()


def test_a_connection_lost_inside_a_transaction_commits_nothing_and_the_next_call_works(pg_url):
    s = _store(pg_url)
    s.insert_memory(_memory("m"), None)
    with pytest.raises(DatabaseUnavailable, match="the connection was lost"), s.transaction():
        s.update_memory("m", content="first half")
        _drop_connection(s, pg_url)
        s.update_memory("m", importance=0.9)
    m = s.get_memory("m")
    assert m.content != "first half" and m.importance != 0.9  # the transaction went with the connection
    s.close()


def test_the_servers_word_for_a_lost_connection_counts_before_the_socket_closes(pg_url):
    """A shutdown's FATAL (57P01) can be read while the connection still looks open: that is a
    lost connection too; a cancelled statement (57014) on a live connection is not."""
    from engram.store.pg import _lost

    with psycopg.connect(pg_url, autocommit=True) as con:
        assert not con.broken
        assert _lost(con, psycopg.errors.AdminShutdown()) and _lost(con, psycopg.errors.CannotConnectNow())
        assert _lost(con, psycopg.errors.ConnectionFailure())
        assert not _lost(con, psycopg.errors.QueryCanceled())


def test_missing_pgvector_that_cannot_be_created_is_named(pg_server):
    """A role that may not create extensions, on a database without pgvector."""
    url = pg_server.new_database(migrated=False)
    name = url.split("?", 1)[0].rsplit("/", 1)[1]
    role = f"r_{name}"
    with psycopg.connect(pg_server.admin, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
    try:
        as_role = url.replace("postgres:@", f"{role}:pw@", 1)
        with pytest.raises(
            DatabaseUnavailable,
            match=rf"{role}@.*the pgvector extension is missing and cannot be "
            r"created .*permission denied",
        ):
            _store(as_role)
    finally:
        pg_server.drop(url)
        with psycopg.connect(pg_server.admin, autocommit=True) as con:
            con.execute(f"DROP ROLE {role}")
