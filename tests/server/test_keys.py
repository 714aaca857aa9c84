"""Per-user keys (engram.admin.keys): a key acts as its user only, over REST and MCP over HTTP, for every
route and tool; a revoked key is refused on the next request; ENGRAM_TOKEN stays the owner's;
the `engram keys` commands as commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from engram import ops
from engram.admin import keys
from engram.api import Api, Ctx
from engram.server.daemon import build_http_app
from tests.conftest import wait_until

TOKEN = "owner-token-0123456789abcdef0123"
BOB = Ctx("s-bob", "bob", "test")
SECRET = "quokka"  # a word in every text of bob's: it must never reach alice
# Operations a key holder reaches: every HTTP route and MCP tool.
REMOTE = sorted(op.name for op in ops.OPS_LIST if op.http is not None or op.mcp is not None)


@pytest.fixture
def api(eng, clock):
    """The Api with its maintenance schedule, as the daemon has it (memory_stats shows its runs)."""
    from engram.admin.scheduler import MaintenanceScheduler

    api = Api(eng)
    api.scheduler = MaintenanceScheduler(eng, eng.settings, api_metrics=api.metrics, clock=clock)
    api.scheduler.start()
    yield api
    api.scheduler.shutdown()


@pytest.fixture
def bob_data(api):
    """Everything bob owns: a task, memories of every kind (one superseded), an open session."""

    def call(op, **kw):
        return api.call(op, kw, BOB)

    task = call("create_task", name=f"bob {SECRET} migration", goal=f"move the {SECRET} table")["task_id"]
    first = call("store_memory", content=f"Bob's {SECRET} service listens on port 7001", task_id=task, tags=["ops"])[
        "memory_id"
    ]
    mems = [
        first,
        call(
            "session_handoff",
            summary=f"Bob stopped at the {SECRET} backfill",
            task_id=task,
            next_steps=[f"finish the {SECRET} backfill"],
        )["handoff_id"],
        call("track_failure", error=f"{SECRET} backfill timed out", component=f"{SECRET}-db", task_id=task)[
            "memory_id"
        ],
        call("track_progress", feature=f"{SECRET} backfill", status="in_progress", completion=0.5, task_id=task)[
            "memory_id"
        ],
    ]
    newer = call("update_memory", memory_id=first, content=f"Bob's {SECRET} service listens on port 7002")
    mems.append(newer["memory_id"])
    call("session_outcome", outcome="success")
    call("consolidate_memory", apply=True)  # bob's run is the schedule's last report
    assert api.scheduler.status()["last_report"]["user_id"] == "bob"
    return {"task": task, "memories": mems, "session": BOB.session_id}


def snapshot(eng, bob: dict) -> dict:
    """What must not change when alice tries: bob's rows, their history, his session and outcomes."""
    db = eng.store_db
    return {
        "memories": {i: db.get_memory(i) for i in bob["memories"]},
        "events": {i: db.events(i) for i in bob["memories"]},
        "task": db.get_task(bob["task"]),
        "session": db.get_session(bob["session"]),
        "outcomes": eng.outcomes.get(bob["session"]),
    }


def attempts(bob: dict) -> dict[str, list[tuple[dict, bool]]]:
    """Per operation: (arguments aimed at bob's things, True when the call must be refused). The
    others run for alice herself and must answer nothing of bob's."""
    task, mems = bob["task"], bob["memories"]
    by_id = lambda **kw: [({"memory_id": m, **kw}, True) for m in mems]  # noqa: E731
    return {
        "memory_stats": [({}, False)],  # first: bob's run is still the schedule's last report
        "recall_memory": [
            ({"query": f"{SECRET} backfill port", "mode": m}, False) for m in ("hybrid", "bm25", "vector")
        ]
        + [({"query": f"{SECRET} backfill", "task_id": task}, False)],
        "get_context": [
            ({"query": f"{SECRET} backfill", "task_id": task}, False),
            ({"query": f"{SECRET} service port"}, False),
        ],
        "store_memory": [({"content": "Alice's note on the backfill", "task_id": task}, True)],
        "update_memory": by_id(content="alice was here"),
        "forget_memory": by_id() + by_id(dry_run=True),
        "get_memory": by_id(),
        "keep_memory": by_id(),
        "pin_memory": by_id(pinned=True),
        "memory_strength": by_id(),
        "memory_versions": by_id(),
        "list_memories": [
            ({"status": "any"}, False),
            ({"task_id": task, "status": "any"}, False),
            ({"tag": "ops"}, False),
        ],
        "create_task": [({"name": "alice's task"}, False)],
        "update_task": [({"task_id": task, "status": "done"}, True), ({"task_id": task, "name": "mine"}, True)],
        "get_task": [({"task_id": task}, True)],
        "list_tasks": [({}, False), ({"all_projects": True}, False)],
        "list_projects": [({}, False)],
        "resume_task": [({"task_id": task}, True), ({"task_id": task, "take_over": True}, True)],
        "claim_task": [({"task_id": task}, True), ({"task_id": task, "take_over": True}, True)],
        "release_task": [({"task_id": task}, True)],
        "task_sessions": [({"task_id": task}, True)],
        "session_handoff": [({"summary": "alice's handoff", "task_id": task}, True)],
        "track_failure": [({"error": "x", "component": "y", "task_id": task}, True)],
        "track_progress": [({"feature": "x", "status": "done", "task_id": task}, True)],
        "report_interruption": [({"reason": "other", "task_id": task}, True)],
        "session_outcome": [({"outcome": "failure"}, False)],  # alice's own session
        "consolidate_memory": [({"apply": False}, False), ({"apply": True}, False)],
        "set_tier": by_id(tier="procedural"),
        # Alice's own memories only: a dry run, then keeping one of hers (bob's stay as they were).
        "prune_memories": [({"keep": 1, "apply": False}, False), ({"keep": 1, "apply": True}, False)],
        "doctor": [({}, False)],
    }


def leaks(text: str, bob: dict) -> list[str]:
    """Bob's ids or words found in an answer."""
    return [x for x in [SECRET, '"bob"', bob["task"], bob["session"], *bob["memories"]] if x in text]


def rest_request(op_name: str, args: dict) -> tuple[str, str, dict, dict | None] | None:
    """(method, path, query, body) of an operation's route for these arguments; None when the
    route cannot carry them (DELETE /memories/{id} has no dry_run: MCP tries that one)."""
    http = ops.OPS[op_name].http
    path, args = http.path, dict(args)
    for name in ops.path_params(http.path):
        path = path.replace("{" + name + "}", args.pop(name))
    query = {k: args.pop(k) for k in list(args) if k in http.query}
    if http.method in ("GET", "DELETE") and args:
        return None
    return http.method, path, query, (args if http.method in ("POST", "PATCH") else None)


@pytest.fixture
def server(api, settings, serve):
    """The daemon's HTTP app (REST, MCP at /mcp, the panel) with the owner's token set."""
    return serve(build_http_app(api, replace(settings, token=TOKEN)))


@pytest.fixture
def alice_key(api):
    return api.call("create_key", {"user_id": "alice", "label": "alice laptop"}, Ctx("s-admin", client="cli"))["key"]


def test_the_attempts_cover_every_route_and_tool():
    # A new route or tool fails here until its cross-user attempt is written down.
    assert sorted(attempts({"task": "t", "memories": ["m"], "session": "s"})) == REMOTE
    assert {ops.OPS[n].http is None for n in ("create_key", "list_keys", "revoke_key")} == {True}
    assert not {"create_key", "list_keys", "revoke_key"} & set(ops.TOOLS)  # a key holder cannot mint keys


def test_a_key_for_alice_reaches_nothing_of_bobs_over_rest(api, bob_data, server, alice_key):
    before = snapshot(api.eng, bob_data)
    alice = {"Authorization": f"Bearer {alice_key}"}
    answered = refused = 0
    with httpx.Client(base_url=server, timeout=30) as c:
        for op_name, tries in attempts(bob_data).items():
            if ops.OPS[op_name].http is None:
                continue
            sent = [(rest_request(op_name, args), must) for args, must in tries]
            assert any(req for req, _ in sent), op_name  # every route is tried at least once
            for req, must_refuse in sent:
                if req is None:
                    continue
                method, path, query, body = req
                args = body or query
                r = c.request(method, path, params=query, json=body, headers=alice)
                if must_refuse:
                    assert r.status_code == 404, (op_name, args, r.status_code, r.text)
                    refused += 1
                else:
                    assert r.status_code < 300, (op_name, args, r.text)
                    assert not leaks(r.text, bob_data), (op_name, args, r.text)
                    answered += 1
                # Naming bob's session does not make alice act in it.
                r = c.request(
                    method, path, params=query, json=body, headers={**alice, "X-Engram-Session": bob_data["session"]}
                )
                assert r.status_code == 404, (op_name, "X-Engram-Session", r.text)
                # Naming bob as the user is refused outright.
                r = c.request(method, path, params=query, json=body, headers={**alice, "X-Engram-User": "bob"})
                assert r.status_code == 403 and "acts for user 'alice' only" in r.json()["error"], (op_name, r.text)
        # Naming herself is fine, and the panel's data routes answer her as any client.
        mine = c.post(
            "/memories",
            headers={**alice, "X-Engram-User": "alice"},
            json={"content": "Alice reviews pull requests after lunch"},
        ).json()["memory_id"]
        assert api.eng.get(mine, "alice").user_id == "alice"
        r = c.get("/memories", headers=alice, params={"status": "any"})
        assert [m["id"] for m in r.json()["memories"]] == [mine]
        assert c.get("/metrics", headers=alice).status_code == 403  # every user's counts: the owner's
    assert refused >= 20 and answered >= 10
    assert snapshot(api.eng, bob_data) == before
    # Bob still finds his own memories.
    hits = api.call("recall_memory", {"query": f"{SECRET} backfill"}, BOB)["memories"]
    assert {h["id"] for h in hits} & set(bob_data["memories"])


def _mcp_call(url: str, headers: dict, calls: list[tuple[str, dict]]) -> list:
    import anyio
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main() -> list:
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as c,
        ):
            return [await c.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


def test_a_key_for_alice_reaches_nothing_of_bobs_over_mcp(api, bob_data, server, alice_key):
    before = snapshot(api.eng, bob_data)
    calls = [
        (name, args, must) for name, tries in attempts(bob_data).items() if name in ops.TOOLS for args, must in tries
    ]
    assert {name for name, _, _ in calls} == set(ops.TOOLS)
    results = _mcp_call(
        server + "/mcp", {"Authorization": f"Bearer {alice_key}"}, [(name, args) for name, args, _ in calls]
    )
    for (name, args, must_refuse), r in zip(calls, results, strict=True):
        text = json.dumps(r.structured_content) if r.structured_content else str(r.content)
        if must_refuse:
            assert r.is_error and "no " in text, (name, args, text)
        else:
            assert not r.is_error, (name, args, text)
            assert not leaks(text, bob_data), (name, args, text)
    assert snapshot(api.eng, bob_data) == before
    # X-Engram-User naming bob is refused before the MCP transport sees the request.
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }
    r = httpx.post(
        server + "/mcp",
        json=init,
        timeout=30,
        headers={
            "Authorization": f"Bearer {alice_key}",
            "X-Engram-User": "bob",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert r.status_code == 403 and "acts for user 'alice' only" in r.json()["error"]


def test_a_revoked_key_is_refused_on_the_next_request(api, server, alice_key):
    admin = Ctx("s-admin", client="cli")
    key_id = api.call("list_keys", {"user_id": "alice"}, admin)["keys"][0]["key_id"]
    auth = {"Authorization": f"Bearer {alice_key}"}
    with httpx.Client(base_url=server, timeout=30, headers=auth) as c:
        assert c.post("/memories", json={"content": "Alice keeps her notes in Obsidian"}).status_code == 200
        assert c.get("/tasks").status_code == 200
        api.call("revoke_key", {"key_id": key_id}, admin)
        for method, path in [("GET", "/tasks"), ("POST", "/search"), ("GET", "/memories"), ("POST", "/mcp")]:
            r = c.request(method, path, json={"query": "notes"})
            assert r.status_code == 401 and "revoked" in r.json()["error"], (path, r.text)
    listed = api.call("list_keys", {"user_id": None}, admin)["keys"]
    assert [(k["key_id"], k["revoked_at"] is not None) for k in listed] == [(key_id, True)]


def test_a_key_revoked_mid_mcp_session_is_refused_at_its_next_call(api, server):
    import anyio
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError

    admin = Ctx("s-admin", client="cli")
    made = api.call("create_key", {"user_id": "carol", "label": None}, admin)

    async def main() -> str:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {made['key']}"}) as http,
            Client(streamable_http_client(server + "/mcp", http_client=http)) as c,
        ):
            r = await c.call_tool("store_memory", {"content": "Carol reviews on Thursdays"})
            assert not r.is_error and api.eng.get(r.structured_content["memory_id"], "carol")
            api.call("revoke_key", {"key_id": made["key_id"]}, admin)
            with pytest.raises(MCPError, match="error response"):  # the transport got a 401
                with anyio.fail_after(30):
                    await c.call_tool("recall_memory", {"query": "Carol reviews"})
            return r.structured_content["memory_id"]

    mid = anyio.run(main)
    assert api.eng.get(mid, "carol").recall_count == 0  # the recall after the revoke never ran


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_key_acts_as_its_user_exactly_and_its_sessions_end(api, server, mode):
    """A user id no header could carry byte for byte (not Latin-1) is the key's user on REST and
    MCP alike, and the MCP session the key's client closes ends for that user."""
    import anyio
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    user = "Мария 🐙"
    made = api.call("create_key", {"user_id": user, "label": None}, Ctx("s-admin", client="cli"))
    auth = {"Authorization": f"Bearer {made['key']}"}
    r = httpx.post(server + "/memories", json={"content": "Мария reviews the billing code"}, headers=auth, timeout=30)
    assert api.eng.get(r.json()["memory_id"], user).user_id == user

    async def main() -> str:
        async with (
            create_mcp_http_client(headers=auth) as http,
            Client(streamable_http_client(server + "/mcp", http_client=http), mode=mode) as c,
        ):
            r = await c.call_tool("store_memory", {"content": "Мария deploys on Wednesdays"})
            assert not r.is_error, r.content
            hits = (await c.call_tool("recall_memory", {"query": "billing code review"})).structured_content
            assert [h["content"] for h in hits["memories"]][:1] == ["Мария reviews the billing code"]
            return r.structured_content["memory_id"]

    mid = anyio.run(main)
    assert api.eng.get(mid, user).user_id == user

    # The server ends the session when it handles the client's closing request, which the client
    # does not wait for: on a loaded machine that can land a moment after the client is gone.
    def ended() -> bool:
        sessions = api.eng.store_db.user_sessions(user)
        return bool(sessions) and all(s.status == "ended" for s in sessions)

    wait_until(ended, timeout=15, what="the MCP session to end")
    assert api.eng.take_interrupted(user) == []


def test_engram_token_stays_the_owners_once_keys_exist(api, bob_data, server, alice_key):
    owner = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server, timeout=30) as c:
        # The owner still picks the user with X-Engram-User, as before keys.
        r = c.get(f"/tasks/{bob_data['task']}", headers={**owner, "X-Engram-User": "bob"})
        assert r.status_code == 200 and r.json()["task"]["id"] == bob_data["task"]
        assert c.get(f"/tasks/{bob_data['task']}", headers=owner).status_code == 404  # ENGRAM_USER
        assert c.get("/metrics", headers=owner).status_code == 200
        # Without a credential, or with a wrong one, nothing.
        for headers in (
            {},
            {"Authorization": "Bearer egk_not-a-key"},
            {"Authorization": alice_key},
            {"X-Engram-User": "bob"},
        ):
            r = c.get("/tasks", headers=headers)
            assert r.status_code == 401 and "token" in r.json()["error"], headers
        assert c.get("/healthz").status_code == 200


def test_without_a_token_keys_in_use_still_close_the_server(api, settings, serve):
    base = serve(build_http_app(api, settings))  # no ENGRAM_TOKEN: open to loopback, as before keys
    admin = Ctx("s-admin", client="cli")
    with httpx.Client(base_url=base, timeout=30) as c:
        assert c.get("/tasks", headers={"X-Engram-User": "bob"}).status_code == 200
        made = api.call("create_key", {"user_id": "dave", "label": "ci"}, admin)
        r = c.get("/tasks")  # the next request already needs a key
        assert r.status_code == 401 and "missing bearer token" in r.json()["error"]
        assert c.get("/tasks", headers={"Authorization": f"Bearer {made['key']}"}).status_code == 200
        api.call("revoke_key", {"key_id": made["key_id"]}, admin)
        # Revoking the last key does not open the server again.
        assert c.get("/tasks").status_code == 401
        assert c.get("/tasks", headers={"Authorization": f"Bearer {made['key']}"}).status_code == 401


def test_keys_are_random_and_stored_only_as_their_hash(api):
    admin = Ctx("s-admin", client="cli")
    made = [api.call("create_key", {"user_id": "erin", "label": f"k{i}"}, admin) for i in range(3)]
    assert len({m["key"] for m in made}) == 3
    assert all(m["key"].startswith(keys.KEY_PREFIX) and len(m["key"]) >= 40 for m in made)
    rows = api.eng.store_db.list_keys("erin")
    assert {r["id"] for r in rows} == {m["key_id"] for m in made}
    listed = json.dumps(api.call("list_keys", {"user_id": "erin"}, admin))
    for m in made:
        assert m["key"] not in listed and keys.key_hash(m["key"]) not in listed
        assert keys.user_of(api.eng, m["key"]) == "erin"
    assert keys.user_of(api.eng, made[0]["key"] + "x") is None
    with pytest.raises(Exception, match="no key with id"):
        api.call("revoke_key", {"key_id": "k-nope"}, admin)
    api.call("revoke_key", {"key_id": made[0]["key_id"]}, admin)
    with pytest.raises(Exception, match="already revoked"):
        api.call("revoke_key", {"key_id": made[0]["key_id"]}, admin)
    with pytest.raises(Exception, match="user_id must be"):
        api.call("create_key", {"user_id": " ", "label": None}, admin)


# ---------------------------------------------------------------- as commands

REPO = Path(__file__).resolve().parents[2]


def run_engram(home: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ENGRAM_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "engram.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=300,
        check=False,
    )  # outside any project (docs/projects.md)


@pytest.mark.model
def test_keys_commands_as_commands(model_home):
    r = run_engram(model_home, "keys", "create", "--user", "alice", "--label", "alice laptop")
    assert r.returncode == 0, r.stderr
    key = next(w for w in r.stdout.split() if w.startswith(keys.KEY_PREFIX))
    key_id = next(w for w in r.stdout.split() if w.startswith("k-"))
    assert "shown this once" in r.stdout
    r = run_engram(model_home, "--json", "keys", "create", "--user", "bob")
    bob = json.loads(r.stdout)
    r = run_engram(model_home, "keys", "list")
    assert r.returncode == 0 and key_id in r.stdout and bob["key_id"] in r.stdout and "alice laptop" in r.stdout
    assert key not in r.stdout and keys.key_hash(key) not in r.stdout and bob["key"] not in r.stdout
    r = run_engram(model_home, "--json", "keys", "list", "--user", "bob")
    assert [k["key_id"] for k in json.loads(r.stdout)["keys"]] == [bob["key_id"]]
    r = run_engram(model_home, "keys", "revoke", key_id)
    assert r.returncode == 0 and f"revoked key {key_id} of user alice" in r.stdout
    r = run_engram(model_home, "keys", "revoke", key_id)
    assert r.returncode == 1 and "already revoked" in r.stderr
    r = run_engram(model_home, "keys", "create")
    assert r.returncode == 2 and "--user" in r.stderr
    r = run_engram(model_home, "keys", "list")
    assert "revoked" in r.stdout.splitlines()[0] and "active" in r.stdout.splitlines()[1]


def test_openapi_lists_the_401_and_403_the_auth_answers(api, settings, serve, server, alice_key):
    """Every route the auth guards documents 401 and 403, and each really answers them over HTTP."""
    key = {"Authorization": f"Bearer {alice_key}"}
    with httpx.Client(base_url=server, timeout=30) as c:
        doc = c.get("/openapi.json", headers=key).json()
        routes = [(m.upper(), path) for path, entries in doc["paths"].items() for m in entries]
        assert ("GET", "/metrics") in routes and ("POST", "/mcp") in routes and ("GET", "/openapi.json") in routes
        for method, path in routes:
            responses = doc["paths"][path][method.lower()]["responses"]
            url = path.replace("{memory_id}", "m-x").replace("{task_id}", "t-x")
            if path == "/healthz":  # public: no credential asked, none refused
                assert not {"401", "403"} & set(responses)
                assert c.get(url).status_code == 200
                continue
            assert {"401", "403"} <= set(responses), (method, path)
            assert responses["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
            r = c.request(method, url, headers={**key, "X-Engram-User": "bob"}, json={})
            assert r.status_code == 403 and "acts for user 'alice' only" in r.json()["error"], (method, path)
            r = c.request(method, url, json={})
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", (method, path)
        assert c.get("/metrics", headers=key).status_code == 403
        assert "needs ENGRAM_TOKEN" in doc["paths"]["/metrics"]["get"]["responses"]["403"]["description"]

    # Without ENGRAM_TOKEN too: keys made while a server runs close it (the document is made at start).
    base = serve(build_http_app(api, settings))
    with httpx.Client(base_url=base, timeout=30) as c:
        doc = c.get("/openapi.json", headers=key).json()
        assert {"401", "403"} <= set(doc["paths"]["/tasks"]["get"]["responses"])
        assert c.get("/tasks").status_code == 401
        assert c.get("/tasks", headers={**key, "X-Engram-User": "bob"}).status_code == 403
