"""The MCP tools, built from the operations declared in engram.ops, over stdio or HTTP."""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from engram import __version__
from engram.ops import OPS, TOOLS, describe, refuse_unknown
from engram.server.backend import Backend, RemoteBackend, daemon_command, stdio_client
from engram.server.rpc import RpcClient, RpcError
from engram.types import EngramError

__all__ = ["TOOL_NAMES", "EngramMCP", "build_mcp", "daemon_command", "main", "run_stdio"]

log = logging.getLogger(__name__)

TOOL_NAMES = TOOLS

INSTRUCTIONS = """\
engram is your long-term memory across sessions. At the start of a task call recall_memory (or
get_context) with what you are about to work on: it returns relevant memories, the latest handoff
pinned first, known pitfalls, and sessions that were interrupted. Use create_task for multi-session
work and pass its task_id to later calls; to continue one, list_tasks then resume_task(task_id)
gives its plan, next step, pitfalls and working set. Store durable facts, decisions and strategies with
store_memory (or correct one with update_memory), report milestones with track_progress and errors
with track_failure, and call session_handoff before you stop so the next session can continue
(then report_interruption if you are being cut off)."""

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False),
    # Storing the same thing twice reinforces it instead of duplicating it.
    "write_idempotent": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                        open_world_hint=False),
    "destructive": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                   open_world_hint=False),
}


class EngramMCP(MCPServer):
    """MCPServer that refuses unknown arguments and words validation errors for the calling model."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        if name in TOOLS:
            # Pydantic would drop unknown keys silently; a misspelt argument must not vanish.
            try:
                refuse_unknown(name, arguments, OPS[name].names)
            except EngramError as e:
                raise ToolError(str(e)) from None
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a bug: the SDK logs it and tells the model only that the tool failed
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                raise ToolError(describe(name, e.__cause__)) from e.__cause__
            # "Error executing tool x: x: msg" -> "x: msg", so every refusal reads the same way.
            msg = str(e).removeprefix(f"Error executing tool {name}: ")
            if not msg.startswith(f"{name}:"):
                msg = f"{name}: {msg}"
            raise ToolError(msg) from e.__cause__


def _tool_function(name: str, run: Callable[[str, Context, dict[str, Any]], dict]) -> Callable[..., dict]:
    """A function whose signature is the operation's declaration, for the SDK to build the tool's schema."""
    op = OPS[name]

    def tool(ctx: Context, **arguments: Any) -> dict[str, Any]:
        return run(name, ctx, arguments)

    params = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=p.annotated(),
                                default=inspect.Parameter.empty if p.required else p.default)
              for p in op.params]
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    tool.__signature__ = inspect.Signature(params, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    tool.__annotations__ = {"ctx": Context, "return": dict[str, Any]}  # where the SDK looks for the context
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = op.description
    return tool


def build_mcp(backend_factory: Callable[[Context], Backend]) -> EngramMCP:
    """The MCP server with engram's tools (engram.ops); `backend_factory(ctx)` picks where each call goes."""
    mcp = EngramMCP("engram", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def run(name: str, ctx: Context, arguments: dict[str, Any]) -> dict:
        # Omitted optional arguments stay omitted; the Api fills in the declared defaults.
        args = {k: v for k, v in arguments.items() if v is not None}
        try:
            return backend_factory(ctx).call(name, args)
        except (EngramError, RpcError) as e:
            raise ToolError(str(e)) from None

    for name in TOOLS:
        op = OPS[name]
        mcp.add_tool(_tool_function(name, run), title=op.title, annotations=ANNOTATIONS[op.mcp],
                     structured_output=True)
    return mcp


# ---------------------------------------------------------------- stdio entry


def run_stdio(settings: Any = None, client: RpcClient | None = None) -> None:
    """Serve MCP on stdin/stdout for one client session, forwarding every call to the daemon.

    The daemon is started on demand (`client`, from backend.stdio_client, may already be on its
    way to it). The session ends cleanly when stdin closes or on SIGTERM; if this process is
    killed, the daemon sees the connection drop and reports the session as interrupted to the
    next recall.
    """
    if settings is None:
        from engram.config import Settings
        settings = Settings.from_env()
    if client is None:
        client = stdio_client(settings)
    atexit.register(client.close, clean=True)

    def terminate(signum: int, frame: Any) -> None:
        # The host closing its MCP server is a normal end of session, not a crash.
        client.close(clean=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    keep_alive(client, settings.claim_timeout_s / 5)
    backend = RemoteBackend(client)
    build_mcp(lambda ctx: backend).run("stdio")


def keep_alive(client: RpcClient, every_s: float) -> threading.Thread:
    """Heartbeats while this process lives, so an agent working for an hour between tool calls
    keeps its session and its task claims (engram.claims); a killed or frozen process stops
    them, and its claims lapse. Only over a connection already open (RpcClient.beat)."""
    from engram.server.daemon import HEARTBEAT

    def run() -> None:
        while not stop.wait(every_s):
            client.beat(HEARTBEAT)

    stop = threading.Event()
    atexit.register(stop.set)
    t = threading.Thread(target=run, name="engram-heartbeat", daemon=True)
    t.start()
    return t


def main() -> None:
    """`engram` with no arguments: the stdio MCP server."""
    run_stdio()
