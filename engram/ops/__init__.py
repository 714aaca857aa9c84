"""Every operation engram exposes, declared once: MCP tools, HTTP routes, CLI commands and the checks derive from here.

An `Op` names an operation of `engram.api.Api` and declares its parameters (type, bounds,
default, description for the calling model) and where it is exposed: as an MCP tool, an HTTP
route, CLI commands. The adapters build everything else from these declarations: the MCP
tool schemas (server/mcp.py), the HTTP routes and the OpenAPI document (server/http_routes.py),
the argparse arguments (engram.cli), and `check`, the one argument check every call goes through
(Api.call). Adding a parameter is one `Param` in its area's table plus its use in the Api method;
adding an operation is one `Op` there plus an Api method of the same name that takes every declared
parameter, without defaults (the declaration holds them; tests/server/test_ops.py checks both agree).

The package, by concern: the declaration types and the shared parameters (`declarations.py`), the
operations by area (`memory_ops.py`, `task_ops.py`, `hook_ops.py`, `admin_ops.py`) gathered in one
ordered table (`table.py`), the argument check (`arguments.py`), the pydantic models derived from
the declarations (`schemas.py`, built on first use: the CLI builds its parser from the declarations
and should not pay for pydantic), and the JSON encoder the adapters share (`json_encoding.py`).
"""

from __future__ import annotations

from engram.core.errors import InvalidArguments
from engram.core.validation import refuse_unknown
from engram.ops.arguments import check, check_values, describe
from engram.ops.declarations import REQUIRED, Cli, Http, Op, Param
from engram.ops.json_encoding import dumps, json_default
from engram.ops.schemas import arguments_model, body_model, body_params, path_params
from engram.ops.table import OPS, OPS_LIST, TOOLS

__all__ = [
    "OPS",
    "OPS_LIST",
    "REQUIRED",
    "TOOLS",
    "Cli",
    "Http",
    "InvalidArguments",
    "Op",
    "Param",
    "arguments_model",
    "body_model",
    "body_params",
    "check",
    "check_values",
    "describe",
    "dumps",
    "json_default",
    "path_params",
    "refuse_unknown",
]
