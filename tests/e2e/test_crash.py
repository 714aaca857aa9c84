"""Crash safety: the daemon is killed with SIGKILL mid-stream, again and again.

Three clients stream stores, updates, handoffs, task updates and forgets over the daemon's
socket; the daemon (engram's own Daemon class, fake embedder) is killed once a random number
of operations has been acknowledged, with more in flight. After each kill the file must open,
hold every acknowledged write and no acknowledged forget, show nothing half-written, and its
rebuilt indexes must agree with the rows (see benchmarks.reliability.verify_after_crash).
"""

from __future__ import annotations

import pytest

from benchmarks.reliability import crash_run
from tests.support.daemon import stop_daemon


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop_daemon(home)


def check(out: dict, kills: int) -> None:
    assert out["kills"] == kills
    assert out["refusals"] == {}  # no operation failed other than by the kill itself
    # Every kill landed mid-stream, with acknowledged work before it.
    assert out["acknowledged_ops"] >= 5 * kills
    assert out["memories"] > 0 and out["handoffs"] > 0 and out["forgotten"] > 0


def test_five_kills_lose_no_acknowledged_write(home):
    check(crash_run(home, kills=5, seed=7), 5)


@pytest.mark.slow
def test_fifty_kills_lose_no_acknowledged_write(home):
    check(crash_run(home, kills=50, seed=11), 50)
