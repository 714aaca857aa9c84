"""Projects through real processes: the CLI as a command and the stdio MCP server as a subprocess,
each started in one of two git repositories or in a worktree of the first (docs/projects.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from engram.core.project import detect_project
from tests.conftest import git, make_repo

pytestmark = [pytest.mark.model, pytest.mark.duckdb_only]

TIMEOUT = 180


@pytest.fixture
def places(tmp_path):
    """Repository A (no origin: its path is the project), repository B (an origin), a worktree of
    A on another branch, and a directory outside any repository."""
    a = make_repo(tmp_path / "alpha", None)
    b = make_repo(tmp_path / "beta", "git@github.com:me/beta.git")
    wt = tmp_path / "alpha-feature"
    git(a, "worktree", "add", "-q", "-b", "feature", str(wt))
    outside = tmp_path / "scratch"
    outside.mkdir()
    return {"a": a, "b": b, "wt": wt, "outside": outside}


def env_for(home: Path) -> dict[str, str]:
    e = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1", "ENGRAM_TORCH_THREADS": "1"}
    for k in ("ENGRAM_PROJECT", "ENGRAM_DATABASE_URL", "GIT_DIR", "GIT_WORK_TREE"):
        e.pop(k, None)
    return e


def cli(home: Path, cwd: Path, *argv: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "engram.cli", "--json", *argv],
        capture_output=True,
        text=True,
        env=env_for(home),
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stdio(home: Path, cwd: Path) -> Client:
    return Client(
        StdioServerParameters(command=sys.executable, args=["-m", "engram"], env=env_for(home), cwd=str(cwd)),
        read_timeout_seconds=TIMEOUT,
    )


async def ok(client: Client, tool: str, args: dict | None = None) -> dict:
    r = await client.call_tool(tool, args or {})
    assert not r.is_error, f"{tool} failed: {r.content[0].text}"
    return r.structured_content


@pytest.mark.anyio
async def test_two_repositories_and_a_worktree_through_cli_and_stdio(model_home, places):
    home = model_home
    a, b, wt, outside = places["a"], places["b"], places["wt"], places["outside"]
    assert detect_project(wt, {}).id == detect_project(a, {}).id == str(a.resolve())
    assert detect_project(b, {}).id == "github.com/me/beta"

    # Written through the CLI, as a command run in each place.
    cli(home, a, "remember", "Alpha builds its frontend with Vite and pnpm.")
    cli(home, b, "remember", "Beta builds its frontend with webpack and yarn.")
    cli(home, a, "remember", "The user likes every frontend build to print its duration.", "--scope", "global")
    cli(home, outside, "remember", "Frontend builds run on the user's laptop, never on the CI runner at night.")
    cli(home, a, "task", "create", "Alpha: migrate the frontend build to Vite 6")
    cli(home, b, "task", "create", "Beta: cache the frontend build in CI")
    cli(home, outside, "task", "create", "Renew the frontend build certificates")

    # Written through the stdio MCP server, started in each place as a client would start it.
    async with stdio(home, wt) as c:
        await ok(c, "store_memory", {"content": "Alpha's frontend build output goes to dist/alpha."})
        await ok(c, "create_task", {"name": "Alpha: split the frontend build per route"})
    async with stdio(home, b) as c:
        await ok(c, "store_memory", {"content": "Beta's frontend build output goes to public/build."})
        await ok(c, "create_task", {"name": "Beta: drop the legacy frontend build", "scope": "global"})

    alpha = {"Alpha builds its frontend with Vite and pnpm.", "Alpha's frontend build output goes to dist/alpha."}
    beta = {"Beta builds its frontend with webpack and yarn.", "Beta's frontend build output goes to public/build."}
    glob = {
        "The user likes every frontend build to print its duration.",
        "Frontend builds run on the user's laptop, never on the CI runner at night.",
    }
    alpha_tasks = {"Alpha: migrate the frontend build to Vite 6", "Alpha: split the frontend build per route"}
    beta_tasks = {"Beta: cache the frontend build in CI"}
    glob_tasks = {"Renew the frontend build certificates", "Beta: drop the legacy frontend build"}
    query = "how is the frontend build done"

    def cli_seen(where: Path, *extra: str) -> tuple[set[str], set[str]]:
        mems = {m["content"] for m in cli(home, where, "recall", query, "--limit", "20", *extra)["memories"]}
        tasks = {t["name"] for t in cli(home, where, "tasks", *extra)["tasks"]}
        return mems, tasks

    # Each place sees its project's rows plus the global ones; the worktree is repository A.
    assert cli_seen(a) == (alpha | glob, alpha_tasks | glob_tasks)
    assert cli_seen(wt) == (alpha | glob, alpha_tasks | glob_tasks)
    assert cli_seen(b) == (beta | glob, beta_tasks | glob_tasks)
    assert cli_seen(outside) == (glob, glob_tasks)
    everything = (alpha | beta | glob, alpha_tasks | beta_tasks | glob_tasks)
    for where in (a, b, outside):
        assert cli_seen(where, "--all-projects") == everything
    block = cli(home, b, "context", query)["context"]
    assert "webpack" in block and "duration" in block and "Vite" not in block
    assert "Vite" in cli(home, b, "context", query, "--all-projects")["context"]

    async def mcp_seen(c: Client, **extra) -> tuple[set[str], set[str]]:
        r = await ok(c, "recall_memory", {"query": query, "limit": 20, **extra})
        t = await ok(c, "list_tasks", extra)
        return {m["content"] for m in r["memories"]}, {x["name"] for x in t["tasks"]}

    async with stdio(home, b) as c:  # the global memory written in A is seen in B
        assert await mcp_seen(c) == (beta | glob, beta_tasks | glob_tasks)
        assert await mcp_seen(c, all_projects=True) == everything
    async with stdio(home, wt) as c:
        assert await mcp_seen(c) == (alpha | glob, alpha_tasks | glob_tasks)
    async with stdio(home, outside) as c:
        assert await mcp_seen(c) == (glob, glob_tasks)

    projects = cli(home, outside, "projects")
    assert {p["id"]: (p["memories"], p["tasks"]) for p in projects["projects"]} == {
        str(a.resolve()): (2, 2),
        "github.com/me/beta": (2, 1),
    }
    assert projects["current"] is None

    # The sessions recorded where they worked: the worktree's is A's project on its own branch.
    subprocess.run(
        [sys.executable, "-m", "engram.cli", "stop"],
        env=env_for(home),
        cwd=outside,
        check=True,
        capture_output=True,
        timeout=120,
    )
    con = duckdb.connect(str(home / "memories.duckdb"), read_only=True)
    try:
        seen = set(con.execute("SELECT client, project, branch FROM sessions").fetchall())
    finally:
        con.close()
    assert {
        ("stdio", str(a.resolve()), "feature"),
        ("stdio", "github.com/me/beta", "main"),
        ("cli", str(a.resolve()), "main"),
        ("cli", None, None),
        ("stdio", None, None),
    } <= seen


@pytest.mark.anyio
async def test_engram_project_overrides_the_directory(model_home, places):
    home, a, b = model_home, places["a"], places["b"]
    e = env_for(home)
    e["ENGRAM_PROJECT"] = "github.com/me/beta"
    r = subprocess.run(
        [sys.executable, "-m", "engram.cli", "--json", "remember", "Beta ships on Thursdays."],
        capture_output=True,
        text=True,
        env=e,
        cwd=a,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert {m["content"] for m in cli(home, b, "recall", "when does beta ship")["memories"]} == {
        "Beta ships on Thursdays."
    }
    assert cli(home, a, "recall", "when does beta ship")["memories"] == []
