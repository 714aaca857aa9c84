"""`python -m engram` as a real stdio MCP server: the SDK's stdio client, the daemon it starts, sessions."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import anyio
import pytest

from engram.server.mcp import TOOL_NAMES
from tests.stdio_support import DATABASES, child_pids, ok, stdio, stop_engram_daemon

pytestmark = [pytest.mark.model, pytest.mark.anyio]


@pytest.fixture(scope="module")
def home(tmp_path_factory, request, backend):
    """One ENGRAM_HOME (so one daemon, one store) for the module; the daemon is stopped at the end."""
    home = tmp_path_factory.mktemp("engram-home")
    pg = request.getfixturevalue("pg_server") if backend == "postgres" else None
    if pg is not None:
        DATABASES[home] = pg.new_database()
    yield home
    stop_engram_daemon(home)
    if pg is not None:
        pg.drop(DATABASES.pop(home))


async def test_stdio_server_lists_and_runs_every_tool(home):
    async with stdio(home, "user-every-tool") as c:
        assert c.server_info.name == "engram"
        tools = (await c.list_tools()).tools
        assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)

        task = await ok(c, "create_task", {"name": "Set up release pipeline"})
        tid = task["task_id"]
        stored = await ok(c, "store_memory", {"content": "Releases are tagged vX.Y.Z and built by CI.", "task_id": tid})
        assert stored["action"] == "new"
        rec = await ok(c, "recall_memory", {"query": "how are releases tagged"})
        assert rec["memories"][0]["id"] == stored["memory_id"]
        await ok(
            c,
            "update_memory",
            {"memory_id": stored["memory_id"], "content": "Releases are tagged vX.Y.Z and published by CI."},
        )
        await ok(
            c, "track_progress", {"feature": "release workflow", "status": "done", "completion": 1.0, "task_id": tid}
        )
        await ok(c, "track_failure", {"error": "tag push rejected", "component": "ci", "task_id": tid})
        await ok(
            c,
            "session_handoff",
            {"summary": "Release pipeline works", "next_steps": ["sign artifacts"], "task_id": tid},
        )
        view = await ok(c, "get_task", {"task_id": tid})
        assert len(view["timeline"]) == 4
        ctx = await ok(c, "get_context", {"query": "release pipeline"})
        assert "Release pipeline works" in ctx["context"]
        assert (await ok(c, "update_task", {"task_id": tid, "status": "done"}))["status"] == "done"
        assert (await ok(c, "session_outcome", {"outcome": "success"}))["outcome"] == "success"
        assert isinstance(await ok(c, "memory_stats"), dict)
        assert isinstance(await ok(c, "consolidate_memory"), dict)
        gone = await ok(c, "forget_memory", {"memory_id": stored["memory_id"]})
        assert gone["deleted"] == [stored["memory_id"]]

        # Refusals come back as tool errors and the server keeps going.
        r = await c.call_tool("store_memory", {"content": "x" * 100_001})
        assert r.is_error and "limit is 100,000" in r.content[0].text
        r = await c.call_tool("get_task", {"task_id": "t-missing"})
        assert r.is_error and "no task with id 't-missing'" in r.content[0].text
        assert (await ok(c, "recall_memory", {"query": "releases"}))["memories"] is not None


async def test_second_client_process_sees_the_first_ones_memory(home):
    token = f"kiwi{uuid.uuid4().hex[:8]}"
    async with stdio(home, "user-shared") as a:
        first = await ok(a, "store_memory", {"content": f"The staging cluster is called {token}."})
    # a's process has exited (its stdin closed): a clean end, so nobody reports it as interrupted.
    async with stdio(home, "user-shared") as b:
        rec = await ok(b, "recall_memory", {"query": f"what is the staging cluster called {token}"})
        assert rec["memories"][0]["id"] == first["memory_id"]
        assert token in rec["memories"][0]["content"]
        assert rec["interrupted_sessions"] == []


async def test_killed_client_is_reported_interrupted_once(home):
    user = "user-killed"
    async with stdio(home, user) as b:
        await ok(b, "memory_stats")  # b's session exists before a dies
        before = child_pids()
        a = stdio(home, user)
        await a.__aenter__()
        (a_pid,) = child_pids() - before
        task = await ok(a, "create_task", {"name": "Rotate the API keys"})
        await ok(
            a,
            "track_progress",
            {"feature": "rotate staging keys", "status": "in_progress", "completion": 0.3, "task_id": task["task_id"]},
        )

        os.kill(a_pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await a.__aexit__(None, None, None)

        # The daemon notices the dropped connection on its own thread; poll until it has.
        reported: list[dict] = []
        with anyio.fail_after(60):
            while not reported:
                rec = await ok(b, "recall_memory", {"query": "API keys"})
                reported = rec["interrupted_sessions"]
        assert len(reported) == 1
        (s,) = reported
        assert s["client"] == "stdio"
        assert s["task"]["id"] == task["task_id"]
        assert s["last_progress"]["progress"]["feature"] == "rotate staging keys"

        again = await ok(b, "recall_memory", {"query": "API keys"})
        assert again["interrupted_sessions"] == []


def _salads(rng, n: int) -> list[str]:
    """n texts of a unique token plus seven random words; no word (or stem) repeats across them."""
    from engram.text.tokens import stem

    seen: set[str] = set()

    def word() -> str:
        while True:
            w = "".join(rng.choice("bcdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 3)))
            if stem(w) not in seen:
                seen.add(stem(w))
                return w

    # Spacing and case vary: what was sent must come back, not a tidied copy.
    shapes = ["{}", "{} ", "  {}", "{}\n", "{}."]
    texts = []
    for i in range(n):
        token = f"tk{rng.randrange(16**6):06x}q{i}"
        texts.append(shapes[i % len(shapes)].format(token + " " + " ".join(word() for _ in range(7))))
    return texts


async def test_three_processes_store_forty_distinct_memories_each_verbatim(home):
    """Issue 13: three stdio processes x 40 stores; each found by its token, byte for byte."""
    import random

    user = "user-three-writers"
    rng = random.Random(13)
    texts = _salads(rng, 120)
    batches = [texts[i::3] for i in range(3)]
    results: list[list[tuple[str, dict]]] = [[], [], []]

    async def writer(k: int) -> None:
        async with stdio(home, user) as c:
            for text in batches[k]:
                results[k].append((text, await ok(c, "store_memory", {"content": text})))

    async with anyio.create_task_group() as tg:
        for k in range(3):
            tg.start_soon(writer, k)

    stored = [x for r in results for x in r]
    assert len(stored) == 120
    # Nothing in common between any two: each is its own memory, never merged or reinforced.
    assert {r["action"] for _, r in stored} == {"new"}, [r["reason"] for _, r in stored if r["action"] != "new"]
    assert len({r["memory_id"] for _, r in stored}) == 120
    async with stdio(home, user) as c:
        for text, r in stored:
            token = text.split()[0]
            got = await ok(c, "recall_memory", {"query": token, "limit": 3})
            assert got["memories"], f"{token}: not found"
            top = got["memories"][0]
            assert top["id"] == r["memory_id"], f"{token}: found {top['content']!r}"
            assert top["content"] == text  # byte for byte
