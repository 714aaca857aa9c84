"""Isolation and access: users never see or touch each other's memories, tasks or sessions through
any operation, whichever way the user id arrives (Ctx, the RPC hello, X-Engram-User); the HTTP API
refuses every request without the token; secrets are redacted on every write path.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from engram import Engram
from engram.admin.export_import import ImportConflict, export_jsonl, import_jsonl
from engram.admin.scheduler import MaintenanceScheduler
from engram.api import Api, Ctx
from engram.core.types import NotFound
from engram.server.backend import SessionBackends
from engram.server.daemon import Daemon, build_http_app
from engram.server.http_routes import OPS
from engram.server.rpc import Peer, RpcError
from engram.server.rpc_client import RpcClient
from tests.conftest import wait_until

TOKEN = "isolation-token-0123456789abcdef"
ALICE, BOB = Ctx("s-alice", "alice", "test"), Ctx("s-bob", "bob", "test")


@pytest.fixture
def api(eng):
    return Api(eng)


@pytest.fixture
def alice_data(api):
    """Everything alice owns: a task, memories of every kind, a session with an outcome."""

    def call(op, **kw):
        return api.call(op, kw, ALICE)

    task = call("create_task", name="alice migration", goal="move the orders table")["task_id"]
    mem = call("store_memory", content="Alice's orders table lives in Postgres 16", task_id=task)["memory_id"]
    handoff = call(
        "session_handoff",
        summary="Alice stopped at the orders backfill",
        task_id=task,
        next_steps=["finish the orders backfill"],
    )["handoff_id"]
    fail = call("track_failure", error="orders backfill timed out", component="orders-db", task_id=task)["memory_id"]
    prog = call("track_progress", feature="orders backfill", status="in_progress", completion=0.5, task_id=task)[
        "memory_id"
    ]
    call("session_outcome", outcome="success")
    return {"task": task, "memories": [mem, handoff, fail, prog]}


def refused(fn, *args, **kwargs) -> bool:
    """True when the call is refused as if the thing did not exist (never 'forbidden': no leak)."""
    try:
        fn(*args, **kwargs)
    except NotFound:
        return True
    return False


def test_another_user_cannot_read_update_or_delete_through_any_operation(api, alice_data):
    def bob(op, **kw):
        return api.call(op, kw, BOB)

    task = alice_data["task"]
    for mid in alice_data["memories"]:
        assert refused(bob, "get_memory", memory_id=mid)
        assert refused(bob, "update_memory", memory_id=mid, content="bob was here")
        assert refused(bob, "forget_memory", memory_id=mid)
        assert refused(bob, "forget_memory", memory_id=mid, dry_run=True)
    assert bob("forget_memory", query="orders backfill")["count"] == 0
    assert refused(bob, "get_task", task_id=task)
    assert refused(bob, "update_task", task_id=task, status="done")
    for op, kw in [
        ("store_memory", {"content": "bob's note"}),
        ("session_handoff", {"summary": "bob's handoff"}),
        ("track_failure", {"error": "x", "component": "y"}),
        ("track_progress", {"feature": "x", "status": "done"}),
    ]:
        assert refused(bob, op, task_id=task, **kw)  # cannot attach to alice's task
    assert bob("list_tasks")["tasks"] == []
    for mode in ("hybrid", "bm25", "vector"):
        r = bob("recall_memory", query="orders backfill Postgres table", mode=mode)
        assert r["memories"] == [] and r["handoff"] is None and r["related_failures"] == []
    ctx = bob("get_context", query="orders backfill")
    assert ctx["memory_ids"] == [] and "orders" not in ctx["context"]
    stats = bob("memory_stats")
    assert stats["total"] == 0 and set(stats["by_user"]) <= {"bob"}
    # Alice's session cannot be taken over by naming it.
    thief = Ctx(ALICE.session_id, "bob", "test")
    assert refused(api.call, "session_outcome", {"outcome": "failure"}, thief)
    assert refused(api.call, "recall_memory", {"query": "orders"}, thief)
    # Nothing of alice's changed.
    eng = api.eng
    for mid in alice_data["memories"]:
        m = eng.get(mid, "alice")
        assert m.status == "active" and "bob" not in m.content
    assert eng.get_task_row(task, "alice").status == "open"
    assert eng.store_db.get_session(ALICE.session_id).user_id == "alice"
    assert eng.outcomes[ALICE.session_id] == (1, 0)
    assert api.call("recall_memory", {"query": "orders table Postgres"}, ALICE)["memories"]


def test_user_from_the_rpc_hello_is_isolated(settings, fake, clock, alice_data, api, tmp_path):
    daemon = Daemon(settings, engram=api.eng)
    daemon.api = api
    daemon.start()
    try:
        with (
            RpcClient(settings.socket_path, user_id="bob", client="bob") as bob,
            RpcClient(settings.socket_path, user_id="alice", client="alice") as alice,
        ):
            for mid in alice_data["memories"]:
                with pytest.raises(RpcError) as e:
                    bob.call("get_memory", memory_id=mid)
                assert e.value.kind == "NotFound"
                with pytest.raises(RpcError):
                    bob.call("forget_memory", memory_id=mid)
            assert bob.call("recall_memory", query="orders backfill")["memories"] == []
            assert alice.call("recall_memory", query="orders backfill")["memories"]
        with RpcClient(settings.socket_path, user_id="bob", session_id=ALICE.session_id) as thief:
            with pytest.raises(RpcError) as e:
                thief.call("session_outcome", outcome="failure")
            assert e.value.kind == "NotFound"
    finally:
        daemon.rpc.shutdown()
    assert api.eng.outcomes[ALICE.session_id] == (1, 0)


PG = "The staging database runs PostgreSQL 16 on port 5433"
PG_SAME = "Staging database runs PostgreSQL 16 on port 5433"


def test_maintenance_reports_and_changes_only_the_callers_memories(api, clock):
    eng = api.eng

    def plant(user, text, **kw):
        return eng.store(text, user_id=user, resolve_conflicts=False, **kw).memory.id

    mine = {
        u: {
            plant(u, PG, importance=0.9),
            plant(u, PG_SAME, importance=0.9),
            plant(u, "Lunch order was pasta", importance=0.1),
        }
        for u in ("alice", "bob")
    }
    clock.advance(days=40)  # the duplicates cluster, the lunch note fades below the prune line
    sched = MaintenanceScheduler(eng, eng.settings, api_metrics=api.metrics, clock=clock)
    api.scheduler = sched
    sched.start()

    def named(report: dict) -> set[str]:
        return {i for c in report["clusters"] for i in c["sources"]} | set(report["pruned_ids"])

    assert named(api.call("consolidate_memory", {}, BOB)) == mine["bob"]
    # No user named: ENGRAM_USER's stats, not everyone's (fading_soon quotes memories).
    stats = api.call("memory_stats", {}, Ctx("s-operator", client="cli"))
    assert set(stats["by_user"]) <= {"default"} and stats["fading_soon"]["memories"] == []
    # ENGRAM_USER (what `engram consolidate` acts as without --user) owns none of these.
    assert named(api.call("consolidate_memory", {"apply": True}, Ctx("s-operator", client="cli"))) == set()
    applied = api.call("consolidate_memory", {"apply": True}, BOB)
    assert named(applied) == mine["bob"] and applied["consolidated"] == 2 and applied["pruned"] == 1
    assert {eng.store_db.get_memory(i).status for i in mine["alice"]} == {"active"}
    assert all(
        eng.store_db.get_memory(i) is None or eng.store_db.get_memory(i).status == "consolidated" for i in mine["bob"]
    )
    # Bob's run is the last one the schedule saw: alice's stats show none of it, bob's its counts
    # without ids or texts.
    assert api.call("memory_stats", {}, ALICE)["maintenance"]["last_report"] is None
    last = api.call("memory_stats", {}, BOB)["maintenance"]["last_report"]
    assert last["consolidated"] == 2 and "clusters" not in last and "pruned_ids" not in last
    # The scheduled job runs for nobody in particular: it covers every user.
    clock.advance(hours=12)
    [scheduled] = sched.tick()
    assert named(scheduled) == mine["alice"]


def test_mcp_over_http_acts_as_the_user_header(api, alice_data, settings, serve):
    import anyio
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = serve(build_http_app(api, settings)) + "/mcp"

    async def as_user(headers: dict, tool: str, args: dict) -> dict:
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as c,
        ):
            r = await c.call_tool(tool, args)
            assert not r.is_error, r.content
            return r.structured_content

    async def main() -> None:
        query = {"query": "orders backfill Postgres table"}
        assert (await as_user({"X-Engram-User": "bob"}, "recall_memory", query))["memories"] == []
        assert (await as_user({}, "recall_memory", query))["memories"] == []  # ENGRAM_USER
        hits = (await as_user({"X-Engram-User": "alice"}, "recall_memory", query))["memories"]
        assert {h["id"] for h in hits} & set(alice_data["memories"])
        stored = await as_user({"X-Engram-User": "bob"}, "store_memory", {"content": "Bob ships on Fridays"})
        assert api.eng.get(stored["memory_id"], "bob").user_id == "bob"
        with pytest.raises(NotFound):
            api.eng.get(stored["memory_id"], "alice")

    anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_mcp_http_sessions_end_cleanly(api, settings, serve, mode):
    """A handshake-era client's session ends when it closes it (DELETE /mcp); a sessionless
    client's calls end their implicit session after each call. Neither is reported interrupted."""
    import anyio
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = serve(build_http_app(api, settings)) + "/mcp"

    def carols() -> list:
        return api.eng.store_db.user_sessions("carol")

    async def main() -> None:
        async with (
            create_mcp_http_client(headers={"X-Engram-User": "carol"}) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as c,
        ):
            assert not (await c.call_tool("store_memory", {"content": "Carol deploys on Tuesdays"})).is_error
            assert not (await c.call_tool("recall_memory", {"query": "deploys"})).is_error
            if mode == "legacy":
                assert [s.status for s in carols()] == ["active"]  # one session for the connection

    anyio.run(main)
    # Under heavy load the session was once seen still active right after the client returned,
    # though the server had ended it while answering the DELETE (cause not found): allow the
    # end up to 5 s to show, then require it.
    wait_until(lambda: all(s.status == "ended" for s in carols()), timeout=5, what="carol's sessions to end")
    assert carols() and all(s.status == "ended" and s.ended_at is not None for s in carols())
    assert api.eng.take_interrupted("carol") == []


def test_mcp_http_sessions_are_per_user_and_kept_in_no_table(api):
    backends = SessionBackends(api, client="http", user_id="default")
    first = backends.for_request({"mcp-session-id": "m-1", "x-engram-user": "alice"}).ctx
    assert first.user_id == "alice"
    for i in range(5000):  # far more clients than any table of sessions would keep
        backends.for_request({"mcp-session-id": f"other-{i}", "x-engram-user": "bob"})
    assert backends.for_request({"mcp-session-id": "m-1", "x-engram-user": "alice"}).ctx == first
    # The same MCP session id under another user is another engram session, never alice's.
    bob = backends.for_request({"mcp-session-id": "m-1", "x-engram-user": "bob"}).ctx
    assert bob.user_id == "bob" and bob.session_id != first.session_id
    assert backends.for_request({"mcp-session-id": "m-1"}).ctx.user_id == "default"


def test_socket_export_and_import_cover_only_the_callers_user(settings, fake, clock, alice_data, api, tmp_path):
    api.call("store_memory", {"content": "Bob's laptop runs Fedora 41"}, BOB)
    # A file of alice's rows made elsewhere, so nothing in it clashes with ids here.
    elsewhere = Engram(":memory:", settings=settings, embedder=fake, clock=clock)
    elsewhere.store("Alice's second store holds the invoices schema", user_id="alice")
    foreign = tmp_path / "alice.jsonl"
    export_jsonl(elsewhere, foreign)
    elsewhere.close()
    daemon = Daemon(settings, engram=api.eng)
    daemon.api = api
    daemon.start()
    try:
        with RpcClient(settings.socket_path, user_id="bob", client="bob") as bob:
            mine = tmp_path / "bob.jsonl"
            counts = bob.call("export_memories", path=str(mine))
            rows = [json.loads(x) for x in mine.read_text().splitlines()[1:-1]]
            assert counts["memories"] == 1 and {r["user_id"] for r in rows} == {"bob"}
            assert not any(r.get("id") in alice_data["memories"] for r in rows)
            before = api.eng.store_db.table_counts()
            with pytest.raises(RpcError, match=r"other users \('alice'"):
                bob.call("import_memories", path=str(foreign))
            assert api.eng.store_db.table_counts() == before
            # on_conflict and reembed reach the importer.
            again = bob.call("import_memories", path=str(mine), on_conflict="skip", reembed=True)
            assert again["memories"] == 0 and again["skipped"] >= 1
            with pytest.raises(RpcError, match="on_conflict must be 'error' or 'skip'; got 'merge'"):
                bob.call("import_memories", path=str(mine), on_conflict="merge")
    finally:
        daemon.rpc.shutdown()
        daemon.scheduler.shutdown()


def test_import_for_a_user_cannot_link_to_another_users_task(api, alice_data, tmp_path):
    api.call("store_memory", {"content": "Bob's laptop runs Fedora 41"}, BOB)
    path = tmp_path / "bob.jsonl"
    api.call("export_memories", {"path": str(path)}, BOB)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for d in lines:
        if d["kind"] == "memory":
            d["id"], d["task_id"] = "m-bob-copy", alice_data["task"]
        if d["kind"] == "session":
            d["id"] = "s-bob-copy"
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    with pytest.raises(ImportConflict, match=r"task id.*another user"):
        api.call("import_memories", {"path": str(path)}, BOB)
    assert api.eng.store_db.get_memory("m-bob-copy") is None


def test_a_client_naming_another_users_session_cannot_end_it(settings, api, alice_data):
    daemon = Daemon(settings, engram=api.eng)
    try:
        for clean in (True, False):
            daemon.on_disconnect(Peer(ALICE.session_id, None, "thief", "bob", conn_id=1), clean)
            daemon.on_disconnect(Peer(ALICE.session_id, None, "thief", None, conn_id=2), clean)
            assert api.eng.store_db.get_session(ALICE.session_id).status == "active"
        daemon.on_disconnect(Peer(ALICE.session_id, None, "alice", "alice", conn_id=3), True)
        assert api.eng.store_db.get_session(ALICE.session_id).status == "ended"
    finally:
        daemon.rpc.shutdown()
        daemon.scheduler.shutdown()


def test_http_user_header_isolates_and_token_guards_every_route(api, alice_data, settings, serve):
    from dataclasses import replace

    base = serve(build_http_app(api, replace(settings, token=TOKEN)))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    paths = {
        op.path.replace("{memory_id}", alice_data["memories"][0]).replace("{task_id}", alice_data["task"]) for op in OPS
    }
    routes = [
        (op.method, op.path.replace("{memory_id}", alice_data["memories"][0]).replace("{task_id}", alice_data["task"]))
        for op in OPS
    ]
    routes += [("GET", "/metrics"), ("GET", "/openapi.json"), ("POST", "/mcp"), ("GET", "/mcp")]
    assert len(paths) >= 10
    with httpx.Client(base_url=base, timeout=30) as c:
        for method, path in routes:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": TOKEN},
                {"Authorization": f"bearer  {TOKEN}x"},
                {"X-Engram-User": "alice"},
            ):
                r = c.request(method, path, headers=headers, json={"content": "x", "query": "x"})
                assert r.status_code == 401, (method, path, headers, r.status_code)
                assert "token" in r.json()["error"]
        assert c.get("/healthz").status_code == 200  # liveness only, no data
        # One connection, two users: each gets only its own.
        bob = {**auth, "X-Engram-User": "bob"}
        alice = {**auth, "X-Engram-User": "alice"}
        mid, task = alice_data["memories"][0], alice_data["task"]
        assert c.get(f"/memories/{mid}", headers=bob).status_code == 404
        assert c.delete(f"/memories/{mid}", headers=bob).status_code == 404
        assert c.get(f"/tasks/{task}", headers=bob).status_code == 404
        assert c.patch(f"/tasks/{task}", headers=bob, json={"status": "done"}).status_code == 404
        assert c.get("/tasks", headers=bob).json()["tasks"] == []
        assert c.post("/search", headers=bob, json={"query": "orders backfill"}).json()["memories"] == []
        stored = c.post("/memories", headers=bob, json={"content": "Bob deploys on Fridays"}).json()
        assert c.get(f"/memories/{stored['memory_id']}", headers=alice).status_code == 404
        assert c.get(f"/memories/{mid}", headers=alice).status_code == 200
        r = c.post("/search", headers={**bob, "X-Engram-Session": ALICE.session_id}, json={"query": "x"})
        assert r.status_code == 404
    assert api.eng.get(mid, "alice").status == "active"


SECRETS = [
    "sk-ant-api03-" + "Q" * 40,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "ghp_" + "z" * 36,
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
]


def test_secrets_are_redacted_on_every_write_path(tmp_path, settings, fake, clock):
    path = tmp_path / "redact.duckdb"
    eng = Engram(path, settings=settings, embedder=fake, clock=clock)
    eng.store_db.con.execute("PRAGMA force_compression='uncompressed'")
    api = Api(eng)
    ctx = Ctx("s-redact", client="test")

    def call(op, **kw):
        return api.call(op, kw, ctx)

    for i, secret in enumerate(SECRETS):
        s = f"key {secret} here"
        task = call("create_task", name=f"task {i} {s}", goal=s, metadata={"k": s, "nested": [s]})["task_id"]
        call("update_task", task_id=task, goal=f"new goal {s}", name=f"renamed {i} {s}", metadata={"k2": s})
        mid = call(
            "store_memory", content=f"memory {i} holds {s}", tags=[f"tag{i}", s], metadata={"m": s}, task_id=task
        )["memory_id"]
        call("update_memory", memory_id=mid, content=f"memory {i} updated with {s}")
        call(
            "session_handoff",
            summary=f"handoff {i} {s}",
            completed=[s],
            in_progress=[s],
            blocked=[s],
            next_steps=[s],
            task_id=task,
        )
        call("track_failure", error=f"error {i} {s}", component=f"comp{i}", root_cause=s, fix=s, task_id=task)
        call("track_progress", feature=f"feature {i} {s}", status="done", notes=s, task_id=task)
        call("session_outcome", outcome="success", notes=s)
    # Import: a file written elsewhere (here: hand-edited) carrying secrets in every text field.
    export = tmp_path / "export.jsonl"
    export_jsonl(eng, export)
    lines = []
    for line in export.read_text().splitlines():
        d = json.loads(line)
        if d["kind"] == "memory":
            d["id"] = "imp" + d["id"][3:]
            d["content"] += f" imported {SECRETS[0]}"
            d["tags"] = [*d.get("tags", []), SECRETS[1]]
            d["metadata"] = {**(d.get("metadata") or {}), "imported": SECRETS[2]}
            d.pop("supersedes", None), d.pop("superseded_by", None)
            d["events"] = []
            lines.append(json.dumps(d))
        elif d["kind"] == "header":
            lines.append(line)
    lines.append(
        json.dumps(
            {
                "kind": "end",
                "counts": {"memories": len(lines) - 1, "tasks": 0, "sessions": 0, "edges": 0, "memory_events": 0},
            }
        )
    )
    imported = tmp_path / "import.jsonl"
    imported.write_text("\n".join(lines) + "\n")
    import_jsonl(eng, imported)

    text_columns = {
        "memories": ["content", "metadata", "array_to_string(tags, ' ')"],
        "memory_events": ["detail"],
        "tasks": ["name", "goal", "metadata"],
        "sessions": ["outcome_notes"],
    }
    db = eng.store_db
    assert db.count_where("memories", "id LIKE 'imp%'") > 0
    assert db.count_where("memories", "content LIKE '%[REDACTED]%'") >= 4 * len(SECRETS)
    for secret in SECRETS:
        needle = secret.split("\n")[0][:16]
        for table, cols in text_columns.items():
            for col in cols:
                assert db.count_where(table, f"contains(coalesce({col}, ''), ?)", [needle]) == 0, (table, col, needle)
    out = tmp_path / "after.jsonl"
    export_jsonl(eng, out)
    db.flush_wal()
    eng.close()
    for secret in SECRETS:
        needle = secret.split("\n")[0][:16].encode()
        assert needle not in out.read_bytes()
        assert needle not in Path(path).read_bytes()


def test_a_misspelt_query_is_read_only_as_words_of_the_callers_own_memories(api):
    """Spelling correction (lexical.BM25Index.corrections) offers only words of memories the
    caller may see: another user's word is neither searched for nor shown in read_as."""
    api.call("store_memory", {"content": "The staging database is refreshed from Porto every Sunday."}, BOB)
    api.call("store_memory", {"content": "Alice keeps her notes in a paper notebook."}, ALICE)
    mine = api.call("recall_memory", {"query": "refreshd from Prto"}, BOB)
    assert mine["read_as"] == {"refreshd": ["refreshed"], "prto": ["porto"]}
    assert "Porto" in mine["memories"][0]["content"] and mine["memories"][0]["confidence"] == "strong"
    theirs = api.call("recall_memory", {"query": "refreshd from Prto"}, ALICE)
    assert "read_as" not in theirs and theirs["memories"] == []
    # A word spelt right is searched as it is, and nothing is said about it.
    assert "read_as" not in api.call("recall_memory", {"query": "paper notebook"}, ALICE)
