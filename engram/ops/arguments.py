"""The one argument check every call goes through (Api.call): declared names, storable values, types and bounds."""

from __future__ import annotations

import math
from typing import Any

from engram.core.errors import InvalidArguments
from engram.core.types import EngramError
from engram.core.validation import refuse_unknown
from engram.ops.declarations import Items
from engram.ops.schemas import arguments_model
from engram.ops.table import OPS

__all__ = ["MAX_ARG_DEPTH", "check", "check_values", "describe"]

MAX_ARG_DEPTH = 32  # JSON nesting allowed in arguments (metadata objects); generous for real use


def check(name: str, args: Any) -> dict[str, Any]:
    """The arguments of one call to `name`, checked against its declaration, with defaults filled in.

    Raises InvalidArguments naming the operation and every bad argument.
    """
    op = OPS.get(name)
    if op is None:
        raise EngramError(f"unknown operation {name!r}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InvalidArguments(f"{name}: arguments must be an object")
    refuse_unknown(name, args, op.names)
    check_values(args, name)
    from pydantic import ValidationError

    try:
        valid = arguments_model(name).model_validate(args)
    except ValidationError as e:
        raise InvalidArguments(describe(name, e)) from None
    return {p.name: getattr(valid, p.name) for p in op.params}


def check_values(args: dict, op: str) -> None:
    """Refuse values no store can keep faithfully: lone surrogates, non-finite numbers, runaway nesting.

    Iterative, so hostile nesting cannot exhaust the interpreter's stack before it is refused.
    """
    stack: list[tuple[str, Any, int]] = [(str(k), v, 1) for k, v in args.items()]
    while stack:
        path, v, depth = stack.pop()
        where = path if len(path) <= 80 else path[:77] + "..."
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArguments(f"{op}: {where} is not valid Unicode (it holds a lone surrogate)") from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidArguments(f"{op}: {where} is {v!r}; numbers must be finite")
        elif isinstance(v, dict | list | tuple):
            if depth >= MAX_ARG_DEPTH:
                raise InvalidArguments(f"{op}: {where} nests deeper than {MAX_ARG_DEPTH} levels")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                if isinstance(v, dict) and not isinstance(k, str):
                    raise InvalidArguments(f"{op}: {where} has a key that is not a string")
                stack.append((f"{path}.{k}" if isinstance(v, dict) else f"{path}[{k}]", x, depth + 1))


def describe(name: str, err: Any) -> str:
    """A pydantic ValidationError as one line: each bad argument, what was wrong and what was given."""
    op = OPS.get(name)
    parts = []
    errors = err.errors(include_url=False)
    # A union's member errors ("tags.str") carry the argument's whole value; its items' do not.
    whole = {e["loc"][0]: e.get("input") for e in errors if len(e["loc"]) == 2}
    said: set[str] = set()
    for e in errors:
        where = ".".join(str(p) for p in e["loc"]) or "arguments"
        if e["type"] == "missing":
            parts.append(f"missing required argument {where}")
            continue
        p = op.param(str(e["loc"][0])) if op is not None and e["loc"] else None
        if p is not None and p.type == Items:
            # pydantic reports each member of the union ("next_steps.list[str].0: ...",
            # "next_steps.str: ..."): one line for the argument says what it takes.
            if p.name not in said:
                said.add(p.name)
                parts.append(f"{p.name} must be a list of strings or one string (got {_short_repr(whole.get(p.name))})")
            continue
        given = _short_repr(e.get("input"))
        if p is not None and e["type"] in ("greater_than_equal", "less_than_equal"):
            parts.append(f"{where} {p.bounds_text()} (got {given})")
        else:
            parts.append(f"{where}: {e['msg']} (got {given})")
    return f"{name}: invalid arguments: " + "; ".join(parts)


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
