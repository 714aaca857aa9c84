"""Tiers, prune and doctor as a user runs them: the `engram` command, through a real daemon with
the real model (docs/lifecycle.md)."""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.server.test_cli import run_engram

pytestmark = pytest.mark.model


def test_tier_prune_and_doctor_as_commands(model_home):
    user = model_home / "user"  # the clients' settings files are looked for here, not in the machine's home
    user.mkdir()
    env = {"HOME": str(user), "CLAUDE_CONFIG_DIR": "", "CODEX_HOME": "", "GEMINI_CLI_HOME": ""}
    r = run_engram(
        model_home, "--json", "remember", "--tier", "working", "--ttl", "2", "Scratch: bisect points at 41", env=env
    )
    assert r.returncode == 0, r.stderr
    mid = json.loads(r.stdout)["memory_id"]
    r = run_engram(model_home, "show", mid, env=env)
    assert r.returncode == 0 and f"{mid} [fact, working]" in r.stdout and "expires " in r.stdout, r.stdout
    r = run_engram(model_home, "tier", mid, "procedural", env=env)
    assert r.returncode == 0 and r.stdout.strip() == f"{mid}: moved from working to procedural"
    r = run_engram(model_home, "tier", mid, "forever", env=env)
    assert r.returncode == 2 and "forever" in r.stderr  # refused by the parser, nothing sent
    r = run_engram(model_home, "prune", "--keep", "0", env=env)
    assert r.returncode == 0 and "would remove 1" in r.stdout and "dry run: nothing changed" in r.stdout
    r = run_engram(model_home, "--json", "show", mid, env=env)
    assert json.loads(r.stdout)["tier"] == "procedural"

    r = run_engram(model_home, "--json", "doctor", env=env)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"] is True, r.stdout
    assert "daemon" in report["checks"] and "hooks" in report["checks"]

    # A fault planted in the file while no daemon holds it: an edge to a memory that is gone.
    assert run_engram(model_home, "stop", env=env).returncode == 0
    with duckdb.connect(str(model_home / "memories.duckdb")) as con:
        con.execute("INSERT INTO edges VALUES (?, 'gone0000gone0000', 0.9, 'default')", [mid])
    r = run_engram(model_home, "doctor", env=env)
    assert r.returncode == 1, r.stdout
    assert "ERROR [orphans] 1 edges rows belong to memories that are no longer stored" in r.stdout
    assert "fix: " in r.stdout
    assert run_engram(model_home, "stop", env=env).returncode == 0
