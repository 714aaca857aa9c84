"""The 17 MCP tools: thin adapters from MCP arguments to Api operations, over stdio or HTTP."""

from __future__ import annotations

import atexit
import logging
import os
import signal
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from engram import __version__
from engram.server.backend import Backend, RemoteBackend, daemon_command, stdio_client
from engram.server.rpc import RpcClient, RpcError
from engram.types import MEMORY_TYPES, SEARCH_MODES, TASK_STATUSES, EngramError

__all__ = ["TOOL_NAMES", "EngramMCP", "build_mcp", "daemon_command", "main", "run_stdio"]

log = logging.getLogger(__name__)

TOOL_NAMES = (
    "recall_memory", "store_memory", "update_memory", "session_handoff", "create_task", "update_task",
    "get_task", "track_failure", "track_progress", "session_outcome", "consolidate_memory", "memory_stats",
    "forget_memory", "get_context", "list_tasks", "resume_task", "report_interruption",
)

INSTRUCTIONS = """\
engram is your long-term memory across sessions. At the start of a task call recall_memory (or
get_context) with what you are about to work on: it returns relevant memories, the latest handoff
pinned first, known pitfalls, and sessions that were interrupted. Use create_task for multi-session
work and pass its task_id to later calls; to continue one, list_tasks then resume_task(task_id)
gives its plan, next step, pitfalls and working set. Store durable facts, decisions and strategies with
store_memory (or correct one with update_memory), report milestones with track_progress and errors
with track_failure, and call session_handoff before you stop so the next session can continue
(then report_interruption if you are being cut off)."""

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]
SearchMode = Literal[SEARCH_MODES]  # type: ignore[valid-type]
TaskStatus = Literal[TASK_STATUSES]  # type: ignore[valid-type]
ProgressStatus = Literal["planned", "in_progress", "blocked", "done"]
Outcome = Literal["success", "failure"]
InterruptionReason = Literal["context_overflow", "rate_limit", "user_stop", "other"]

TaskId = Annotated[str | None, Field(description="Id from create_task (t-...); links this to that task.")]
# A lone string where a list is expected is taken as a one-item list, as models often send one.
Tags = Annotated[list[str] | str | None, Field(
    description="Short labels to filter by later, e.g. ['auth', 'db'].")]
Items = list[str] | str | None

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                        open_world_hint=False)
# Storing the same thing twice reinforces it instead of duplicating it.
WRITE_IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                   open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                              open_world_hint=False)


class EngramMCP(MCPServer):
    """MCPServer that refuses unknown arguments and words validation errors for the calling model."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.accepted: dict[str, tuple[str, ...]] = {}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        accepted = self.accepted.get(name)
        if accepted is not None:
            # Pydantic would drop unknown keys silently; a misspelt argument must not vanish.
            unknown = sorted(k for k in arguments if k not in accepted)
            if unknown:
                raise ToolError(f"{name}: unknown argument(s): {', '.join(unknown)}; "
                                f"accepted: {', '.join(accepted)}")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a bug: the SDK logs it and tells the model only that the tool failed
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                raise ToolError(describe_validation(name, e.__cause__)) from e.__cause__
            # "Error executing tool x: x: msg" -> "x: msg", so every refusal reads the same way.
            msg = str(e).removeprefix(f"Error executing tool {name}: ")
            if not msg.startswith(f"{name}:"):
                msg = f"{name}: {msg}"
            raise ToolError(msg) from e.__cause__


def describe_validation(tool: str, err: ValidationError) -> str:
    """One line per bad argument, naming it, what was wrong and what was given."""
    parts = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "arguments"
        if e["type"] == "missing":
            parts.append(f"missing required argument {field}")
            continue
        given = repr(e.get("input"))
        given = given if len(given) <= 60 else given[:57] + "..."
        parts.append(f"{field}: {e['msg']} (got {given})")
    return f"{tool}: invalid arguments: " + "; ".join(parts)


def build_mcp(backend_factory: Callable[[Context], Backend]) -> EngramMCP:
    """The MCP server with engram's 17 tools; `backend_factory(ctx)` picks where each call goes."""
    mcp = EngramMCP("engram", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def run(name: str, local_vars: dict[str, Any]) -> dict:
        ctx = local_vars["ctx"]
        # Omitted optional arguments stay omitted, so the Api's defaults apply.
        args = {k: local_vars[k] for k in mcp.accepted[name] if local_vars.get(k) is not None}
        try:
            return backend_factory(ctx).call(name, args)
        except (EngramError, RpcError) as e:
            raise ToolError(str(e)) from None

    def tool(annotations: ToolAnnotations, title: str):
        def register(fn: Callable[..., dict]) -> Callable[..., dict]:
            mcp.add_tool(fn, title=title, annotations=annotations, structured_output=True)
            mcp.accepted[fn.__name__] = tuple(p for p in fn.__code__.co_varnames[: fn.__code__.co_argcount]
                                              if p != "ctx")
            return fn
        return register

    # Each tool body is `run(<name>, locals())`; run() keeps only the tool's declared arguments.

    @tool(READ, "Recall memories")
    def recall_memory(
        query: Annotated[str, Field(description="What you need to know, in plain words.")],
        ctx: Context,
        limit: Annotated[int, Field(description="Most memories to return (1-1000).")] = 10,
        memory_type: Annotated[MemoryType | None, Field(description="Only this kind of memory.")] = None,
        task_id: TaskId = None,
        tags: Tags = None,
        as_of: Annotated[str | None, Field(
            description="ISO date/time: answer as the memory stood then (no reinforcement).")] = None,
        mode: Annotated[SearchMode, Field(description="hybrid (default), bm25 (exact words) or vector.")]
        = "hybrid",
        explain: Annotated[bool, Field(description="Include each hit's score breakdown.")] = False,
    ) -> dict[str, Any]:
        """Search long-term memory. Call at the start of every task and whenever you need a fact, decision,
        convention or past failure you may have learned before.

        Returns {memories: [{id, content, memory_type, score, quality_score, created_at, tags, ...}],
        handoff (the latest relevant session handoff with each next step checked against later work,
        or null), related_failures (known pitfalls of the components involved), interrupted_sessions
        (earlier sessions that ended without a clean exit, each reported once: resume their work)}.
        The latest relevant handoff is pinned first in memories. Recalled memories are reinforced.
        """
        return run("recall_memory", locals())

    @tool(WRITE_IDEMPOTENT, "Store a memory")
    def store_memory(
        content: Annotated[str, Field(description="One self-contained fact, decision or lesson.")],
        ctx: Context,
        memory_type: Annotated[MemoryType, Field(
            description="fact, strategy (how to do something), assumption, failure, handoff or progress.")]
        = "fact",
        importance: Annotated[float, Field(description="0 (trivia) to 1 (critical).")] = 0.5,
        tags: Tags = None,
        task_id: TaskId = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra JSON kept with the memory.")]
        = None,
        pinned: Annotated[bool, Field(description="Never decay or prune this memory.")] = False,
        conversation: Annotated[str | None, Field(description=(
            "Only for turns of a conversation (e.g. importing a chat): the conversation's id. Turns "
            "of one conversation are searched with the turns just before them; leave it out for "
            "a self-contained memory."))] = None,
    ) -> dict[str, Any]:
        """Remember something worth knowing in a later session: a decision and its reason, a project
        convention, a user preference, a working command, a lesson learned. Write it so it makes sense
        on its own. Do not store secrets or transient chatter.

        engram resolves it against what it already knows and returns {action, memory_id, content,
        reason, ...}: action is new, reinforce (already known; strengthened), merge (added to a
        close memory, both texts kept as written), or replace (contradicts and supersedes
        previous_id). The text is stored exactly as sent. Content over 1000
        characters is split into linked chunks (chunk_ids); over 100,000 characters is refused.
        """
        return run("store_memory", locals())

    @tool(WRITE, "Update a memory")
    def update_memory(
        memory_id: Annotated[str, Field(description="Id of the memory to rewrite.")],
        content: Annotated[str, Field(description="The corrected full text.")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Rewrite a memory you recalled that is wrong, outdated or should absorb new detail. The old
        text stays in its history. Returns {action: "update", memory_id, content, previous_id}.
        """
        return run("update_memory", locals())

    @tool(DESTRUCTIVE, "Forget memories")
    def forget_memory(
        ctx: Context,
        memory_id: Annotated[str | None, Field(description="Id of one memory to delete.")] = None,
        query: Annotated[str | None, Field(
            description="Delete every memory containing all these words.")] = None,
        dry_run: Annotated[bool, Field(description="Only list what would be deleted.")] = False,
    ) -> dict[str, Any]:
        """Permanently delete memories: give exactly one of memory_id or query. Use it when the user asks
        you to forget something or a memory holds data that must not be kept; use update_memory to
        correct instead. Irreversible: run with dry_run=true first when deleting by query.
        Returns {deleted: [ids], would_delete: [ids], count, dry_run}.
        """
        return run("forget_memory", locals())

    @tool(READ, "Get context block")
    def get_context(
        query: Annotated[str, Field(description="What you are about to work on.")],
        ctx: Context,
        max_tokens: Annotated[int, Field(description="Token budget for the block (50-100000).")] = 1500,
        task_id: TaskId = None,
        limit: Annotated[int, Field(description="Most memories to consider.")] = 20,
    ) -> dict[str, Any]:
        """Like recall_memory, but returns one ready-to-read <memory> text block that fits a token budget:
        the latest handoff with next-step status, relevant memories, then pitfalls. Use it to prime
        yourself at the start of a session. Returns {context, tokens, memory_ids, interrupted_sessions}.
        """
        return run("get_context", locals())

    @tool(WRITE, "Write a session handoff")
    def session_handoff(
        summary: Annotated[str, Field(description="What this session was about and where it stands.")],
        ctx: Context,
        completed: Annotated[Items, Field(description="Things finished in this session.")] = None,
        in_progress: Annotated[Items, Field(description="Things started but not finished.")] = None,
        blocked: Annotated[Items, Field(description="Things blocked, with what blocks them.")] = None,
        next_steps: Annotated[Items, Field(description="Concrete next actions for the next session.")]
        = None,
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """Call before you end a session (or when context is running out) so the next session can
        continue where you stopped. The next recall_memory/get_context pins it first and checks each
        next step against work done since. Returns {handoff_id, memory_id, task_id, created_at}.
        """
        return run("session_handoff", locals())

    @tool(WRITE, "Create a task")
    def create_task(
        name: Annotated[str, Field(description="Short name of the piece of work.")],
        ctx: Context,
        goal: Annotated[str, Field(description="What done looks like.")] = "",
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra JSON (e.g. branch, issue).")]
        = None,
    ) -> dict[str, Any]:
        """Start tracking work that may span sessions (a feature, a bug, a migration). Pass the returned
        task_id to store_memory, track_progress, track_failure and session_handoff so get_task can show
        the whole story later. Returns {task_id, name, goal, status: "open", ...}.
        """
        return run("create_task", locals())

    @tool(WRITE, "Update a task")
    def update_task(
        task_id: Annotated[str, Field(description="Id from create_task.")],
        ctx: Context,
        status: Annotated[TaskStatus | None, Field(
            description="open, in_progress, blocked, done or abandoned.")] = None,
        goal: Annotated[str | None, Field(description="New goal text.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Keys to add or overwrite.")] = None,
        name: Annotated[str | None, Field(description="New name.")] = None,
    ) -> dict[str, Any]:
        """Change a task's status (mark it done or blocked), goal, name or metadata. Give at least one.
        Returns the task {task_id, name, goal, status, metadata, ...}.
        """
        return run("update_task", locals())

    @tool(READ, "Get a task")
    def get_task(
        task_id: Annotated[str, Field(description="Id from create_task.")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Everything about one task: the task, a timeline of its memories, its handoffs, failures
        and progress, latest_handoff with each next step marked done, in_progress or not_started
        by the work recorded since, and plan: every step any of its handoffs planned, once, with
        status done, in_progress, not_started or dropped, its evidence and the handoffs that
        planned it. Returns {task, timeline, handoffs, failures, progress, memories,
        latest_handoff, plan}. For a compact continuation use resume_task.
        """
        return run("get_task", locals())

    @tool(READ, "List tasks")
    def list_tasks(
        ctx: Context,
        status: Annotated[TaskStatus | None, Field(
            description="Only tasks with this status (open, in_progress, blocked, done, abandoned).")] = None,
        limit: Annotated[int, Field(description="Most tasks to return (1-1000).")] = 50,
    ) -> dict[str, Any]:
        """The tasks you can resume, when you start fresh and do not know their ids: open ones
        (open, in_progress, blocked) first, each group by last activity, newest first.
        Returns {tasks: [{id, name, goal, status, last_activity_at, last_activity: {at,
        memory_type, content}, ...}]}. Then call resume_task(task_id).
        """
        return run("list_tasks", locals())

    @tool(READ, "Resume a task")
    def resume_task(
        task_id: Annotated[str, Field(description="Id from create_task or list_tasks.")],
        ctx: Context,
        max_tokens: Annotated[int, Field(description="Token budget for the text block (50-100000).")]
        = 2000,
    ) -> dict[str, Any]:
        """Call first when you take over a task: one answer to "where are we and what next?".
        Returns {task, latest_handoff, plan: [{step, status: done | in_progress | not_started |
        dropped, evidence, planned_in}], next_step, in_progress, blocked, pitfalls (failures with
        root_cause and fix: do not repeat them), keep (the task's decisions and conventions),
        working_set {files, components}, interrupted_sessions (with reason and last progress),
        context (all of it as one text block within max_tokens), tokens}. Every step any handoff
        planned appears once; do not redo a step marked done.
        """
        return run("resume_task", locals())

    @tool(WRITE, "Report an interruption")
    def report_interruption(
        reason: Annotated[InterruptionReason, Field(
            description="context_overflow, rate_limit, user_stop or other.")],
        ctx: Context,
        task_id: TaskId = None,
    ) -> dict[str, Any]:
        """Call when you are about to be cut off (context nearly full, rate limited, the user
        stopping you), after session_handoff and track_progress. This session ends as interrupted
        with that reason; the next session's recall reports it once, with your last progress, and
        resume_task lists it. Returns {session_id, status: "interrupted", reason, task_id, ended_at}.
        """
        return run("report_interruption", locals())

    @tool(WRITE_IDEMPOTENT, "Record a failure")
    def track_failure(
        error: Annotated[str, Field(description="What went wrong (the error message or symptom).")],
        component: Annotated[str, Field(description="The part of the system it happened in.")],
        ctx: Context,
        root_cause: Annotated[str, Field(description="Why it happened, if known.")] = "",
        task_id: TaskId = None,
        fix: Annotated[str | None, Field(description="What fixed it, if anything.")] = None,
    ) -> dict[str, Any]:
        """Record an error, dead end or approach that did not work, so no session repeats it. Later
        recalls touching the same component list it under related_failures. The same failure again
        reinforces the existing record. Returns {action, memory_id, content, reason}.
        """
        return run("track_failure", locals())

    @tool(WRITE, "Record progress")
    def track_progress(
        feature: Annotated[str, Field(description="The feature or step this is about.")],
        status: Annotated[ProgressStatus, Field(description="planned, in_progress, blocked or done.")],
        ctx: Context,
        completion: Annotated[float, Field(description="Fraction done, 0 to 1.")] = 0.0,
        task_id: TaskId = None,
        notes: Annotated[str, Field(description="Details worth keeping.")] = "",
    ) -> dict[str, Any]:
        """Record a milestone as you work (a step started, finished or blocked). Progress is what marks a
        handoff's next steps as done, and what an interrupted session is resumed from.
        Returns {memory_id, task_id, feature, status, completion, notes}.
        """
        return run("track_progress", locals())

    @tool(WRITE, "Report session outcome")
    def session_outcome(
        outcome: Annotated[Outcome, Field(description="success or failure.")],
        ctx: Context,
        notes: Annotated[str, Field(description="Why it went that way.")] = "",
    ) -> dict[str, Any]:
        """Say whether this session achieved what it set out to do. Memories from successful sessions
        rank higher later; those from failed ones lower. Returns {session_id, outcome, notes}.
        """
        return run("session_outcome", locals())

    @tool(WRITE, "Consolidate memory")
    def consolidate_memory(
        ctx: Context,
        apply: Annotated[bool, Field(description="false: only report the plan; true: carry it out.")]
        = False,
    ) -> dict[str, Any]:
        """Tidy memory: consolidate clusters of near-duplicate memories and prune decayed, unimportant
        ones. Runs on a schedule anyway; call it with apply=false to preview, apply=true when asked to
        clean up. Returns a report of what was (or would be) consolidated and pruned.
        """
        return run("consolidate_memory", locals())

    @tool(READ, "Memory statistics")
    def memory_stats(ctx: Context) -> dict[str, Any]:
        """Counts and health of the memory store: memories by type and status, tasks, sessions,
        index freshness and maintenance status. Use it when asked what engram holds.
        """
        return run("memory_stats", locals())

    assert tuple(sorted(mcp.accepted)) == tuple(sorted(TOOL_NAMES))
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
    backend = RemoteBackend(client)
    build_mcp(lambda ctx: backend).run("stdio")


def main() -> None:
    """`engram` with no arguments: the stdio MCP server."""
    run_stdio()
