"""What the HTTP API offers: its JSON routes, one per operation that declares one (engram.ops), the
refusals its auth makes, and the OpenAPI document describing both. engram.server.http serves them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import models_json_schema

from engram import __version__, ops

# Every route takes ?project=: the project the request reads and writes in (docs/projects.md).
PROJECT_PARAM = "project"
_PROJECT_DOC = {
    "name": PROJECT_PARAM,
    "in": "query",
    "required": False,
    "description": "The project this request works in (e.g. github.com/me/repo): reads see "
    "its rows and those of no project, writes belong to it. Left out: no project.",
    "schema": {"type": "string"},
}
PUBLIC_PATHS = frozenset({"/healthz"})


# ---------------------------------------------------------------- routes


@dataclass(frozen=True)
class JsonRoute:
    """One JSON route, derived from an operation's declaration (engram.ops)."""

    method: str
    path: str
    op: str
    summary: str
    body: Any = None  # the pydantic model of the JSON body (None: the route reads no body)
    status: int = 200
    empty_body_ok: bool = False
    query: tuple[str, ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def body_fields(self) -> tuple[str, ...]:
        return tuple(self.body.model_fields) if self.body is not None else ()


OPS = tuple(
    JsonRoute(
        op.http.method,
        op.http.path,
        op.name,
        op.http.summary,
        ops.body_model(op.name),
        op.http.status,
        op.http.empty_body_ok,
        op.http.query,
        op.http.defaults,
    )
    for op in ops.OPS_LIST
    if op.http is not None
)


_ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_UNAUTHORIZED = {
    "description": "no credential, or a wrong, unknown or revoked one, when ENGRAM_TOKEN is set or keys exist",
    **_ERROR,
    "headers": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}},
}
_KEY_OTHER_USER = "a key whose X-Engram-User names another user than the key's (a key acts for its user only)"
# The refusals the server's auth (http.py's _Auth) makes, by path (None: every other path it
# guards), for the document to say what the middleware does.
AUTH_RESPONSES: dict[str | None, dict[str, dict]] = {
    None: {"401": _UNAUTHORIZED, "403": {"description": _KEY_OTHER_USER, **_ERROR}},
    "/metrics": {
        "401": _UNAUTHORIZED,
        "403": {
            "description": f"any key: /metrics counts every user's memories and needs "
            f"ENGRAM_TOKEN; or {_KEY_OTHER_USER}",
            **_ERROR,
        },
    },
}


# ---------------------------------------------------------------- OpenAPI


def openapi_document(secured: bool = False, with_mcp: bool = False) -> dict:
    """OpenAPI 3.1 description of the routes, built from the same table and models that serve them."""
    models = sorted({s.body for s in OPS if s.body is not None}, key=lambda m: m.__name__)
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template="#/components/schemas/{model}")
    schemas = dict(defs.get("$defs", {}))
    schemas["Error"] = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
    err = _ERROR
    obj = {"content": {"application/json": {"schema": {"type": "object"}}}}
    paths: dict[str, dict] = {}
    for s in OPS:
        entry: dict[str, Any] = {
            "operationId": s.op,
            "summary": s.summary,
            "responses": {
                str(s.status): {"description": "OK", **obj},
                "400": {"description": "bad JSON or invalid UTF-8", **err},
                "422": {"description": "invalid arguments", **err},
            },
        }
        op = ops.OPS[s.op]
        params = [
            {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in ops.path_params(s.path)
        ]
        params += [
            {
                "name": p.name,
                "in": "query",
                "required": p.required,
                "description": p.description,
                "schema": TypeAdapter(p.type).json_schema(),
            }
            for p in op.params
            if p.name in s.query
        ]
        if params:
            entry["responses"]["404"] = {"description": "unknown id", **err}
        entry["parameters"] = params + [_PROJECT_DOC]
        if s.body is not None:
            entry["requestBody"] = {
                "required": not s.empty_body_ok,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{s.body.__name__}"}}},
            }
        paths.setdefault(s.path, {})[s.method.lower()] = entry
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics",
            "responses": {
                "200": {
                    "description": "Prometheus text format 0.0.4",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    paths["/healthz"] = {
        "get": {
            "operationId": "healthz",
            "summary": "Liveness (never needs the token)",
            "security": [],
            "responses": {"200": {"description": "OK", **obj}},
        }
    }
    paths["/openapi.json"] = {
        "get": {
            "operationId": "openapi",
            "summary": "This document",
            "responses": {"200": {"description": "OK", **obj}},
        }
    }
    if with_mcp:
        paths["/mcp"] = {
            "post": {
                "operationId": "mcp",
                "summary": "MCP over streamable HTTP",
                "responses": {"200": {"description": "MCP response"}},
            }
        }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "engram",
            "version": __version__,
            "description": "Long-term memory and task continuity for AI agents. Errors are "
            '{"error": message}. Headers: X-Engram-Session, X-Engram-User.',
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }
    # The server's auth (http.py's _Auth) answers for every path but PUBLIC_PATHS, on any server:
    # keys live in the database, so `engram keys create` (on this machine or, on a shared
    # PostgreSQL, any other) makes them required while this server runs, and this document is
    # built once at start.
    for path, p in paths.items():
        if path in PUBLIC_PATHS:
            continue
        for entry in p.values():
            entry["responses"].update(AUTH_RESPONSES.get(path, AUTH_RESPONSES[None]))
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
