"""One declaration per operation (engram.ops): the MCP schemas, the HTTP bodies and OpenAPI, the CLI
arguments and the argument check all come from it, and the facade does the work the adapters did."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args, get_origin

import httpx
import numpy as np
import pytest
from mcp.client import Client

from engram import ops
from engram.api import Api, Ctx
from engram.cli import build_parser, main
from engram.core.types import EngramError, NotFound
from engram.server import rpc
from engram.server.backend import LocalBackend
from engram.server.http import JSON, build_app
from engram.server.http_routes import OPS as ROUTES
from engram.server.http_routes import openapi_document
from engram.server.mcp import build_mcp


@pytest.fixture
def api(eng):
    return Api(eng)


def mcp_tools(api) -> list:
    server = build_mcp(lambda ctx: LocalBackend(api, Ctx("s-ops")))

    async def listing():
        async with Client(server) as c:
            return (await c.list_tools()).tools

    return asyncio.run(listing())


def choices(t) -> tuple | None:
    """The values of a Literal in a declared type (optional or not), else None."""
    for a in (t, *get_args(t)):
        if get_origin(a) is Literal:
            return get_args(a)
    return None


# ---------------------------------------------------------------- derived from the declaration


def bounds(prop: dict) -> tuple:
    """A schema property's (minimum, maximum); an optional number (completion) has them in its
    number branch."""
    bounded = next((b for b in prop.get("anyOf", []) if "minimum" in b or "maximum" in b), prop)
    return bounded.get("minimum"), bounded.get("maximum")


def test_mcp_tools_are_the_declared_ones_with_the_declared_schemas(api):
    tools = mcp_tools(api)
    assert [t.name for t in tools] == list(ops.TOOLS) == [o.name for o in ops.OPS_LIST if o.mcp]
    for t in tools:
        op = ops.OPS[t.name]
        assert t.title == op.title and t.description == op.description, t.name
        schema = t.input_schema
        assert list(schema["properties"]) == list(op.names), t.name
        assert schema.get("required", []) == [p.name for p in op.params if p.required], t.name
        for p in op.params:
            prop = schema["properties"][p.name]
            assert prop["description"] == p.description, (t.name, p.name)
            assert bounds(prop) == (p.ge, p.le), (t.name, p.name)
            if not p.required:
                assert prop["default"] == p.default, (t.name, p.name)
            if choices(p.type):
                enums = [e for branch in prop.get("anyOf", [prop]) for e in branch.get("enum", [])]
                assert tuple(enums) == choices(p.type), (t.name, p.name)


def test_http_routes_bodies_and_openapi_come_from_the_declaration():
    doc = openapi_document()
    declared = [o for o in ops.OPS_LIST if o.http is not None]
    assert [(r.method, r.path, r.op) for r in ROUTES] == [(o.http.method, o.http.path, o.name) for o in declared]
    for op in declared:
        entry = doc["paths"][op.http.path][op.http.method.lower()]
        assert entry["operationId"] == op.name and entry["summary"] == op.http.summary
        assert str(op.http.status) in entry["responses"]
        in_path = [p["name"] for p in entry.get("parameters", []) if p["in"] == "path"]
        in_query = [p["name"] for p in entry.get("parameters", []) if p["in"] == "query"]
        # ?project= is every route's (the project the request works in, docs/projects.md).
        assert in_path == list(ops.path_params(op.http.path)) and in_query == [*op.http.query, "project"]
        in_body: list[str] = []
        if "requestBody" in entry:
            name = entry["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
            body = doc["components"]["schemas"][name]
            in_body = list(body["properties"])
            assert body["additionalProperties"] is False  # unknown keys are refused
            defaults = dict(op.http.defaults)
            for pname, prop in body["properties"].items():
                p = op.param(pname)
                assert prop["description"] == p.description
                assert bounds(prop) == (p.ge, p.le)
                if not p.required:
                    assert prop["default"] == defaults.get(pname, p.default)
            assert entry["requestBody"]["required"] is not op.http.empty_body_ok
        places = in_path + [q for q in in_query if q != "project"] + in_body
        assert len(places) == len(set(places)) and set(places) <= set(op.names), op.name
        if op.http.method != "DELETE":  # DELETE /memories/{id} forgets one id, not by query
            assert set(places) == set(op.names), op.name


def subparser(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_cli_arguments_come_from_the_declaration():
    root = build_parser()
    specs = [(op, spec) for op in ops.OPS_LIST for spec in op.cli]
    assert len(specs) >= 18
    for op, spec in specs:
        c = subparser(root, spec.command)
        assert c.get_default("op") == op.name
        actions = {a.dest: a for a in c._actions if a.dest not in ("help", "json")}
        wanted = [p for p in op.params if spec.params is None or p.name in spec.params]
        assert set(actions) == {p.name for p in wanted}, spec.command
        for p in wanted:
            a = actions[p.name]
            if p.name in spec.positional:
                assert a.option_strings == [], (spec.command, p.name)
            elif p.type is bool and p.default is True:  # on by default: the option turns it off
                assert a.option_strings == ["--no-" + p.option.removeprefix("--")], (spec.command, p.name)
                assert isinstance(a, argparse._StoreFalseAction), (spec.command, p.name)
            else:
                assert a.option_strings == [p.option] and a.required == p.required, (spec.command, p.name)
            assert a.default is argparse.SUPPRESS  # not given: the declared default applies
            assert p.description.rstrip(".").removeprefix("false: ") in a.help
            if choices(p.type):
                assert tuple(a.choices) == choices(p.type), (spec.command, p.name)


def test_every_api_method_takes_exactly_the_declared_arguments():
    # The declaration holds the defaults; the method receives every argument, filled in.
    for op in ops.OPS_LIST:
        params = list(inspect.signature(getattr(Api, op.name)).parameters.values())[2:]  # self, ctx
        assert [p.name for p in params] == list(op.names), op.name
        assert all(p.default is inspect.Parameter.empty for p in params), op.name


# ---------------------------------------------------------------- one argument check, one error format


def test_check_fills_defaults_and_names_every_problem():
    assert ops.check("get_context", {"query": "deploys"}) == {
        "query": "deploys",
        "max_tokens": 1500,
        "task_id": None,
        "limit": 20,
        "tags": None,
        "all_projects": False,
    }
    with pytest.raises(EngramError, match=r"^store_memory: unknown argument\(s\): colour; accepted: content,"):
        ops.check("store_memory", {"content": "x", "colour": "red"})
    with pytest.raises(EngramError, match=r"^get_task: invalid arguments: missing required argument task_id$"):
        ops.check("get_task", {})
    with pytest.raises(EngramError, match=r"importance must be a number between 0 and 1 \(got 2\)"):
        ops.check("store_memory", {"content": "x", "importance": 2})
    with pytest.raises(EngramError, match="numbers must be finite"):
        ops.check("store_memory", {"content": "x", "importance": float("nan")})
    with pytest.raises(EngramError, match="arguments must be an object"):
        ops.check("memory_stats", ["not", "a", "dict"])
    with pytest.raises(EngramError, match="unknown operation 'nope'"):
        ops.check("nope", {})


def test_one_refusal_reads_the_same_over_mcp_http_and_the_cli(api, settings, serve, capsys):
    expected = "recall_memory: invalid arguments: limit must be a whole number from 1 to 1000 (got 0)"

    async def over_mcp():
        async with Client(build_mcp(lambda ctx: LocalBackend(api, Ctx("s-ops")))) as c:
            r = await c.call_tool("recall_memory", {"query": "x", "limit": 0})
            assert r.is_error
            return r.content[0].text

    assert asyncio.run(over_mcp()) == expected
    base = serve(build_app(api, token=None, settings=settings))
    r = httpx.post(f"{base}/search", json={"query": "x", "limit": 0}, timeout=30)
    assert r.status_code == 422 and r.json() == {"error": expected}
    assert main(["recall", "x", "--limit", "0"], api_factory=lambda s: api) == 1
    assert capsys.readouterr().err.strip() == f"error: {expected}"


def test_a_bad_list_argument_is_one_plain_refusal(api):
    """A list-or-string argument (tags, next_steps, ...) is refused in one phrase naming what it
    takes, not once per member of the union pydantic tried ("next_steps.list[str].0: ...")."""
    with pytest.raises(EngramError) as e:
        ops.check("session_handoff", {"summary": "s", "next_steps": [1, 2], "completed": 5})
    assert str(e.value) == (
        "session_handoff: invalid arguments: completed must be a list of strings or "
        "one string (got 5); next_steps must be a list of strings or one string "
        "(got [1, 2])"
    )

    async def over_mcp():
        async with Client(build_mcp(lambda ctx: LocalBackend(api, Ctx("s-ops")))) as c:
            r = await c.call_tool("recall_memory", {"query": "x", "tags": ["ok", 7]})
            assert r.is_error
            return r.content[0].text

    assert asyncio.run(over_mcp()) == (
        "recall_memory: invalid arguments: tags must be a list of strings or one string (got ['ok', 7])"
    )


def test_http_refuses_a_path_parameter_in_the_body(api, settings, serve):
    base = serve(build_app(api, token=None, settings=settings))
    tid = httpx.post(f"{base}/tasks", json={"name": "billing"}, timeout=30).json()["task_id"]
    r = httpx.patch(f"{base}/tasks/{tid}", json={"task_id": "t-other", "status": "done"}, timeout=30)
    assert r.status_code == 422 and "unknown argument(s): task_id" in r.json()["error"]


# ---------------------------------------------------------------- the facade does what adapters did


def test_store_refuses_a_task_that_does_not_exist_as_handoff_does(eng):
    with pytest.raises(NotFound, match="no task with id 't-bogus'"):
        eng.store("Deploys go to Fly.io", task_id="t-bogus")
    with pytest.raises(NotFound, match="no task with id 't-bogus'"):
        eng.handoff("summary", task_id="t-bogus")
    theirs = eng.create_task("billing", user_id="bob")
    with pytest.raises(NotFound):
        eng.store("Deploys go to Fly.io", task_id=theirs.id, user_id="alice")
    with pytest.raises(NotFound):
        eng.store_many(
            [{"content": "a", "user_id": "alice"}, {"content": "b", "task_id": theirs.id, "user_id": "alice"}]
        )
    assert len(eng.index) == 0  # refused before anything of the batch was stored
    mine = eng.create_task("billing", user_id="alice")
    assert eng.store("Deploys go to Fly.io", task_id=mine.id, user_id="alice").memory.task_id == mine.id


def test_library_users_get_the_token_budgeted_context(eng, api):
    task = eng.create_task("billing migration")
    eng.handoff("Stripe webhooks half done", next_steps=["add retry wrapper"], task_id=task.id)
    for i in range(30):
        eng.store(f"Billing fact number {i}: invoices are retried {i} times before alerting", task_id=task.id)
    small = eng.context("billing invoices", max_tokens=120, task_id=task.id)
    assert small["context"].startswith("<memory>\nLatest handoff") and small["context"].endswith("</memory>")
    assert small["tokens"] <= 120 and 1 <= len(small["memory_ids"]) < 30
    large = eng.context("billing invoices", max_tokens=5000, task_id=task.id)
    assert len(large["memory_ids"]) > len(small["memory_ids"])
    with pytest.raises(EngramError, match="max_tokens must be a whole number from 50 to 100000"):
        eng.context("billing", max_tokens=10)
    # The adapter calls the facade once and renders it: the same block through the Api.
    via_api = api.call(
        "get_context", {"query": "billing invoices", "max_tokens": 5000, "task_id": task.id}, Ctx("s-ops")
    )
    assert via_api["context"] == eng.context("billing invoices", max_tokens=5000, task_id=task.id)["context"]


# ---------------------------------------------------------------- one JSON encoder


@dataclass(frozen=True)
class Point:
    x: int


def test_one_json_encoder_for_http_rpc_and_cli():
    value = {
        "at": datetime(2025, 3, 1, 9, 0, tzinfo=UTC),
        "ids": {"b", "a"},
        "path": Path("/tmp/x"),
        "score": np.float32(0.5),
        "vec": np.arange(2),
        "point": Point(3),
    }
    expected = {
        "at": "2025-03-01T09:00:00+00:00",
        "ids": ["a", "b"],
        "path": "/tmp/x",
        "score": 0.5,
        "vec": [0, 1],
        "point": {"x": 3},
    }
    assert json.loads(ops.dumps(value)) == expected
    assert json.loads(rpc.dumps(value)) == expected
    assert json.loads(JSON(value).body) == expected
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        ops.dumps({"x": object()})


# ---------------------------------------------------------------- the worked example: get_context(tags)


def test_get_context_tags_work_over_mcp_http_and_the_cli(api, settings, serve, capsys):
    """One Param in the declaration plus its use in Engram.context: the filter works on every door."""
    ctx = Ctx("s-ops")
    api.call(
        "store_memory",
        {"content": "Invoices retry three times, then page the billing on-call", "tags": ["billing"]},
        ctx,
    )
    api.call("store_memory", {"content": "Invoices retry alerts go to the ops channel first", "tags": ["ops"]}, ctx)
    both = api.call("get_context", {"query": "invoices retry"}, ctx)["context"]
    assert "billing on-call" in both and "ops channel" in both  # the control: without tags, both

    async def over_mcp():
        async with Client(build_mcp(lambda c: LocalBackend(api, ctx))) as c:
            r = await c.call_tool("get_context", {"query": "invoices retry", "tags": ["billing"]})
            assert not r.is_error, r.content[0].text
            return r.structured_content["context"]

    base = serve(build_app(api, token=None, settings=settings))
    over_http = httpx.post(f"{base}/context", json={"query": "invoices retry", "tags": ["billing"]}, timeout=30).json()[
        "context"
    ]
    assert main(["context", "invoices retry", "--tag", "billing"], api_factory=lambda s: api) == 0
    over_cli = capsys.readouterr().out
    for text in (asyncio.run(over_mcp()), over_http, over_cli):
        assert "billing on-call" in text and "ops channel" not in text, text
