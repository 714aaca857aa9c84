"""The daemon's life cycle: it exits when no client came for ENGRAM_IDLE_EXIT, not while one is
connected; maintenance that fell due while no daemon ran runs at the next start."""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from engram import Engram
from engram.admin.scheduler import CATCH_UP_DELAY, FILL_JOB_ID, META_NEXT_DUE, MaintenanceScheduler
from engram.server.daemon import Daemon
from engram.server.rpc_client import RpcClient
from tests.conftest import wait_until


@pytest.fixture
def short_settings(settings):
    # Unix socket paths are limited to ~107 bytes; tmp_path can be longer.
    home = Path(tempfile.mkdtemp(prefix="egi", dir="/tmp"))
    yield replace(settings, home=home, idle_exit_s=0.3)
    shutil.rmtree(home, ignore_errors=True)


def test_the_daemon_exits_when_idle_and_not_while_a_client_is_connected(short_settings, fake, clock):
    eng = Engram(":memory:", settings=short_settings, embedder=fake, clock=clock)
    daemon = Daemon(short_settings, engram=eng)
    daemon.start()
    waiting = threading.Thread(target=daemon.wait)
    client = RpcClient(short_settings.socket_path, client="test")
    try:
        client.call("health")  # connected before wait() starts counting
        waiting.start()
        # Held open far past the idle time (wait() checks about four times per idle period).
        waiting.join(1.5)
        assert waiting.is_alive() and daemon.idle_for() == 0.0
        assert client.call("store_memory", content="Still served after the idle time")["action"] == "new"
        client.close()
        waiting.join(30)
        assert not waiting.is_alive() and daemon.idle_exit
    finally:
        client.close()
        daemon.stop_requested.set()
        if waiting.is_alive():
            waiting.join(30)
        daemon.close()
    assert not short_settings.socket_path.exists()


def test_idle_exit_0_means_never(settings):
    from engram.core.settings import Settings

    assert Settings.from_env({}).idle_exit_s == 900.0
    assert Settings.from_env({"ENGRAM_IDLE_EXIT": "0"}).idle_exit_s == 0.0
    with pytest.raises(ValueError, match="ENGRAM_IDLE_EXIT"):
        Settings.from_env({"ENGRAM_IDLE_EXIT": "-5"})
    with pytest.raises(ValueError, match="ENGRAM_IDLE_EXIT='soon' is not a number"):
        Settings.from_env({"ENGRAM_IDLE_EXIT": "soon"})


def test_a_run_that_fell_due_while_no_daemon_ran_runs_at_the_next_start(eng, clock):
    first = MaintenanceScheduler(eng, clock=clock)
    first.start()
    due = datetime.fromisoformat(eng.store_db.get_meta(META_NEXT_DUE))
    assert due == clock.now() + first.interval
    first.shutdown()

    clock.advance(hours=6)  # the daemon exited when idle and a new one starts before the run is due
    second = MaintenanceScheduler(eng, clock=clock)
    second.start()
    assert second.next_run() == due  # not restarted: a daemon that comes and goes still gets runs
    second.shutdown()

    clock.advance(days=2)  # no daemon while it fell due
    third = MaintenanceScheduler(eng, clock=clock)
    third.start()
    assert third.next_run() == clock.now() + CATCH_UP_DELAY
    assert third.tick() == []
    clock.advance(seconds=CATCH_UP_DELAY.total_seconds())
    (report,) = third.tick()
    assert report["applied"] and third.status()["runs"] == 1
    assert datetime.fromisoformat(eng.store_db.get_meta(META_NEXT_DUE)) == clock.now() + third.interval


def test_an_unreadable_change_feed_is_logged_once_and_its_return_once(short_settings, fake, clock, monkeypatch, caplog):
    # A database away for a while must not write a warning every half second.
    import engram.server.daemon as daemon_mod

    monkeypatch.setattr(daemon_mod, "FRESH_EVERY_S", 0.01)
    eng = Engram(":memory:", settings=short_settings, embedder=fake, clock=clock)
    calls = {"n": 0}

    def catch_up(force: bool = False) -> int:
        calls["n"] += 1
        if calls["n"] <= 20:
            raise ConnectionError("the connection is closed")
        return 0

    monkeypatch.setattr(eng, "catch_up", catch_up)
    daemon = Daemon(short_settings, engram=eng)
    with caplog.at_level("INFO", logger="engram.server.daemon"):
        daemon.start()
        try:
            # The feed is back once the daemon has read it again after the failures and said so.
            wait_until(
                lambda: calls["n"] > 21 and any("readable again" in r.getMessage() for r in caplog.records),
                timeout=10,
                every=0.01,
                what="the change feed's return to be logged",
            )
        finally:
            daemon.stop_requested.set()
            daemon.close()
    lines = [r.getMessage() for r in caplog.records if "change feed" in r.getMessage()]
    assert calls["n"] > 21
    assert lines == [
        "could not read the change feed: ConnectionError: the connection is closed (retrying every 0.01 s)",
        "the change feed is readable again",
    ]


def test_a_captured_transcripts_turns_get_their_token_vectors_from_the_daemon_soon_after(short_settings, fake):
    """A capture stores its turns as a bulk write (the token vectors left to the background fill):
    the daemon's scheduler fills them in a moment after, with no recall and no maintenance run."""
    settings = replace(short_settings, late_interaction=True, idle_exit_s=0.0)
    eng = Engram(":memory:", settings=settings, embedder=fake)  # the system clock: the scheduler runs
    daemon = Daemon(settings, engram=eng)
    daemon.start()
    turns = [
        {"request": "how do we run the tests?", "answer": "With pytest -n 2 from the repository root."},
        {"request": "and the linter?", "answer": "ruff check . then ruff format ."},
        {"request": "which Python?", "answer": "3.11, from the project's own venv."},
    ]
    jobs = daemon.scheduler._scheduler
    try:
        # The fill a daemon runs a second after it starts has run (and found nothing to fill).
        wait_until(lambda: jobs.get_job(FILL_JOB_ID) is None, what="the daemon's start-up fill")
        with RpcClient(settings.socket_path, session_id="s1", client="test") as c:
            assert c.call("session_capture", episodes=turns, client="claude-code")["episodes"] == 3

            def read() -> int:
                return c.call("memory_stats")["late_interaction"]["turns_read"]

            assert jobs.get_job(FILL_JOB_ID) is not None or read() == 3  # the capture asked for the fill

            wait_until(lambda: read() == 3, timeout=120, what="the daemon's fill of the captured turns")
            assert daemon.scheduler.runs == 0  # filled without a maintenance run
    finally:
        daemon.stop_requested.set()
        daemon.close()
