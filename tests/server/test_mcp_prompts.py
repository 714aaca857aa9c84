"""The MCP prompt `resume` and the task resources, in-process through the SDK's client, and
claims through the MCP tools of two sessions."""

from __future__ import annotations

import json

import pytest
from mcp.client import Client

from engram.api import Api, Ctx
from engram.server.backend import LocalBackend
from engram.server.mcp import build_mcp

pytestmark = pytest.mark.anyio


def session(api: Api, sid: str) -> Client:
    backend = LocalBackend(api, Ctx(sid, client="test"))
    return Client(build_mcp(lambda ctx: backend))


async def ok(client: Client, tool: str, args: dict | None = None) -> dict:
    r = await client.call_tool(tool, args or {})
    assert not r.is_error, f"{tool} failed: {r.content[0].text}"
    return r.structured_content


async def test_prompt_and_resources_say_what_the_tools_say(eng):
    api = Api(eng)
    async with session(api, "s-a") as a, session(api, "s-b") as b:
        t = await ok(a, "create_task", {"name": "Port the billing job", "goal": "runs on the new queue"})
        await ok(
            a,
            "session_handoff",
            {
                "summary": "Queue client written",
                "task_id": t["task_id"],
                "next_steps": ["switch the cron entry to the queue"],
            },
        )
        done = await ok(a, "create_task", {"name": "Old finished work"})
        await ok(a, "update_task", {"task_id": done["task_id"], "status": "done"})

        prompts = (await b.list_prompts()).prompts
        assert [(p.name, [(x.name, x.required) for x in p.arguments]) for p in prompts] == [
            ("resume", [("task_id", False)])
        ]
        listed = (await b.list_resources()).resources
        assert [str(r.uri) for r in listed] == ["engram://tasks"]
        templates = (await b.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["engram://tasks/{task_id}/resume"]

        tasks = json.loads((await b.read_resource("engram://tasks")).contents[0].text)["tasks"]
        assert [x["id"] for x in tasks] == [t["task_id"]]  # the done task is not open
        assert tasks[0]["held_by"]["session_id"] == "s-a"  # a's handoff claimed it

        block = (await b.read_resource(f"engram://tasks/{t['task_id']}/resume")).contents[0].text
        tool = await ok(b, "resume_task", {"task_id": t["task_id"], "claim": False})
        assert block == tool["context"]
        assert "Next step: switch the cron entry to the queue" in block
        assert "Held by: session s-a (test)" in block and "do not do its work twice" in block
        assert eng.claims.holder(t["task_id"]).session_id == "s-a"  # reading claimed nothing

        # The prompt is resume_task's block, claiming as the tool does; a's claim stands.
        got = await b.get_prompt("resume", {"task_id": t["task_id"]})
        text = got.messages[0].content.text
        assert tool["context"] in text
        # Without task_id: the open task nobody else holds; here every open task is a's.
        got = await b.get_prompt("resume", {})
        assert "no open task that no other session holds" in got.messages[0].content.text
        got = await a.get_prompt("resume", {})
        assert "Held by: this session, session s-a" in got.messages[0].content.text

        with pytest.raises(Exception, match="no task with id 't-missing'"):
            await b.read_resource("engram://tasks/t-missing/resume")


async def test_claims_through_the_tools_of_two_sessions(eng):
    api = Api(eng)
    async with session(api, "s-a") as a, session(api, "s-b") as b:
        t = (await ok(a, "create_task", {"name": "Rotate the keys"}))["task_id"]
        first = await ok(a, "claim_task", {"task_id": t})
        assert first["claimed"] and first["claim"]["session_id"] == "s-a"
        r = await b.call_tool("claim_task", {"task_id": t})
        assert r.is_error
        assert r.content[0].text.startswith(f"claim_task: task {t} is held by session s-a (test) since ")
        assert "last heard" in r.content[0].text and "take_over=true" in r.content[0].text

        # b resuming gets the answer, not the task; its progress note is kept, a still holds it.
        res = await ok(b, "resume_task", {"task_id": t})
        assert res["claim"]["claimed"] is False and res["held_by"]["session_id"] == "s-a"
        prog = await ok(b, "track_progress", {"feature": "new key made", "status": "done", "task_id": t})
        assert prog["claim"]["claimed"] is False and prog["claim"]["claim"]["session_id"] == "s-a"
        assert eng.get(prog["memory_id"]) is not None

        listed = (await ok(b, "list_tasks"))["tasks"][0]
        shown = (await ok(b, "get_task", {"task_id": t}))["held_by"]
        assert listed["held_by"] == shown == first["claim"] | {"last_heard": shown["last_heard"], "this_session": False}
        assert (await ok(a, "get_task", {"task_id": t}))["held_by"]["this_session"] is True

        taken = await ok(b, "claim_task", {"task_id": t, "take_over": True})
        assert taken["taken_over"]["session_id"] == "s-a"
        # a is told on its next call, whatever the call, once.
        seen = await ok(a, "list_tasks")
        assert [(n["task_id"], n["taken_over_by"]) for n in seen["claim_notices"]] == [(t, "s-b")]
        assert "claim_notices" not in await ok(a, "list_tasks")
        # a's handoff afterwards is kept and says who holds the task now.
        h = await ok(a, "session_handoff", {"summary": "stopping", "task_id": t})
        assert h["claim"]["claimed"] is False and h["claim"]["claim"]["session_id"] == "s-b"
        assert eng.get(h["memory_id"]) is not None

        r = await a.call_tool("release_task", {"task_id": t})
        assert r.is_error and "only its holder releases it" in r.content[0].text
        assert await ok(b, "release_task", {"task_id": t}) == {"task_id": t, "released": True}
        assert (await ok(a, "get_task", {"task_id": t}))["held_by"] is None
        assert (await ok(a, "claim_task", {"task_id": t}))["claimed"]
        await ok(a, "update_task", {"task_id": t, "status": "done"})  # finished: released
        assert (await ok(b, "get_task", {"task_id": t}))["held_by"] is None
