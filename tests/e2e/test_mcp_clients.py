"""The resume prompt and the task resources read by real clients over stdio: the Python MCP SDK's
stdio client and the TypeScript SDK's (tests/e2e/mcp_ts_client.mjs under node), each against a
`python -m engram` process, each given what the resume_task tool gives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clients_support import NPM_BIN, NPM_INSTALL

from benchmarks import claims_race
from engram.core.settings import Settings
from engram.server.daemon import stop_or_kill

pytestmark = [pytest.mark.model, pytest.mark.anyio, pytest.mark.duckdb_only]

ROOT = Path(__file__).resolve().parents[2]
TS_SDK = NPM_BIN.parents[1]  # .cache/npm: scripts/test.sh installs tests/e2e/clients/package-lock.json there
TS_INSTALL = NPM_INSTALL


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("clients") / "home"
    yield home
    stop_or_kill(Settings.from_env({"ENGRAM_HOME": str(home)}))


async def a_task(home) -> str:
    """A task with a handoff, written by a session that has ended since (so nobody holds it)."""
    async with claims_race.server(home, 120) as (c, _):
        t = (await c.call_tool("create_task", {"name": "Move logs to the new bucket"})).structured_content
        await c.call_tool(
            "session_handoff",
            {"summary": "Bucket made", "task_id": t["task_id"], "next_steps": ["point the shipper at the bucket"]},
        )
        return t["task_id"]


async def test_python_sdk_stdio_client_lists_and_reads_the_prompt_and_resources(home):
    tid = await a_task(home)
    async with claims_race.server(home, 120) as (c, _):
        block = (await c.call_tool("resume_task", {"task_id": tid, "claim": False})).structured_content["context"]
        assert [p.name for p in (await c.list_prompts()).prompts] == ["resume"]
        assert [str(r.uri) for r in (await c.list_resources()).resources] == ["engram://tasks"]
        assert [t.uri_template for t in (await c.list_resource_templates()).resource_templates] == [
            "engram://tasks/{task_id}/resume"
        ]
        tasks = json.loads((await c.read_resource("engram://tasks")).contents[0].text)["tasks"]
        assert tid in [t["id"] for t in tasks]
        assert (await c.read_resource(f"engram://tasks/{tid}/resume")).contents[0].text == block
        prompt = (await c.get_prompt("resume", {"task_id": tid})).messages[0].content.text
        assert "Next step: point the shipper at the bucket" in prompt and "Held by: this session" in prompt


async def test_typescript_sdk_client_lists_and_reads_the_prompt_and_resources(home):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the TypeScript SDK client cannot run")
    assert (TS_SDK / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
        f"the TypeScript MCP SDK is not installed; run from {ROOT}: {TS_INSTALL}"
    )
    tid = await a_task(home)
    env = claims_race.engram_env(home, 120)
    run = subprocess.run(
        [node, str(ROOT / "tests" / "e2e" / "mcp_ts_client.mjs"), str(TS_SDK), sys.executable, tid],
        env=env,
        capture_output=True,
        text=True,
        timeout=claims_race.TIMEOUT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["server"]["name"] == "engram"
    assert [(p["name"], p["arguments"]) for p in out["prompts"]] == [
        ("resume", [{"name": "task_id", "required": False}])
    ]
    assert [r["uri"] for r in out["resources"]] == ["engram://tasks"]
    assert [t["uriTemplate"] for t in out["templates"]] == ["engram://tasks/{task_id}/resume"]
    assert tid in [t["id"] for t in json.loads(out["tasks"][0]["text"])["tasks"]]
    assert out["resume"][0]["text"] == out["tool"]["structuredContent"]["context"]
    assert "Next step: point the shipper at the bucket" in out["resume"][0]["text"]
    prompt = out["prompt"]["messages"][0]["content"]["text"]
    assert "Next step: point the shipper at the bucket" in prompt and "Held by: this session" in prompt
    assert "no task with id 't-missing'" in out["missing"]
