"""Claims between real processes: two `python -m engram` stdio servers (the MCP SDK's stdio
client) race for tasks, a killed or frozen holder's claim lapses, and the CLI claims and
releases. The race and lapse drivers are benchmarks/claims_race.py's, run for fewer rounds."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest

from benchmarks import claims_race
from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill

pytestmark = [pytest.mark.model, pytest.mark.anyio, pytest.mark.duckdb_only]

CLAIM_TIMEOUT = 3.0  # ENGRAM_CLAIM_TIMEOUT of the servers: a frozen holder lapses after this


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One ENGRAM_HOME for the module (one daemon: the model loads once); stopped at the end."""
    home = tmp_path_factory.mktemp("claims") / "home"
    yield home
    stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))


async def test_two_stdio_servers_racing_for_claims_get_one_winner_each_round(home):
    r = await claims_race.run(home, rounds=15, claim_timeout=CLAIM_TIMEOUT)
    assert r["one_winner"] == r["rounds"] == 15
    assert r["loser_named_winner"] == 15
    assert "(stdio) since " in r["sample_error"] and "last heard" in r["sample_error"]
    # SIGKILL: the daemon sees the connection drop and the session ends as interrupted at once.
    assert r["lapse_after_sigkill_s"] is not None and r["lapse_after_sigkill_s"] < CLAIM_TIMEOUT
    # SIGSTOP: the connection stays open; the claim lapses after the claim timeout of silence.
    frozen = r["lapse_after_sigstop_s"]
    assert frozen is not None and CLAIM_TIMEOUT * 0.5 <= frozen <= CLAIM_TIMEOUT + 5


async def test_an_idle_but_live_holder_keeps_its_claim_past_the_timeout(home):
    """The stdio server's heartbeats keep the session heard from while its agent works without
    calling a tool: after three claim timeouts of no calls the task is still held."""
    async with (
        claims_race.server(home, CLAIM_TIMEOUT) as (holder, _),
        claims_race.server(home, CLAIM_TIMEOUT) as (other, _),
    ):
        t = (await holder.call_tool("create_task", {"name": "Long think"})).structured_content["task_id"]
        assert (await claims_race.claim(holder, t))[0]
        await anyio.sleep(CLAIM_TIMEOUT * 3)  # real time: the heartbeats are what is under test
        won, error = await claims_race.claim(other, t)
        assert not won and "held by session" in error


async def test_take_over_is_told_to_the_first_session_and_loses_nothing(home):
    async with claims_race.server(home, CLAIM_TIMEOUT) as (a, _), claims_race.server(home, CLAIM_TIMEOUT) as (b, _):
        t = (await a.call_tool("create_task", {"name": "Shared task"})).structured_content["task_id"]
        await a.call_tool("track_progress", {"feature": "step one", "status": "in_progress", "task_id": t})
        held = (await b.call_tool("list_tasks", {})).structured_content["tasks"][0]["held_by"]
        assert held["client"] == "stdio" and held["this_session"] is False
        taken = await b.call_tool("claim_task", {"task_id": t, "take_over": True})
        assert not taken.is_error and taken.structured_content["taken_over"]["session_id"] == held["session_id"]
        r = (
            await a.call_tool("track_progress", {"feature": "step one", "status": "done", "task_id": t})
        ).structured_content
        assert r["claim_notices"][0]["task_id"] == t and "taken over" in r["claim_notices"][0]["message"]
        assert r["claim"]["claimed"] is False  # kept, and a is told who holds the task now
        view = (await b.call_tool("get_task", {"task_id": t})).structured_content
        assert [p["progress"]["status"] for p in view["progress"]] == ["in_progress", "done"]
        resumed = (await b.call_tool("resume_task", {"task_id": t})).structured_content
        assert "Held by: this session" in resumed["context"]
        assert (await b.call_tool("release_task", {"task_id": t})).structured_content["released"] is True
        assert (await a.call_tool("get_task", {"task_id": t})).structured_content["held_by"] is None


def engram(home, *args: str) -> subprocess.CompletedProcess:
    env = claims_race.engram_env(home, CLAIM_TIMEOUT)
    return subprocess.run(
        [sys.executable, "-m", "engram", *args], env=env, capture_output=True, text=True, timeout=claims_race.TIMEOUT
    )


async def test_the_cli_shows_the_holder_and_claims_releases_and_takes_over(home):
    async with claims_race.server(home, CLAIM_TIMEOUT) as (a, _):
        t = (await a.call_tool("create_task", {"name": "CLI visible"})).structured_content["task_id"]
        mine = (await a.call_tool("claim_task", {"task_id": t})).structured_content["claim"]["session_id"]
        shown = engram(home, "tasks")
        assert shown.returncode == 0 and f"held by session {mine} (stdio)" in shown.stdout
        refused = engram(home, "task", "claim", t)
        assert refused.returncode != 0 and f"held by session {mine} (stdio)" in refused.stderr
        taken = engram(home, "--session", "human-1", "task", "claim", t, "--take-over")
        assert taken.returncode == 0 and "claimed" in taken.stdout and mine in taken.stdout
        notices = (await a.call_tool("memory_stats", {})).structured_content["claim_notices"]
        assert notices[0]["taken_over_by"] == "human-1"
        # The CLI's session ended with its command: the task is free again.
        assert (await a.call_tool("claim_task", {"task_id": t})).structured_content["claimed"]
        released = engram(home, "--session", "other", "task", "release", t)
        assert released.returncode != 0 and "only its holder releases it" in released.stderr
        out = json.loads(engram(home, "--json", "task", "show", t).stdout)
        assert out["held_by"]["session_id"] == mine
