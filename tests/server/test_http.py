"""The HTTP API over real HTTP: uvicorn on a free loopback port, an in-memory Engram with the fake embedder."""

from __future__ import annotations

import importlib.util
import json
import re

import httpx
import pytest

from engram import Engram
from engram.api import Api
from engram.server.http import BindRefused, build_app, check_bind
from engram.server.http_routes import OPS
from tests.conftest import wait_until

TOKEN = "s3cret-token-for-tests"
HAS_MAINTENANCE = importlib.util.find_spec("engram.admin.maintenance") is not None
needs_maintenance = pytest.mark.skipif(not HAS_MAINTENANCE, reason="engram/admin/maintenance.py has not landed yet")


@pytest.fixture
def api(eng):
    return Api(eng)


@pytest.fixture
def http(api, settings, serve):
    base = serve(build_app(api, token=None, settings=settings))
    with httpx.Client(base_url=base, timeout=30) as c:
        yield c


def test_store_then_search_finds_it(http):
    r = http.post(
        "/memories", json={"content": "Deploys go to Fly.io from the main branch", "tags": ["ops"], "importance": 0.8}
    )
    assert r.status_code == 200
    stored = r.json()
    assert stored["action"] == "new"
    r = http.post("/search", json={"query": "fly.io deploys", "limit": 5})
    assert r.status_code == 200
    hits = r.json()["memories"]
    assert [h["id"] for h in hits] == [stored["memory_id"]]
    assert hits[0]["tags"] == ["ops"]
    # A misspelt word is searched as the stored word, and the answer says so.
    r = http.post("/search", json={"query": "fly.io deplyos", "limit": 5})
    assert r.status_code == 200
    assert r.json()["read_as"] == {"deplyos": ["deploys"]}
    assert [h["id"] for h in r.json()["memories"]] == [stored["memory_id"]]


def test_one_tag_given_as_a_string_filters_as_that_tag(http):
    """`tags: "ops"` is the tag "ops" on search as on store, not the tags "o", "p", "s"."""
    stored = http.post("/memories", json={"content": "Deploys go to Fly.io from the main branch", "tags": "ops"}).json()
    http.post("/memories", json={"content": "Deploys of the docs go to Netlify", "tags": ["docs"]})
    r = http.post("/search", json={"query": "deploys", "tags": "ops"})
    assert r.status_code == 200
    assert [h["id"] for h in r.json()["memories"]] == [stored["memory_id"]]
    assert r.json()["memories"][0]["tags"] == ["ops"]


def test_progress_done_without_completion_is_complete(http):
    r = http.post("/progress", json={"feature": "CSV exporter tests", "status": "done"})
    assert r.status_code == 201 and r.json()["completion"] == 1.0
    r = http.post("/progress", json={"feature": "CSV escaping", "status": "blocked"})
    assert r.status_code == 201 and r.json()["completion"] == 0.0


def test_an_unknown_query_parameter_is_refused_not_ignored(http):
    """`?type=fact` (for memory_type) used to return every memory, unfiltered."""
    http.post("/memories", json={"content": "Deploys go to Fly.io from the main branch"})
    r = http.get("/memories", params={"type": "failure"})
    assert r.status_code == 422
    assert r.json()["error"].startswith("list_memories: unknown argument(s): type; accepted: memory_type,")
    r = http.post("/search", params={"limit": "3"}, json={"query": "deploys"})
    assert r.status_code == 422 and "unknown argument(s): limit" in r.json()["error"]
    assert http.get("/memories", params={"memory_type": "failure"}).json()["total"] == 0
    # A parameter given twice: one value would be read and the other dropped, so it is refused.
    r = http.get("/memories", params=[("memory_type", "fact"), ("memory_type", "failure")])
    assert r.status_code == 422 and "given more than once: memory_type" in r.json()["error"]


def test_get_and_delete_memory(http):
    mid = http.post("/memories", json={"content": "The staging database is Postgres 16"}).json()["memory_id"]
    got = http.get(f"/memories/{mid}")
    assert got.status_code == 200 and got.json()["content"] == "The staging database is Postgres 16"
    gone = http.delete(f"/memories/{mid}")
    assert gone.json() == {"deleted": [mid], "would_delete": [], "count": 1, "dry_run": False}
    r = http.get(f"/memories/{mid}")
    assert r.status_code == 404 and mid in r.json()["error"]


def test_stored_text_comes_back_byte_for_byte_over_http(http):
    text = "  lower-case start,\ttabs and a trailing newline\n"
    mid = http.post("/memories", json={"content": text}).json()["memory_id"]
    assert http.get(f"/memories/{mid}").json()["content"] == text


def test_context_block(http):
    http.post("/memories", json={"content": "Use ruff for linting, line length 110"})
    # get_context packs strong hits only: with the fake embedder that takes the memory's words
    # ("linting setup" holds one of its two words here: a weak hit).
    r = http.post("/context", json={"query": "ruff linting", "max_tokens": 200})
    assert r.status_code == 200
    body = r.json()
    assert body["context"].startswith("<memory>") and "ruff" in body["context"]
    assert body["tokens"] <= 200


def test_task_lifecycle_and_handoff(http):
    r = http.post("/tasks", json={"name": "migrate auth", "goal": "sessions in Redis"})
    assert r.status_code == 201
    tid = r.json()["task_id"]
    r = http.patch(f"/tasks/{tid}", json={"status": "in_progress"})
    assert r.status_code == 200 and r.json()["status"] == "in_progress"
    r = http.post(
        "/handoffs", json={"summary": "Redis client wired in", "next_steps": ["write the expiry job"], "task_id": tid}
    )
    assert r.status_code == 201
    hid = r.json()["handoff_id"]
    view = http.get(f"/tasks/{tid}").json()
    assert view["task"]["status"] == "in_progress"
    assert view["latest_handoff"]["id"] == hid
    assert view["latest_handoff"]["summary"] == "Redis client wired in"
    listed = http.get("/tasks", params={"status": "in_progress"}).json()["tasks"]
    assert [t["id"] for t in listed] == [tid]
    assert http.get("/tasks", params={"status": "done"}).json()["tasks"] == []


def test_failures_progress_and_outcomes(http):
    tid = http.post("/tasks", json={"name": "billing"}).json()["task_id"]
    headers = {"X-Engram-Session": "worker-1"}
    r = http.post(
        "/failures",
        json={"error": "timeout calling Stripe", "component": "billing", "root_cause": "no retry", "task_id": tid},
        headers=headers,
    )
    assert r.status_code == 201 and r.json()["action"] == "new"
    r = http.post(
        "/progress",
        json={"feature": "retry wrapper", "status": "done", "completion": 1.0, "task_id": tid},
        headers=headers,
    )
    assert r.status_code == 201 and r.json()["status"] == "done"
    assert http.post("/progress", json={"feature": "x", "status": "finished"}).status_code == 422
    r = http.post("/outcomes", json={"outcome": "failure", "notes": "rolled back"}, headers=headers)
    assert r.status_code == 200 and r.json() == {"session_id": "worker-1", "outcome": "failure", "notes": "rolled back"}
    view = http.get(f"/tasks/{tid}").json()
    assert len(view["failures"]) == 1 and len(view["progress"]) == 1


def test_unknown_ids_are_404(http):
    for r in (
        http.get("/tasks/t-nope"),
        http.patch("/tasks/t-nope", json={"status": "done"}),
        http.get("/memories/nope"),
        http.delete("/memories/nope"),
    ):
        assert r.status_code == 404, r.text
        assert set(r.json()) == {"error"} and "nope" in r.json()["error"]


def test_validation_errors_are_422_with_a_message(http):
    r = http.post("/memories", json={"content": "x", "importance": 2})
    assert r.status_code == 422 and "importance" in r.json()["error"]
    r = http.post("/memories", json={"content": "x", "colour": "red"})
    assert r.status_code == 422 and "colour" in r.json()["error"]
    r = http.post("/memories", json={"content": "x", "memory_type": "gossip"})
    assert r.status_code == 422 and "memory_type" in r.json()["error"]
    r = http.post("/search", json=["not", "an", "object"])
    assert r.status_code == 422
    # Rejected by the engine rather than the model: the same JSON shape.
    r = http.post("/memories", json={"content": "   "})
    assert r.status_code == 422 and r.json() == {"error": "content must not be empty"}
    r = http.patch("/tasks/t-x", json={"status": "finished"})
    assert r.status_code == 422 and "status" in r.json()["error"]


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"\xff\xfe{}", "UTF-8"),
        (b'{"query": "unterminated', "not valid JSON"),
        (b'{"query": NaN}', "NaN"),
        (b"", "empty"),
    ],
)
def test_bad_bodies_are_400(http, body, fragment):
    r = http.post("/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert fragment in r.json()["error"]


def test_unknown_route_and_method_are_json(http):
    r = http.get("/nowhere")
    assert r.status_code == 404 and "error" in r.json()
    r = http.delete("/search")
    assert r.status_code == 405 and "error" in r.json()


def test_internal_error_is_500_without_details(settings, fake, serve):
    broken = Engram(":memory:", settings=settings, embedder=fake)
    api = Api(broken)
    broken.close()  # every database call now fails with a DuckDB error, not an EngramError
    base = serve(build_app(api, token=None, settings=settings))
    r = httpx.post(f"{base}/tasks", json={"name": "x"}, timeout=30)
    assert r.status_code == 500
    assert r.json() == {"error": "internal error"}


def test_explicit_session_header_and_user(http, eng):
    r = http.post(
        "/memories",
        json={"content": "Alice prefers tabs over spaces"},
        headers={"X-Engram-Session": "agent-7", "X-Engram-User": "alice"},
    )
    mid = r.json()["memory_id"]
    m = http.get(f"/memories/{mid}", headers={"X-Engram-User": "alice"}).json()
    assert m["session_id"] == "agent-7" and m["user_id"] == "alice"
    # Another user does not see it.
    assert http.get(f"/memories/{mid}").status_code == 404
    assert http.post("/search", json={"query": "tabs spaces"}).json()["memories"] == []
    # A named session stays open for the client's next request.
    assert eng.store_db.get_session("agent-7").status == "active"


def test_implicit_session_is_per_connection_and_ends_cleanly(http, eng):
    a = http.post("/memories", json={"content": "first note about caching"}).json()["memory_id"]
    b = http.post("/memories", json={"content": "second note about queues"}).json()["memory_id"]
    sa = http.get(f"/memories/{a}").json()["session_id"]
    sb = http.get(f"/memories/{b}").json()["session_id"]
    assert sa == sb and sa.startswith("http-")  # one keep-alive connection, one session
    assert eng.store_db.get_session(sa).status == "ended"  # not reported later as interrupted
    with httpx.Client(base_url=str(http.base_url), timeout=30) as other:
        c = other.post("/memories", json={"content": "third note about logging"}).json()["memory_id"]
        assert http.get(f"/memories/{c}").json()["session_id"] != sa


def test_healthz(http):
    r = http.get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok" and r.json()["model"] == "fake-hash"


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def parse_prometheus(text: str) -> tuple[dict[str, str], list[tuple[str, str, float]]]:
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            assert parts[1] in ("HELP", "TYPE"), line
            if parts[1] == "TYPE":
                assert parts[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
                types[parts[2]] = parts[3]
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        samples.append((m.group(1), m.group(2) or "", float(m.group(4))))
    return types, samples


def test_metrics_are_prometheus_text(http):
    http.post("/memories", json={"content": "The CI runs on GitHub Actions"})
    http.post("/memories", json={"content": "Our retry policy is exponential backoff", "memory_type": "strategy"})
    http.post("/search", json={"query": "CI"})
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    types, samples = parse_prometheus(r.text)
    for name, _, _ in samples:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or base in types, f"{name} has no TYPE line"
    values = {(n, lbl): v for n, lbl, v in samples}
    assert types["engram_memories"] == "gauge"
    assert values[("engram_memories", '{memory_type="fact",status="active"}')] == 1
    assert values[("engram_memories", '{memory_type="strategy",status="active"}')] == 1
    assert values[("engram_memories", '{memory_type="failure",status="active"}')] == 0
    assert values[("engram_stores_total", '{action="new"}')] == 2
    assert values[("engram_recalls_total", "")] == 1
    assert types["engram_request_seconds"] == "histogram"
    assert values[("engram_request_seconds_count", '{op="store_memory"}')] == 2
    assert ("engram_pruned_total", "") in values and ("engram_consolidated_total", "") in values


def test_openapi_document(http):
    r = http.get("/openapi.json")
    doc = json.loads(r.text)
    assert doc["openapi"].startswith("3.")
    for spec in OPS:
        entry = doc["paths"][spec.path][spec.method.lower()]
        assert entry["operationId"] == spec.op and entry["summary"]
        if spec.body is not None:
            ref = entry["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[1] in doc["components"]["schemas"]
    for path in ("/metrics", "/healthz", "/openapi.json"):
        assert path in doc["paths"]
    assert "security" not in doc  # no token, no scheme
    props = doc["components"]["schemas"]["StoreMemory"]["properties"]
    assert {"content", "memory_type", "importance", "tags"} <= set(props)


@needs_maintenance
def test_stats_and_maintenance(http):
    http.post("/memories", json={"content": "The API gateway is Kong"})
    r = http.get("/stats")
    assert r.status_code == 200 and isinstance(r.json(), dict)
    r = http.post("/maintenance", json={"apply": False})
    assert r.status_code == 200 and isinstance(r.json(), dict)
    r = http.post("/maintenance")  # empty body: apply with defaults
    assert r.status_code == 200


# ---------------------------------------------------------------- auth


@pytest.fixture
def secured(api, settings, serve):
    return serve(build_app(api, token=TOKEN, settings=settings))


def test_token_required_everywhere_but_healthz(secured):
    with httpx.Client(base_url=secured, timeout=30) as c:
        for method, path in [
            ("GET", "/stats"),
            ("GET", "/metrics"),
            ("GET", "/openapi.json"),
            ("POST", "/memories"),
            ("GET", "/tasks/t-1"),
            ("GET", "/nowhere"),
        ]:
            r = c.request(method, path, json={"content": "x"})
            assert r.status_code == 401, (path, r.text)
            assert "bearer" in r.json()["error"] and r.headers["www-authenticate"] == "Bearer"
            r = c.request(method, path, json={"content": "x"}, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401 and "invalid" in r.json()["error"]
        assert c.get("/healthz").status_code == 200


def test_right_token_is_accepted(secured):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=secured, timeout=30, headers=auth) as c:
        r = c.post("/memories", json={"content": "Tokens rotate every 90 days"})
        assert r.status_code == 200
        assert c.post("/search", json={"query": "token rotation"}).json()["memories"]
        doc = c.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert doc["paths"]["/healthz"]["get"]["security"] == []


def test_mcp_transport_is_mounted_behind_the_token(api, settings, serve):
    from mcp.server import MCPServer

    mcp = MCPServer("engram-test")

    @mcp.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    app = build_app(api, token=TOKEN, settings=settings, mcp_app=mcp.streamable_http_app(json_response=True))
    base = serve(app)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=base, timeout=30) as c:
        assert c.post("/mcp", json=init, headers=headers).status_code == 401
        r = c.post("/mcp", json=init, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200, r.text
        assert r.json()["result"]["serverInfo"]["name"] == "engram-test"
        # The JSON routes still answer next to it.
        assert c.get("/healthz").json()["status"] == "ok"


# ---------------------------------------------------------------- binding


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host):
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "engram.example.com"])
def test_other_addresses_need_a_token(host):
    with pytest.raises(BindRefused, match="ENGRAM_TOKEN"):
        check_bind(host, None)
    check_bind(host, TOKEN)


def test_token_defaults_to_the_settings_token(api, tmp_path, serve):
    from engram import Settings

    s = Settings.from_env({"ENGRAM_HOME": str(tmp_path), "ENGRAM_TOKEN": TOKEN})
    base = serve(build_app(api, settings=s))  # a caller that forgets token= still gets protection
    assert httpx.get(f"{base}/stats", timeout=30).status_code == 401
    ok = httpx.get(f"{base}/stats", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert ok.status_code == 200


def test_daemon_answers_on_its_socket_only_once_http_is_up(settings, fake, clock):
    """Clients are told the daemon is up when its socket answers; HTTP must be listening by then."""
    import socket
    import threading

    from engram.server.daemon import Daemon
    from engram.server.rpc import RpcError
    from engram.server.rpc_client import RpcClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = Daemon(settings, engram=Engram(":memory:", settings=settings, embedder=fake, clock=clock))
    starting = threading.Thread(target=daemon.start, kwargs={"http": True, "port": port})
    starting.start()
    try:

        def answers() -> bool:
            try:
                with RpcClient(settings.socket_path, client="probe") as c:
                    c.call("health")
            except RpcError:
                return False
            return True

        # Another thread's start-up, with no event to wait on: poll the socket closely.
        wait_until(answers, timeout=60, every=0.005, what="the daemon to answer on its socket")
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        starting.join()
        daemon.close()


def test_resume_list_and_interruption_routes(http, eng):
    headers = {"X-Engram-Session": "worker-9"}
    tid = http.post("/tasks", json={"name": "billing"}, headers=headers).json()["task_id"]
    other = http.post("/tasks", json={"name": "old"}).json()["task_id"]
    http.patch(f"/tasks/{other}", json={"status": "done"})
    http.post(
        "/handoffs",
        json={"summary": "Retry wrapper next", "next_steps": ["add retry wrapper"], "task_id": tid},
        headers=headers,
    )
    tasks = http.get("/tasks", params={"limit": 1}).json()["tasks"]
    assert [t["id"] for t in tasks] == [tid] and tasks[0]["last_activity"]["memory_type"] == "handoff"
    assert http.get("/tasks", params={"limit": "many"}).status_code == 422
    r = http.post(f"/tasks/{tid}/resume")
    assert r.status_code == 200
    body = r.json()
    assert body["next_step"] == "add retry wrapper" and body["plan"][0]["status"] == "not_started"
    small = http.post(f"/tasks/{tid}/resume", json={"max_tokens": 60}).json()
    assert small["tokens"] <= 60
    assert http.post(f"/tasks/{tid}/resume", json={"max_tokens": 5}).status_code == 422
    assert http.post("/tasks/t-missing/resume").status_code == 404
    r = http.post("/interruptions", json={"reason": "rate_limit", "task_id": tid}, headers=headers)
    assert r.status_code == 200 and r.json()["reason"] == "rate_limit"
    assert eng.store_db.get_session("worker-9").status == "interrupted"
    assert http.post("/interruptions", json={"reason": "bored"}).status_code == 422
    got = http.post("/search", json={"query": "retry wrapper"}).json()["interrupted_sessions"]
    assert [(s["session_id"], s["reason"]) for s in got] == [("worker-9", "rate_limit")]
