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
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import ToolAnnotations
from mcp_types import CompleteRequestParams, CompleteResult, Completion, PromptReference, SetLevelRequestParams
from pydantic import ValidationError

from engram import __version__
from engram.core.errors import NotFound
from engram.core.types import OPEN_TASK_STATUSES, EngramError
from engram.core.validation import refuse_unknown
from engram.ops import OPS, TOOLS, describe, dumps
from engram.server.backend import HEARTBEAT, Backend, RemoteBackend, daemon_command, stdio_client
from engram.server.mcp_logging import client_logs
from engram.server.rpc import RpcError
from engram.server.rpc_client import RpcClient

__all__ = [
    "TASKS_URI",
    "TASK_RESUME_URI",
    "TOOL_NAMES",
    "EngramMCP",
    "build_mcp",
    "daemon_command",
    "keep_alive",
    "main",
    "run_stdio",
    "task_completion",
]

log = logging.getLogger(__name__)

TOOL_NAMES = TOOLS

INSTRUCTIONS = """\
engram is your long-term memory across sessions. At the start of a task call recall_memory (or
get_context) with what you are about to work on: it returns relevant memories, the latest handoff
pinned first, known pitfalls, and sessions that were interrupted. Use create_task for multi-session
work and pass its task_id to later calls; to continue one, list_tasks then resume_task(task_id)
gives its plan, next step, pitfalls and working set, and claims it for you; a task another session
holds (held_by in list_tasks) is being worked on: pick another unless the user asks you to take it
over (claim_task take_over=true), and release_task one you stop working on. Store durable facts,
decisions and strategies with store_memory (or correct one with update_memory), report milestones
with track_progress and errors with track_failure, and call session_handoff before you stop so the
next session can continue (then report_interruption if you are being cut off)."""

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    "write": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    # Storing the same thing twice reinforces it instead of duplicating it.
    "write_idempotent": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    "destructive": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
}


TASKS_URI = "engram://tasks"
TASK_RESUME_URI = "engram://tasks/{task_id}/resume"


class EngramMCP(MCPServer):
    """MCPServer that refuses unknown arguments and words validation errors for the calling model,
    and reads engram://tasks for the caller (`static_reads`)."""

    # The SDK gives a static resource's function no Context, yet which tasks are the caller's
    # depends on who asks (the user of an HTTP session): these URIs are read here, with it.
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.static_reads: dict[str, Callable[[Context], str]] = {}
        # completion/complete: `complete(ctx, params)` gives the values; the SDK's completion
        # decorator passes no request context, and who asks decides which tasks are theirs.
        self.complete: Callable[[Context, CompleteRequestParams], Completion] | None = None
        self.client_logs = client_logs()
        self.middleware.append(self.client_logs.middleware)
        self._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, self.client_logs.set_level)
        self._lowlevel_server.add_request_handler("completion/complete", CompleteRequestParams, self._complete)

    async def _complete(self, ctx: Any, params: CompleteRequestParams) -> CompleteResult:
        if self.complete is None:
            return CompleteResult(completion=Completion(values=[]))
        import anyio.to_thread

        context = Context(request_context=ctx, mcp_server=self)
        completion = await anyio.to_thread.run_sync(self.complete, context, params)
        return CompleteResult(completion=completion)

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        read = self.static_reads.get(str(uri))
        if read is None or context is None:
            return await super().read_resource(uri, context)
        import anyio.to_thread

        text = await anyio.to_thread.run_sync(read, context)
        return [ReadResourceContents(content=text, mime_type="application/json")]

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

    params = [
        inspect.Parameter(
            p.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=p.annotated(),
            default=inspect.Parameter.empty if p.required else p.default,
        )
        for p in op.params
    ]
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
        log.debug("tool %s called with %s", name, sorted(args))
        try:
            return backend_factory(ctx).call(name, args)
        except (EngramError, RpcError) as e:
            log.info("tool %s refused: %s", name, e)
            raise ToolError(str(e)) from None

    for name in TOOLS:
        op = OPS[name]
        assert op.mcp is not None  # TOOLS are the operations MCP serves: each has its kind
        mcp.add_tool(_tool_function(name, run), title=op.title, annotations=ANNOTATIONS[op.mcp], structured_output=True)
    _add_prompts_and_resources(mcp, backend_factory)
    return mcp


def _add_prompts_and_resources(mcp: EngramMCP, backend_factory: Callable[[Context], Backend]) -> None:
    """The `resume` prompt and the task resources, for clients that show them (a prompt picker,
    an attach-resource menu). Each is the output of a tool (list_tasks, resume_task) called
    through the same backend, so they say what the tools say."""

    def call(ctx: Context, name: str, args: dict[str, Any], error: type[Exception]) -> dict:
        try:
            return backend_factory(ctx).call(name, args)
        except (EngramError, RpcError) as e:
            kind = ResourceNotFoundError if isinstance(e, NotFound) or getattr(e, "kind", "") == "NotFound" else error
            raise kind(str(e)) from None

    def open_tasks(ctx: Context) -> str:
        tasks = call(ctx, "list_tasks", {"limit": 1000}, ResourceError)["tasks"]
        return dumps({"tasks": [t for t in tasks if t["status"] in OPEN_TASK_STATUSES]}, indent=1)

    mcp.static_reads = {TASKS_URI: open_tasks}

    def complete(ctx: Context, params: CompleteRequestParams) -> Completion:
        ref, arg = params.ref, params.argument
        target = ref.name if isinstance(ref, PromptReference) else ref.uri
        if arg.name != "task_id" or target not in ("resume", TASK_RESUME_URI):
            return Completion(values=[])
        tasks = call(ctx, "list_tasks", {"limit": 1000}, ValueError)["tasks"]
        return task_completion(tasks, arg.value)

    mcp.complete = complete

    def listed_only() -> str:
        raise AssertionError("read_resource answers open_tasks with the request's context (static_reads)")

    mcp.resource(
        TASKS_URI,
        name="open_tasks",
        title="Open tasks",
        mime_type="application/json",
        description="The open tasks (open, in_progress, blocked) as list_tasks gives them, most "
        "recently active first, each with held_by (the session working on it, or null).",
    )(listed_only)

    @mcp.resource(
        TASK_RESUME_URI,
        name="task_resume",
        title="Resume block of a task",
        mime_type="text/plain",
        description="The resume_task text block of one task (plan, next step, pitfalls, who holds "
        "it); reading it claims nothing.",
    )
    def task_resume(task_id: str, ctx: Context) -> str:
        return call(ctx, "resume_task", {"task_id": task_id, "claim": False}, ResourceError)["context"]

    @mcp.prompt(
        name="resume",
        title="Resume a task",
        description="Continue a task where the last session stopped: its resume block (plan with "
        "each step's status, next step, pitfalls, working set). Without task_id, the open "
        "task active most recently that no other session holds. Claims the task.",
    )
    def resume(ctx: Context, task_id: str | None = None) -> list[UserMessage]:
        if not task_id:
            tasks = call(ctx, "list_tasks", {"limit": 1000}, ValueError)["tasks"]
            free = [
                t
                for t in tasks
                if t["status"] in OPEN_TASK_STATUSES and (t["held_by"] is None or t["held_by"]["this_session"])
            ]
            if not free:
                return [
                    UserMessage(
                        "engram has no open task that no other session holds. "
                        "Call list_tasks to see every task, or create_task to start one."
                    )
                ]
            task_id = free[0]["id"]
        r = call(ctx, "resume_task", {"task_id": task_id}, ValueError)
        notice = "".join(f"\n(Note: {n['message']})" for n in r.get("claim_notices", []))
        return [UserMessage(f"Continue this task. Do not redo a step marked done.\n\n{r['context']}{notice}")]


def task_completion(tasks: list[dict[str, Any]], typed: str, most: int = 100) -> Completion:
    """The ids of the tasks whose id starts with what the user typed or whose name contains it,
    in list_tasks' order (open ones first, the most recently active first); at most `most` (the
    protocol's limit), with the total."""
    typed = typed.strip().lower()
    ids = [t["id"] for t in tasks if t["id"].lower().startswith(typed) or typed in (t.get("name") or "").lower()]
    return Completion(values=ids[:most], total=len(ids), has_more=len(ids) > most)


# ---------------------------------------------------------------- stdio entry


def run_stdio(settings: Any = None, client: RpcClient | None = None) -> None:
    """Serve MCP on stdin/stdout for one client session, forwarding every call to the daemon.

    The daemon is started on demand (`client`, from backend.stdio_client, may already be on its
    way to it). The session ends cleanly when stdin closes or on SIGTERM; if this process is
    killed, the daemon sees the connection drop and reports the session as interrupted to the
    next recall.
    """
    if settings is None:
        from engram.core.settings import Settings

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
    keeps its session and its task claims (engram.continuity.claims); a killed or frozen process stops
    them, and its claims lapse. Only over a connection already open (RpcClient.beat). The
    daemon's answer sets the pace (a fifth of its claim timeout, which may differ from this
    process's setting); until it answers, every second or every_s, whichever is sooner."""

    def run() -> None:
        wait = min(every_s, 1.0)
        while not stop.wait(wait):
            reply = client.beat(HEARTBEAT)
            if isinstance(reply, dict) and isinstance(reply.get("next_in_s"), int | float):
                wait = max(0.2, float(reply["next_in_s"]))

    stop = threading.Event()
    atexit.register(stop.set)
    t = threading.Thread(target=run, name="engram-heartbeat", daemon=True)
    t.start()
    return t


def main() -> None:
    """`engram` with no arguments: the stdio MCP server."""
    run_stdio()
