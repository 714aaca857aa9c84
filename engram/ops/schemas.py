"""The pydantic models derived from the declarations: an operation's arguments, an HTTP route's body.

Built on first use, so a process that only parses a command line never imports pydantic.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from engram.ops.declarations import Op, Param
from engram.ops.table import OPS

__all__ = ["arguments_model", "body_model", "body_params", "path_params"]


def _model(model_name: str, params: tuple[Param, ...], defaults: dict[str, Any]) -> Any:
    from pydantic import ConfigDict, create_model

    fields: dict[str, Any] = {
        p.name: (p.annotated(), defaults.get(p.name, p.default if not p.required else ...)) for p in params
    }
    return create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)


@cache
def arguments_model(name: str) -> Any:
    """The pydantic model of all of an operation's arguments (what `check` validates)."""
    op = OPS[name]
    return _model(op.model_name + "Arguments", op.params, {})


def path_params(path: str) -> tuple[str, ...]:
    return tuple(part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}"))


def body_params(op: Op) -> tuple[Param, ...]:
    """The parameters an HTTP route reads from its JSON body: none for GET and DELETE."""
    if op.http is None or op.http.method in ("GET", "DELETE"):
        return ()
    outside = set(path_params(op.http.path)) | set(op.http.query)
    return tuple(p for p in op.params if p.name not in outside)


@cache
def body_model(name: str) -> Any:
    """The pydantic model of an HTTP route's JSON body (the OpenAPI document's schema), or None."""
    op = OPS[name]
    if op.http is None or op.http.method in ("GET", "DELETE"):
        return None
    return _model(op.model_name, body_params(op), dict(op.http.defaults))
