"""completion/complete and logging/setLevel through the protocol: the SDK's client in-process, against
the real stdio server (`python -m engram`) and against `engram serve --http`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import PromptReference, ResourceTemplateReference

from engram.api import Api, Ctx
from engram.server.backend import LocalBackend
from engram.server.mcp import TASK_RESUME_URI, build_mcp
from tests.stdio_support import TIMEOUT, stdio, stop_engram_daemon
from tests.support.http_server import serving

pytestmark = pytest.mark.anyio

RESUME = PromptReference(name="resume")
TEMPLATE = ResourceTemplateReference(uri=TASK_RESUME_URI)


class Logs:
    """The notifications/message a client receives, with a way to wait for one."""

    def __init__(self) -> None:
        self.got: list = []
        self.event = anyio.Event()

    async def __call__(self, params) -> None:
        self.got.append(params)
        self.event.set()

    async def wait_for(self, pred: Callable[[object], bool]) -> object:
        with anyio.fail_after(TIMEOUT):
            while not (hit := next((p for p in self.got if pred(p)), None)):
                self.event = anyio.Event()
                await self.event.wait()
        return hit


async def tasks_made(c: Client) -> dict[str, str]:
    """Three tasks, one done; returns their ids by role."""
    ids = {}
    for role, name in (
        ("old", "Rotate the signing keys"),
        ("open", "Port the billing job"),
        ("done", "Old finished work"),
    ):
        r = await c.call_tool("create_task", {"name": name})
        assert not r.is_error, r.content[0].text
        ids[role] = r.structured_content["task_id"]
    r = await c.call_tool("update_task", {"task_id": ids["done"], "status": "done"})
    assert not r.is_error, r.content[0].text
    return ids


async def check_completion(c: Client) -> None:
    assert c.server_capabilities.completions is not None
    ids = await tasks_made(c)
    everything = (await c.complete(RESUME, {"name": "task_id", "value": ""})).completion
    # Open tasks first, then the done one.
    assert set(everything.values[:2]) == {ids["open"], ids["old"]} and everything.values[2] == ids["done"]
    assert everything.total == 3 and everything.has_more is False
    by_name = (await c.complete(RESUME, {"name": "task_id", "value": "billing"})).completion
    assert by_name.values == [ids["open"]]
    prefix = ids["old"][: len(ids["old"]) - 2]
    by_id = (await c.complete(TEMPLATE, {"name": "task_id", "value": prefix})).completion
    assert ids["old"] in by_id.values
    nothing = (await c.complete(RESUME, {"name": "task_id", "value": "no task is called this"})).completion
    assert nothing.values == [] and nothing.total == 0
    # A prompt or argument engram does not have: no values, not an error (as the conformance suite asks).
    assert (await c.complete(PromptReference(name="other"), {"name": "x", "value": ""})).completion.values == []


async def set_level(c: Client, level: str) -> None:
    # The SDK marks logging/setLevel deprecated (protocol 2026-07-28 drops it); the clients of
    # today's protocol, which engram serves, still send it.
    with pytest.warns(MCPDeprecationWarning):
        await c.set_logging_level(level)


async def check_logging(c: Client, logs: Logs) -> None:
    assert c.server_capabilities.logging is not None
    # Below the level asked for, nothing; at it, the record arrives before the tool's result.
    await set_level(c, "warning")
    assert (await c.call_tool("get_task", {"task_id": "t-quiet"})).is_error
    await set_level(c, "info")
    assert (await c.call_tool("get_task", {"task_id": "t-loud"})).is_error
    hit = await logs.wait_for(lambda p: "t-loud" in str(p.data))
    assert hit.level == "info" and hit.logger == "engram.server.mcp"
    assert "get_task refused" in hit.data and "no task with id 't-loud'" in hit.data
    assert not any("t-quiet" in str(p.data) for p in logs.got)
    await set_level(c, "debug")
    await c.call_tool("list_tasks", {})
    await logs.wait_for(lambda p: p.level == "debug" and "tool list_tasks called" in p.data)


# ---------------------------------------------------------------- in-process


def session(api: Api, sid: str, logs: Logs | None = None) -> Client:
    backend = LocalBackend(api, Ctx(sid, client="test"))
    # logging/setLevel is a handshake-era method (2025-11-25 and before, what Claude Code, Codex,
    # Gemini CLI and the conformance suite speak); protocol 2026-07-28 removed it.
    return Client(build_mcp(lambda ctx: backend), logging_callback=logs, mode="legacy")


async def test_completion_in_process(eng):
    async with session(Api(eng), "s-a") as c:
        await check_completion(c)


async def test_logging_in_process(eng):
    logs = Logs()
    async with session(Api(eng), "s-a", logs) as c, session(Api(eng), "s-b") as quiet:
        await check_logging(c, logs)
        assert (await quiet.call_tool("get_task", {"task_id": "t-other"})).is_error
        await c.call_tool("list_tasks", {})  # a's own debug record comes after b's refusal would have
        await logs.wait_for(lambda p: p.level == "debug" and p is logs.got[-1])
        # Another client's records never reach this one, whatever level this one set.
        assert not any("t-other" in str(p.data) for p in logs.got)


# ---------------------------------------------------------------- real servers


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("engram-home")
    yield home
    stop_engram_daemon(home)


@asynccontextmanager
async def stdio_client(home: Path, logs: Logs | None = None) -> AsyncIterator[Client]:
    client = stdio(home, "user-complete")
    client.logging_callback, client.mode = logs, "legacy"
    async with client as c:
        yield c


@pytest.mark.model
@pytest.mark.duckdb_only
async def test_completion_and_logging_over_stdio(home):
    async with stdio_client(home) as c:
        await check_completion(c)
    logs = Logs()
    async with stdio_client(home, logs) as c:
        await check_logging(c, logs)


@pytest.fixture(scope="module")
def http_server(checked_model_cache):
    # Short: the daemon's socket lives in the home.
    home = Path(tempfile.mkdtemp(prefix="egc", dir="/tmp"))
    try:
        with serving(home, "complete-token-5b1e", extra_env={"ENGRAM_USER": "user-http"}) as (base, _):
            yield base
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def over_http(base: str, check: Callable[[Client], Awaitable[None]], logs: Logs | None = None) -> None:
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": "Bearer complete-token-5b1e"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
        Client(streamable_http_client(base + "/mcp", http_client=http), logging_callback=logs, mode="legacy") as c,
    ):
        await check(c)


@pytest.mark.model
@pytest.mark.duckdb_only
async def test_completion_and_logging_over_http(http_server):
    await over_http(http_server, check_completion)
    logs = Logs()
    await over_http(http_server, lambda c: check_logging(c, logs), logs)
