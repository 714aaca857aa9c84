"""Concurrent agents: stdio MCP, REST and streamable-HTTP MCP client processes at once on one daemon.

Each client stores, recalls its own writes, updates a shared task's metadata and writes handoffs on
it. Zero errors, zero lost writes, and the task ends holding every client's last update. The daemon
runs the fake embedder; benchmarks/reliability.py runs the full size with the real model.
"""

from __future__ import annotations

import pytest

from benchmarks.reliability import concurrent_run
from tests.support.daemon import stop_daemon


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop_daemon(home)


def check(out: dict, clients: int, ops: int) -> None:
    assert out["errors"] == []
    assert out["lost_writes"] == 0
    assert out["inconsistent_task_metadata"] == []
    assert out["operations"] == clients * ops
    assert out["kinds"] == {"stdio": 2, "rest": 2, "mcp-http": 1} if clients == 5 else True
    assert out["stored"] > 0 and out["handoffs"] > 0
    assert out["index_fresh"] is True


def test_five_mixed_clients_lose_nothing(home):
    check(concurrent_run(home, clients=5, ops=60), 5, 60)


@pytest.mark.slow
def test_five_mixed_clients_thousand_ops_each(home):
    check(concurrent_run(home, clients=5, ops=1000), 5, 1000)
