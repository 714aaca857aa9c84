"""The MCP tools in-process through the SDK's client: listing, every tool, and refusals of bad input."""

from __future__ import annotations

import json

import pytest
from mcp.client import Client

from engram.api import TOOLS as API_TOOLS
from engram.api import Api, Ctx
from engram.server.backend import LocalBackend, RemoteBackend
from engram.server.daemon import run_daemon
from engram.server.mcp import TOOL_NAMES, build_mcp
from engram.server.rpc_client import RpcClient

pytestmark = pytest.mark.anyio

SESSION = "s-mcp-test"


@pytest.fixture
def api(eng):
    return Api(eng)


@pytest.fixture
def server(api):
    backend = LocalBackend(api, Ctx(SESSION, client="test"))
    return build_mcp(lambda ctx: backend)


@pytest.fixture
async def client(server):
    async with Client(server) as c:
        yield c


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory):
    # Opening an engine costs about a second; the refusal tests share one (they barely write).
    from engram import Engram, Settings
    from engram.models.embedding import FakeEmbedder

    settings = Settings.from_env({"ENGRAM_HOME": str(tmp_path_factory.mktemp("home"))})
    eng = Engram(":memory:", settings=settings, embedder=FakeEmbedder())
    yield Api(eng)
    eng.close()


@pytest.fixture
async def shared(shared_api):
    backend = LocalBackend(shared_api, Ctx(SESSION, client="test"))
    async with Client(build_mcp(lambda ctx: backend)) as c:
        yield c


async def ok(client: Client, tool: str, args: dict | None = None) -> dict:
    r = await client.call_tool(tool, args or {})
    assert not r.is_error, f"{tool} failed: {r.content[0].text}"
    assert r.structured_content is not None
    # The text block carries the same result for clients that ignore structured output.
    assert json.loads(r.content[0].text) == r.structured_content
    return r.structured_content


async def refused(client: Client, tool: str, args: dict) -> str:
    r = await client.call_tool(tool, args)
    assert r.is_error, f"{tool} accepted {args!r}: {r.structured_content}"
    text = r.content[0].text
    assert "Traceback" not in text
    return text


# ---------------------------------------------------------------- listing


# resume_task claims the task it resumes (engram.continuity.claims): a write, if an idempotent one.
READ_ONLY_TOOLS = ("recall_memory", "get_task", "get_context", "memory_stats", "list_tasks", "get_memory")


async def test_lists_the_21_tools_with_annotations_and_schemas(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == set(TOOL_NAMES) == set(API_TOOLS)
    assert len(tools) == 21
    for name in READ_ONLY_TOOLS:
        assert tools[name].annotations.read_only_hint is True, name
    assert tools["forget_memory"].annotations.destructive_hint is True
    for name, t in tools.items():
        a = t.annotations
        assert a is not None and a.read_only_hint is not None and a.destructive_hint is not None, name
        assert a.idempotent_hint is not None, name
        if name != "forget_memory":
            assert a.destructive_hint is False, name
        if name not in READ_ONLY_TOOLS:
            assert a.read_only_hint is False, name
        assert len(t.description) > 80, f"{name} needs a docstring for the calling model"
        assert t.output_schema["type"] == "object", name
        assert t.input_schema["type"] == "object", name
    store = tools["store_memory"].input_schema
    assert store["required"] == ["content"]
    assert {"content", "memory_type", "importance", "tags", "task_id"} <= set(store["properties"])
    assert "fact" in store["properties"]["memory_type"]["enum"]
    assert set(tools["recall_memory"].input_schema["properties"]) == {
        "query",
        "limit",
        "memory_type",
        "task_id",
        "tags",
        "as_of",
        "mode",
        "explain",
        "all_projects",
        "compact",
    }
    assert set(tools["forget_memory"].input_schema["properties"]) == {"memory_id", "query", "dry_run", "all_projects"}
    assert tools["get_task"].input_schema["required"] == ["task_id"]
    # The calling model never sees the injected MCP context as an argument.
    assert all("ctx" not in t.input_schema["properties"] for t in tools.values())


# ---------------------------------------------------------------- every tool


async def test_every_tool_works_through_mcp(client):
    task = await ok(client, "create_task", {"name": "Migrate billing to Stripe", "goal": "no invoices lost"})
    tid = task["task_id"]
    assert tid.startswith("t-") and task["status"] == "open"

    stored = await ok(
        client,
        "store_memory",
        {
            "content": "Billing webhooks must be idempotent because Stripe retries them.",
            "memory_type": "strategy",
            "importance": 0.9,
            "tags": ["billing"],
            "task_id": tid,
        },
    )
    assert stored["action"] == "new"
    mid = stored["memory_id"]

    rec = await ok(client, "recall_memory", {"query": "stripe webhook retries", "limit": 5, "explain": True})
    assert rec["memories"][0]["id"] == mid
    assert "explain" in rec["memories"][0]
    assert set(rec) >= {"memories", "handoff", "related_failures", "interrupted_sessions"}
    typed = await ok(client, "recall_memory", {"query": "stirpe webhoks retries"})
    assert typed["memories"][0]["id"] == mid
    assert typed["read_as"] == {"stirpe": ["stripe"], "webhoks": ["webhooks"]}

    upd = await ok(
        client,
        "update_memory",
        {"memory_id": mid, "content": "Billing webhooks must be idempotent: Stripe retries for 3 days."},
    )
    assert upd["action"] == "update" and upd["memory_id"] == mid
    rec = await ok(client, "recall_memory", {"query": "stripe retries", "tags": ["billing"]})
    assert rec["memories"][0]["content"].endswith("retries for 3 days.")

    prog = await ok(
        client,
        "track_progress",
        {"feature": "webhook handler", "status": "in_progress", "completion": 0.5, "task_id": tid},
    )
    assert prog["completion"] == 0.5 and prog["task_id"] == tid

    fail = await ok(
        client,
        "track_failure",
        {
            "error": "duplicate invoice rows",
            "component": "billing",
            "root_cause": "no idempotency key",
            "task_id": tid,
            "fix": "unique index on event id",
        },
    )
    assert fail["action"] == "new"

    hand = await ok(
        client,
        "session_handoff",
        {
            "summary": "Webhook handler half done",
            "completed": ["schema"],
            "in_progress": ["handler"],
            "blocked": [],
            "next_steps": ["write replay test"],
            "task_id": tid,
        },
    )
    assert hand["task_id"] == tid

    view = await ok(client, "get_task", {"task_id": tid})
    assert view["task"]["id"] == tid
    assert [h["id"] for h in view["handoffs"]] == [hand["handoff_id"]]
    assert len(view["failures"]) == 1 and len(view["progress"]) == 1
    assert view["latest_handoff"]["next_steps"] == ["write replay test"]

    ctx = await ok(client, "get_context", {"query": "billing webhook", "max_tokens": 400, "task_id": tid})
    assert ctx["context"].startswith("<memory>") and "Webhook handler half done" in ctx["context"]
    assert ctx["tokens"] <= 400

    done = await ok(client, "update_task", {"task_id": tid, "status": "done"})
    assert done["status"] == "done"

    out = await ok(client, "session_outcome", {"outcome": "success", "notes": "shipped"})
    assert out == {"session_id": SESSION, "outcome": "success", "notes": "shipped"}

    stats = await ok(client, "memory_stats")
    assert isinstance(stats, dict) and stats

    plan = await ok(client, "consolidate_memory", {"apply": False})
    assert isinstance(plan, dict)

    preview = await ok(client, "forget_memory", {"query": "idempotent stripe", "dry_run": True})
    assert preview["would_delete"] == [mid] and preview["deleted"] == []
    gone = await ok(client, "forget_memory", {"memory_id": mid})
    assert gone == {"deleted": [mid], "would_delete": [], "count": 1, "dry_run": False}
    rec = await ok(client, "recall_memory", {"query": "stripe retries idempotent", "mode": "bm25"})
    assert mid not in [m["id"] for m in rec["memories"]]


async def test_long_content_is_stored_as_linked_chunks(client):
    paragraphs = [
        f"Section {i}: the ingest worker {word} batches every night."
        for i, word in enumerate(["compresses", "validates", "deduplicates", "encrypts", "uploads"] * 12)
    ]
    content = " ".join(paragraphs)
    assert 2000 < len(content) < 100_000
    r = await ok(client, "store_memory", {"content": content})
    assert r["action"] == "new" and len(r["chunk_ids"]) >= 3
    assert "chunks" in r["reason"]


# ---------------------------------------------------------------- bad input


BAD_INPUTS = [
    # (tool, arguments, words the error must contain)
    ("store_memory", {"content": 123}, ["content", "valid string"]),
    ("store_memory", {"content": ["a", "b"]}, ["content", "valid string"]),
    ("store_memory", {}, ["missing required argument content"]),
    ("store_memory", {"content": ""}, ["content must not be empty"]),
    ("store_memory", {"content": "   \n\t "}, ["content must not be empty"]),
    ("store_memory", {"content": "x", "importance": 1.5}, ["importance", "between 0 and 1", "1.5"]),
    ("store_memory", {"content": "x", "importance": -0.1}, ["importance", "between 0 and 1"]),
    ("store_memory", {"content": "x", "importance": "high"}, ["importance", "valid number", "'high'"]),
    ("store_memory", {"content": "x", "memory_type": "gossip"}, ["memory_type", "'gossip'"]),
    ("store_memory", {"content": "x", "tags": [1, 2]}, ["tags"]),
    ("store_memory", {"content": "x", "task_id": "t-nope"}, ["no task with id 't-nope'"]),
    ("store_memory", {"content": "x" * 100_001}, ["content", "100,001", "limit is 100,000"]),
    ("store_memory", {"content": "nul\x00byte"}, ["NUL"]),
    ("store_memory", {"content": "x", "colour": "red"}, ["unknown argument(s): colour", "accepted: content"]),
    ("recall_memory", {"query": "x", "limit": 0}, ["limit", "1 to 1000"]),
    ("recall_memory", {"query": "x", "limit": "many"}, ["limit", "valid integer"]),
    ("recall_memory", {"query": "x", "as_of": "last tuesday"}, ["as_of", "ISO 8601"]),
    ("recall_memory", {"query": "x", "mode": "fuzzy"}, ["mode", "'fuzzy'"]),
    ("recall_memory", {"query": ""}, ["query must not be empty"]),
    ("recall_memory", {"q": "x"}, ["unknown argument(s): q"]),
    ("update_memory", {"memory_id": "0123456789abcdef", "content": "x"}, ["no memory with id"]),
    ("update_memory", {"memory_id": "0123456789abcdef"}, ["missing required argument content"]),
    ("forget_memory", {}, ["exactly one of memory_id or query"]),
    ("forget_memory", {"memory_id": "a", "query": "b"}, ["exactly one of memory_id or query"]),
    ("forget_memory", {"memory_id": "does-not-exist"}, ["no memory with id 'does-not-exist'"]),
    ("get_task", {"task_id": "t-000000000000"}, ["no task with id 't-000000000000'"]),
    ("get_task", {}, ["missing required argument task_id"]),
    ("update_task", {"task_id": "t-000000000000", "status": "done"}, ["no task with id"]),
    ("update_task", {"task_id": "t-1", "status": "finished"}, ["status", "'finished'"]),
    ("create_task", {"name": "  "}, ["name must not be empty"]),
    ("track_progress", {"feature": "f", "status": "done", "completion": 2}, ["completion", "between 0 and 1"]),
    ("track_progress", {"feature": "f", "status": "finished"}, ["status", "'finished'"]),
    ("track_failure", {"error": "boom"}, ["missing required argument component"]),
    ("session_outcome", {"outcome": "meh"}, ["outcome", "'meh'"]),
    ("session_handoff", {"summary": "s", "next_steps": "do it"}, []),  # a lone string is one step: fine
    ("get_context", {"query": "x", "max_tokens": 10}, ["max_tokens", "50 to 100000"]),
    ("memory_stats", {"verbose": True}, ["unknown argument(s): verbose"]),
]


@pytest.mark.parametrize(
    ("tool", "args", "words"), BAD_INPUTS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_INPUTS)]
)
async def test_bad_input_is_a_tool_error_that_names_the_problem(shared, tool, args, words):
    client = shared
    if tool == "session_handoff":
        # Control case: the engine treats one string as a one-item list, so this is not an error.
        r = await ok(client, tool, args)
        assert r["handoff_id"]
        return
    text = await refused(client, tool, args)
    assert text.startswith(f"{tool}: "), text
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"


async def test_server_keeps_serving_after_errors(client):
    for tool, args, _ in BAD_INPUTS[:12]:
        if tool != "session_handoff":
            await refused(client, tool, args)
    r = await ok(client, "store_memory", {"content": "The staging database is Postgres 16."})
    assert r["action"] == "new"


async def test_unknown_tool_is_an_error(client):
    r = await client.call_tool("delete_everything", {})
    assert r.is_error and "delete_everything" in r.content[0].text


ODD_TEXT = [
    "Emoji 🧠🔥 and a family: 👩‍👩‍👧‍👦 (zero-width joiners)",
    "RTL: שלום עולם and Arabic مرحبا mixed with English",
    "Combining: e\u0301 vs \u00e9, Zalgo z\u0336\u0337a\u0334l\u0335g\u0338o",
    "CJK 記憶エンジン 메모리 and fullwidth ＡＢＣ",
    "Zero\u200bwidth\u200cspace and a BOM\ufeff inside",
    "Line one\nline two\ttabbed\r\nwindows line",
    "Math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√ and astral 𐍈",
]


@pytest.mark.parametrize("text", ODD_TEXT)
async def test_odd_unicode_is_stored_verbatim(client, api, text):
    r = await ok(client, "store_memory", {"content": text, "memory_type": "assumption", "tags": [text[:10]]})
    assert r["action"] == "new" and r["content"] == text
    got = api.call("get_memory", {"memory_id": r["memory_id"]}, Ctx(SESSION))
    assert got["content"] == text
    assert got["tags"] == [text[:10].strip()]


SQL_LIKE = [
    "Robert'); DROP TABLE memories; --",
    "' OR '1'='1' --",
    "1; DELETE FROM memories WHERE 1=1; SELECT * FROM sessions",
    'x" UNION SELECT content FROM memories --',
    "%_%' ESCAPE '\\'; PRAGMA database_list; /* comment */",
]


@pytest.mark.parametrize("text", SQL_LIKE)
async def test_sql_looking_strings_are_plain_text(client, api, text):
    keep = await ok(client, "store_memory", {"content": "The CI runs on GitHub Actions with 4 workers."})
    r = await ok(client, "store_memory", {"content": text, "tags": [text]})
    assert r["action"] == "new" and r["content"] == text
    got = api.call("get_memory", {"memory_id": r["memory_id"]}, Ctx(SESSION))
    assert got["content"] == text and got["tags"] == [text]
    # As a search query, a task name and a forget query they are just words too.
    await ok(client, "recall_memory", {"query": text, "mode": "bm25"})
    await ok(client, "create_task", {"name": text})
    await ok(client, "forget_memory", {"query": text, "dry_run": True})
    # Every table is still there and still holds the earlier memory.
    rec = await ok(client, "recall_memory", {"query": "GitHub Actions workers", "mode": "bm25"})
    assert keep["memory_id"] in [m["id"] for m in rec["memories"]]
    assert api.eng.get(keep["memory_id"]).content == keep["content"]


# ---------------------------------------------------------------- transport failures


async def test_unreachable_daemon_is_a_tool_error_not_a_crash(tmp_path):
    rpc = RpcClient(tmp_path / "nobody.sock", client="test")  # no spawn: nothing will answer
    backend = RemoteBackend(rpc)
    async with Client(build_mcp(lambda ctx: backend)) as c:
        text = await refused(c, "recall_memory", {"query": "anything"})
        assert "no engram daemon" in text and str(tmp_path) in text
        assert len((await c.list_tools()).tools) == len(TOOL_NAMES)  # still serving
    rpc.close()


def test_daemon_refuses_public_http_without_token_before_starting(settings):
    from engram.server.http import BindRefused

    with pytest.raises(BindRefused, match="ENGRAM_TOKEN"):
        run_daemon(settings, http=True, host="0.0.0.0", port=0)
    # Refused before taking the lock or opening anything: no daemon, no socket, no database.
    assert not settings.socket_path.exists()
    assert not settings.db_path.exists()
