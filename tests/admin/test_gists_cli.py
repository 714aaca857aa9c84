"""Gists through real processes: captures sent to the daemon as the hooks send them, then
`engram consolidate` (dry run, --apply, again) and `engram stats` as commands (docs/lifecycle.md#gists)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram import Settings
from engram.server.backend import daemon_command
from engram.server.rpc_client import RpcClient

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

PROJECT = "example.com/shop"
ANSWER = (
    "The checkout test fails because the clock in tests/test_checkout.py is not frozen. "
    "Freeze the clock with the frozen_clock fixture before computing the total. {extra}"
)
ASKED = [
    ("why does test_checkout fail on CI again", "I ran it twice to be sure."),
    ("test_checkout is red once more, what is wrong", "Nothing else changed in the cart."),
    ("the checkout test broke again today", "The fixture lives in conftest."),
]


def env_for(home: Path) -> dict[str, str]:
    e = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", "ENGRAM_TORCH_THREADS": "1"}
    for k in ("ENGRAM_PROJECT", "ENGRAM_DATABASE_URL", "ENGRAM_GISTS"):
        e.pop(k, None)
    return e


def engram(home: Path, cwd: Path, *argv: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "engram.cli", *argv],
        capture_output=True,
        text=True,
        env=env_for(home),
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_engram_consolidate_writes_one_gist_once(model_home, tmp_path, monkeypatch):
    home = model_home
    for k, v in env_for(home).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("ENGRAM_DATABASE_URL", raising=False)
    settings = Settings.from_env(env_for(home))
    for i, (request, extra) in enumerate(ASKED):
        rpc = RpcClient(
            settings.socket_path,
            spawn=daemon_command(settings),
            session_id=f"session-{i}",
            client="claude-code",
            user_id=settings.user_id,
            store=settings.store,
            project=PROJECT,
            timeout=120,
            spawn_timeout=180,
        )
        with rpc:
            got = rpc.call("session_capture", episodes=[{"request": request, "answer": ANSWER.format(extra=extra)}])
        assert got["episodes"] == 1, got

    dry = json.loads(engram(home, tmp_path, "--json", "consolidate"))
    [planned] = dry["gists"]
    assert planned["action"] == "new" and planned["into"] is None and planned["sources"] == 3
    assert json.loads(engram(home, tmp_path, "--json", "stats"))["gists"] == 0  # the dry run wrote nothing

    text = engram(home, tmp_path, "consolidate", "--apply")
    assert "wrote or updated 1 gist" in text
    assert "- Freeze the clock with the frozen_clock fixture before computing the total. (3 of 3)" in text
    stats = json.loads(engram(home, tmp_path, "--json", "stats"))
    assert stats["gists"] == 1 and stats["totals"]["gists_written"] == 1
    assert "gists" in engram(home, tmp_path, "stats")

    again = json.loads(engram(home, tmp_path, "--json", "consolidate", "--apply"))
    assert again["gists"] == []
    assert json.loads(engram(home, tmp_path, "--json", "stats"))["gists"] == 1
