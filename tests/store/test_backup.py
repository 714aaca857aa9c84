"""Backups of a DuckDB store: the copy, its check, rotation, restore, and refusing damaged files.

The engine runs in this process (fake embedder, a real file); the daemon, the CLI and faults
under load are in tests/e2e/test_faults.py.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from engram import Engram, __version__
from engram.admin.backups import backup_store, daily_backup
from engram.admin.maintenance import run_maintenance
from engram.core.errors import DatabaseDamaged, SchemaTooNew
from engram.core.settings import Settings
from engram.store.backup import (
    BackupInvalid,
    check_backup,
    latest_backup,
    list_backups,
    restore,
    rotate,
)
from engram.store.schema import SCHEMA_VERSION
from tests.support.daemon import daemon_env, start_daemon, stop_daemon
from tests.support.damage import DAMAGES
from tests.support.damage import damage as spoil

pytestmark = pytest.mark.duckdb_only


def file_engram(home: Path, fake, **env) -> Engram:
    return Engram(settings=Settings.from_env({"ENGRAM_HOME": str(home), **env}), embedder=fake)


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def store_with_rows(tmp_path, fake):
    home = tmp_path / "home"
    eng = file_engram(home, fake)
    ids = [
        eng.store(f"Fact {i}: the {w} service listens on port {7000 + i}").memory.id
        for i, w in enumerate(["billing", "search", "auth", "kite", "turbine"])
    ]
    yield eng, home, ids
    eng.close()


def test_backup_is_checked_and_holds_every_row(store_with_rows):
    eng, home, ids = store_with_rows
    r = backup_store(eng)
    assert Path(r["path"]).parent == home / "backups"
    assert r["counts"]["memories"] == len(ids) and r["schema_version"] == SCHEMA_VERSION
    con = duckdb.connect(r["path"], read_only=True)
    assert {row[0] for row in con.execute("SELECT id FROM memories").fetchall()} == set(ids)
    con.close()
    assert latest_backup(eng.path) == Path(r["path"])
    eng.store("written after the backup: not in it")
    assert check_backup(r["path"])["counts"]["memories"] == len(ids)


def test_backup_to_a_named_file_and_refuses_the_store_itself(store_with_rows, tmp_path):
    eng, _, _ = store_with_rows
    r = backup_store(eng, tmp_path / "copy.duckdb")
    assert r["path"] == str(tmp_path / "copy.duckdb")
    with pytest.raises(Exception, match="is the database itself"):
        backup_store(eng, eng.path)


@pytest.mark.parametrize("damage", ["truncated", "garbled", "empty", "not-engram"])
def test_check_refuses_a_bad_backup(store_with_rows, tmp_path, damage):
    eng, _, _ = store_with_rows
    good = Path(backup_store(eng)["path"])
    bad = tmp_path / "bad.duckdb"
    data = good.read_bytes()
    if damage == "truncated":
        bad.write_bytes(data[: len(data) - 5000])
    elif damage == "garbled":
        bad.write_bytes(data[: 12288 + 262144] + os.urandom(len(data) - 12288 - 2 * 262144) + data[-262144:])
    elif damage == "empty":
        bad.write_bytes(b"")
    else:
        con = duckdb.connect(str(bad))
        con.execute("CREATE TABLE t (x int)")
        con.close()
    with pytest.raises(BackupInvalid, match=str(bad)):
        check_backup(bad)


def test_restore_keeps_the_current_file_and_refuses_a_bad_backup(store_with_rows, tmp_path, fake):
    eng, home, ids = store_with_rows
    good = backup_store(eng)["path"]
    eng.store("a memory the backup does not hold")
    eng.close()
    db = home / "memories.duckdb"
    current = digest(db)
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(Path(good).read_bytes()[:-3000])
    with pytest.raises(BackupInvalid):
        restore(bad, db, datetime.now(UTC))
    assert digest(db) == current  # a bad backup changes nothing
    r = restore(good, db, datetime.now(UTC))
    assert Path(r["previous"]).exists() and digest(Path(r["previous"])) == current
    back = file_engram(home, fake)
    assert back.index_status()["rows"] == len(ids)
    back.close()


def test_rotation_keeps_the_newest_dailies_and_never_a_manual_backup(tmp_path):
    db = tmp_path / "memories.duckdb"
    folder = tmp_path / "backups"
    folder.mkdir()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    names = [f"daily-{(t0 + timedelta(days=d)).strftime('%Y%m%dT%H%M%S')}000Z.duckdb" for d in range(5)]
    for n in [*names, "memories-20250101T000000000Z.duckdb", "notes.txt"]:
        (folder / n).write_bytes(b"x")
    removed = rotate(db, 2)
    assert sorted(Path(p).name for p in removed) == sorted(names[:3])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*names[3:], "memories-20250101T000000000Z.duckdb", "notes.txt"]
    )


def test_maintenance_takes_one_daily_backup_a_day(tmp_path, fake):
    eng = file_engram(tmp_path / "home", fake, ENGRAM_BACKUP_KEEP="2")
    eng.store("the deploy script lives in tools/deploy.sh")
    first = run_maintenance(eng)["backup"]
    assert first and Path(first["path"]).name.startswith("daily-")
    assert run_maintenance(eng)["backup"] is None  # less than a day since the last one
    eng.close()
    off = file_engram(tmp_path / "off", fake, ENGRAM_BACKUP_KEEP="0")
    assert daily_backup(off, 0) is None and run_maintenance(off)["backup"] is None
    assert list_backups(off.path) == []
    off.close()


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_store_is_refused_untouched_naming_the_backup(store_with_rows, fake, damage):
    eng, home, _ = store_with_rows
    backup = backup_store(eng)["path"]
    eng.close()
    db = home / "memories.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    free = con.execute("SELECT free_blocks FROM pragma_database_size()").fetchone()[0]
    con.close()
    db.write_bytes(spoil(db.read_bytes(), damage, free))
    before, files = digest(db), sorted(p.name for p in home.iterdir())
    with pytest.raises(DatabaseDamaged) as e:
        file_engram(home, fake)
    assert str(db) in str(e.value) and backup in str(e.value) and "engram restore" in str(e.value)
    assert digest(db) == before and sorted(p.name for p in home.iterdir()) == files


def test_a_newer_schema_names_both_versions_and_is_left_alone(tmp_path, fake):
    eng = file_engram(tmp_path / "home", fake)
    eng.close()
    db = tmp_path / "home" / "memories.duckdb"
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version VALUES (?, 'from the future', now())", [SCHEMA_VERSION + 1])
    con.close()
    before = digest(db)
    with pytest.raises(SchemaTooNew) as e:
        file_engram(tmp_path / "home", fake)
    msg = str(e.value)
    assert f"v{SCHEMA_VERSION + 1}" in msg and f"v{SCHEMA_VERSION}" in msg and __version__ in msg
    assert "Upgrade engram" in msg
    assert digest(db) == before


def test_cli_backup_and_restore(tmp_path):
    """`engram backup` through a daemon (the fake one), then `engram restore` stops it and swaps."""
    home = tmp_path / "home"
    start_daemon(home)
    try:
        env = daemon_env(home)
        run = lambda *a: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "engram", "--home", str(home), *a],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run("remember", "the staging database is on port 5433").returncode == 0
        r = run("backup")
        assert r.returncode == 0, r.stderr
        path = r.stdout.split()[1]
        assert Path(path).is_file() and "memories 1" in r.stdout
        assert run("remember", "written after the backup").returncode == 0
        r = run("restore", path)
        assert r.returncode == 0, r.stderr
        assert "previous file kept" in r.stdout
        con = duckdb.connect(str(home / "memories.duckdb"), read_only=True)
        assert [x[0] for x in con.execute("SELECT content FROM memories").fetchall()] == [
            "the staging database is on port 5433"
        ]
        con.close()
        bad = run("restore", str(tmp_path / "nope.duckdb"))
        assert bad.returncode == 1 and "no such backup file" in bad.stderr
    finally:
        stop_daemon(home)


def test_setup_reports_the_latest_backup(store_with_rows):
    from engram.setup_command import _describe, backup_status

    eng, home, _ = store_with_rows
    settings = Settings.from_env({"ENGRAM_HOME": str(home)})
    assert backup_status(settings)["latest"] is None
    path = backup_store(eng)["path"]
    status = backup_status(settings)
    assert status["latest"] == path and status["keep"] == 7 and status["age_hours"] < 1
    pg = backup_status(
        Settings.from_env({"ENGRAM_HOME": str(home), "ENGRAM_DATABASE_URL": "postgresql://u@localhost/engram"})
    )
    assert "pg_dump" in pg["advice"]
    report = {
        "model": {"name": "m", "source": "s"},
        "extensions": [],
        "selfcheck": None,
        "backups": status,
        "database": {"path": eng.path, "created": False, "schema_version": SCHEMA_VERSION},
        "mcp": {"claude_code": "x", "hooks": "y", "json": {}},
    }
    assert f"backups     latest {path}" in _describe(report)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs for the store needs root")
def test_a_checkpoint_that_finds_the_disk_full_reopens_the_store(tmp_path):
    """DuckDB invalidates the whole database when a checkpoint cannot be written; the store
    reopens the file, so reads go on and writes resume once there is space."""
    import shutil

    from engram.core.errors import DiskFull
    from engram.store.db import Store

    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], check=True)
    try:
        st = Store(mnt / "x.duckdb", datetime.now(UTC))
        st.execute("CREATE TABLE big (s VARCHAR)")
        st.execute("INSERT INTO big SELECT repeat('x', 1000) || i FROM range(2000) r(i)")
        (mnt / "ballast").write_bytes(b"\0" * (shutil.disk_usage(mnt).free - 2**20))
        with pytest.raises(DiskFull, match="may or may not be stored"):
            st.flush_wal()
        assert st.execute("SELECT count(*) FROM big").fetchone() == (2000,)
        (mnt / "ballast").unlink()
        st.execute("INSERT INTO big VALUES ('after')")
        st.flush_wal()
        assert st.execute("SELECT count(*) FROM big").fetchone() == (2001,)
        st.close()
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
