"""Every operation engram exposes, declared once: MCP tools, HTTP routes, CLI commands and the checks derive from here.

An `Op` names an operation of `engram.api.Api` and declares its parameters (type, bounds,
default, description for the calling model) and where it is exposed: as an MCP tool, an HTTP
route, CLI commands. The adapters build everything else from these declarations: the MCP
tool schemas (server/mcp.py), the HTTP body models and the OpenAPI document (server/http.py),
the argparse arguments (cli.py), and `check`, the one argument check every call goes through
(Api.call). Adding a parameter is one `Param` here plus its use in the Api method; adding an
operation is one `Op` here plus an Api method of the same name that takes every declared
parameter, without defaults (the declaration holds them; tests/server/test_ops.py checks both agree).

Plain frozen dataclasses, no pydantic at import: the CLI builds its parser from this module
and should not pay for pydantic; the pydantic models are built on first use.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from datetime import date, datetime, time
from functools import cache
from pathlib import Path
from typing import Any, Literal

from engram.core.errors import InvalidArguments
from engram.core.types import (
    INTERRUPTION_REASONS,
    MEMORY_TYPES,
    OUTCOMES,
    PROGRESS_STATUSES,
    SEARCH_MODES,
    TASK_STATUSES,
    EngramError,
)
from engram.core.validation import refuse_unknown

__all__ = ["OPS", "OPS_LIST", "REQUIRED", "TOOLS", "Cli", "Http", "InvalidArguments", "Op", "Param",
           "arguments_model", "body_model", "body_params", "check", "check_values", "describe", "dumps",
           "json_default", "path_params", "refuse_unknown"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of a parameter the caller must give


@dataclass(frozen=True)
class Param:
    """One argument of an operation. `type` is a typing expression pydantic understands."""

    name: str
    type: Any
    description: str
    default: Any = REQUIRED
    ge: float | None = None  # inclusive bounds of a number
    le: float | None = None
    flag: str | None = None  # the CLI option; default --<name with dashes>

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def bounds_text(self) -> str:
        """How a refusal words the bounds, e.g. 'must be a whole number from 1 to 1000'."""
        if self.ge is not None and self.le is not None:
            if self.type is int:
                return f"must be a whole number from {self.ge:g} to {self.le:g}"
            return f"must be a number between {self.ge:g} and {self.le:g}"
        if self.ge is not None:
            return f"must be at least {self.ge:g}"
        return f"must be at most {self.le:g}"

    def annotated(self) -> Any:
        """The pydantic annotation: the type with its bounds and description."""
        from typing import Annotated

        from pydantic import Field
        return Annotated[self.type, Field(description=self.description, ge=self.ge, le=self.le)]


@dataclass(frozen=True)
class Http:
    """The operation as a JSON route. Path parameters come from the path, `query` ones from the
    query string, the rest from the JSON body (POST and PATCH)."""

    method: str
    path: str
    summary: str
    status: int = 200
    query: tuple[str, ...] = ()
    empty_body_ok: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()  # this route's own defaults, e.g. POST /maintenance applies


@dataclass(frozen=True)
class Cli:
    """The operation as a CLI command. `params` None: every parameter; `positional` ones are arguments."""

    command: tuple[str, ...]
    help: str
    positional: tuple[str, ...] = ()
    params: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Op:
    name: str
    params: tuple[Param, ...] = ()
    mcp: Literal["read", "write", "write_idempotent", "destructive"] | None = None  # None: not a tool
    title: str = ""  # the MCP tool's title
    description: str = ""  # the MCP tool's description, written for the model that calls it
    http: Http | None = None
    cli: tuple[Cli, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def model_name(self) -> str:
        """store_memory -> StoreMemory: the body model's name in the OpenAPI document."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# ---------------------------------------------------------------- shared parameters


MemoryTypeT = Literal[MEMORY_TYPES]  # type: ignore[valid-type]
SearchModeT = Literal[SEARCH_MODES]  # type: ignore[valid-type]
TaskStatusT = Literal[TASK_STATUSES]  # type: ignore[valid-type]
# A lone string where a list is expected is taken as a one-item list, as models often send one.
Items = list[str] | str | None
TAGS = Param("tags", Items, "Short labels to filter by later, e.g. ['auth', 'db'].", None, flag="--tag")
METADATA = Param("metadata", dict[str, Any] | None, "Extra JSON kept with the memory.", None)
TOKENS = {"ge": 50, "le": 100_000}
TASK_ID = Param("task_id", str | None, "Id from create_task (t-...); links this to that task.", None, flag="--task")
# Projects (docs/projects.md): a read sees the caller's project plus what belongs to no project;
# all_projects widens it. A write belongs to the caller's project unless scope is "global".
ALL_PROJECTS = Param("all_projects", bool, (
    "Search every project's memories and tasks, not only this project's and the global ones."), False)
SCOPE = Param("scope", Literal["project", "global"], (
    "project (default): belongs to the project you work in; global: seen from every project "
    "(e.g. a preference of the user's)."), "project")
TAKE_OVER = Param("take_over", bool, (
    "Take the task from the session holding it (it is told on its next call). Only when the "
    "user asked you to, or that session is stuck."), False)


# ---------------------------------------------------------------- the operations
# MCP tools are listed to the calling model in this order.

OPS_LIST = (
    Op("recall_memory", (
        Param("query", str, "What you need to know, in plain words."),
        Param("limit", int, "Most memories to return (1-1000).", 10, ge=1, le=1000),
        Param("memory_type", MemoryTypeT | None, "Only this kind of memory.", None, flag="--type"),
        TASK_ID,
        TAGS,
        Param("as_of", str | None, "ISO date/time: answer as the memory stood then (no reinforcement).", None),
        Param("mode", SearchModeT, "hybrid (default), bm25 (exact words) or vector.", "hybrid"),
        Param("explain", bool, "Include each hit's score breakdown.", False),
        ALL_PROJECTS,
        Param("compact", bool, "List each memory in one line (id, memory_type, line, when, tokens) "
              "instead of its full text; then get_memory the ids you need.", False),
    ), mcp="read", title="Recall memories", description="""\
Search long-term memory. Call at the start of every task and whenever you need a fact, decision,
convention or past failure you may have learned before.

Returns {memories: [{id, content, memory_type, score, quality_score, created_at, tags,
confidence, evidence, ...}], handoff (the latest relevant session handoff with each next step
checked against later work, or null), related_failures (known pitfalls of the components
involved), interrupted_sessions (earlier sessions that ended without a clean exit, each reported
once: resume their work), and read_as when a word of the query looked misspelt ({word: [the stored
words it was searched as]})}. Each memory's confidence is "strong" (it clearly matches the query by
its words or meaning; rely on it) or "weak" (only plausibly related: check it before relying on
it, and treat a result of only weak memories as "nothing known about this"); evidence says why.
An empty list means nothing stored is related. The latest relevant handoff is pinned first in
memories. Strong memories are reinforced; weak ones are not. You see the memories of the
project you work in and those of no project (all_projects: every project's). Memories of type
"episode" are earlier turns of your sessions (the request and the answer), captured
automatically; "failure" memories tagged "pitfall" are errors a session fixed, with the changed
lines. For a long search, ask compact=true first.""",
       http=Http("POST", "/search", "Hybrid search with continuity context"),
       cli=(Cli(("recall",), "Search memories by meaning and keywords.", positional=("query",)),)),

    Op("store_memory", (
        Param("content", str, "One self-contained fact, decision or lesson."),
        Param("memory_type", MemoryTypeT,
              "fact, strategy (how to do something), assumption, failure, handoff or progress.", "fact",
              flag="--type"),
        Param("importance", float, "0 (trivia) to 1 (critical).", 0.5, ge=0, le=1),
        TAGS,
        TASK_ID,
        METADATA,
        Param("pinned", bool, "Never decay or prune this memory.", False, flag="--pin"),
        Param("conversation", str | None, (
            "Only for turns of a conversation (e.g. importing a chat): the conversation's id. Turns "
            "of one conversation are searched with the turns just before them; leave it out for "
            "a self-contained memory."), None),
        SCOPE,
    ), mcp="write_idempotent", title="Store a memory", description="""\
Remember something worth knowing in a later session: a decision and its reason, a project
convention, a user preference, a working command, a lesson learned. Write it so it makes sense
on its own. Do not store secrets or transient chatter.

engram resolves it against what it already knows and returns {action, memory_id, content,
reason, ...}: action is new, reinforce (already known; strengthened), merge (added to a
close memory, both texts kept as written), or replace (contradicts and supersedes
previous_id). The text is stored exactly as sent. Content over 1000
characters is split into linked chunks (chunk_ids); over 100,000 characters is refused.""",
       http=Http("POST", "/memories", "Store a memory (resolved against what is known)"),
       cli=(Cli(("remember",), "Store a memory (resolved against what is already known).",
                positional=("content",)),)),

    Op("update_memory", (
        Param("memory_id", str, "Id of the memory to rewrite."),
        Param("content", str, "The corrected full text."),
    ), mcp="write", title="Update a memory", description="""\
Rewrite a memory you recalled that is wrong, outdated or should absorb new detail. The old
text stays in its history; the same text writes nothing. A handoff, failure or progress record
is not rewritten (its text is made from the fields the plan reads): record a new one.
Returns {action: "update", memory_id, content, previous_id}.""",
       http=Http("PATCH", "/memories/{memory_id}", "Rewrite a memory's content (its history keeps the old text)")),

    Op("forget_memory", (
        Param("memory_id", str | None, "Id of one memory to delete.", None),
        Param("query", str | None, "Delete every memory containing all these words.", None),
        Param("dry_run", bool, "Only list what would be deleted.", False),
        Param("all_projects", bool, "With query: match every project's memories, not only this "
              "project's and the global ones.", False),
    ), mcp="destructive", title="Forget memories", description="""\
Permanently delete memories: give exactly one of memory_id or query. Use it when the user asks
you to forget something or a memory holds data that must not be kept; use update_memory to
correct instead. Irreversible: run with dry_run=true first when deleting by query.
Returns {deleted: [ids], would_delete: [ids], count, dry_run}.""",
       http=Http("DELETE", "/memories/{memory_id}", "Delete a memory for good"),
       cli=(Cli(("forget",), "Delete memories for good: one by id, or all that match every word of --query.",
                positional=("memory_id",)),)),

    Op("get_context", (
        Param("query", str, "What you are about to work on."),
        Param("max_tokens", int, "Token budget for the block (50-100000).", 1500, **TOKENS),
        TASK_ID,
        Param("limit", int, "Most memories to consider.", 20, ge=1, le=1000),
        Param("tags", Items, "Only memories with at least one of these tags, e.g. ['billing'].", None,
              flag="--tag"),
        ALL_PROJECTS,
    ), mcp="read", title="Get context block", description="""\
Like recall_memory, but returns one ready-to-read <memory> text block that fits a token budget:
the latest handoff with next-step status, relevant memories, then pitfalls. Use it to prime
yourself at the start of a session. Only strong matches go in (recall_memory also shows the weak
ones), so an empty block means nothing stored clearly concerns the query. Returns {context,
tokens, memory_ids, interrupted_sessions}.""",
       http=Http("POST", "/context", "A token-budgeted memory block for a prompt"),
       cli=(Cli(("context",), "Print a token-budgeted memory block to paste into a prompt.",
                positional=("query",)),)),

    Op("session_handoff", (
        Param("summary", str, "What this session was about and where it stands."),
        Param("completed", Items, "Things finished in this session.", None),
        Param("in_progress", Items, "Things started but not finished.", None),
        Param("blocked", Items, "Things blocked, with what blocks them.", None),
        Param("next_steps", Items, "Concrete next actions for the next session.", None, flag="--next"),
        TASK_ID,
    ), mcp="write", title="Write a session handoff", description="""\
Call before you end a session (or when context is running out) so the next session can
continue where you stopped. The next recall_memory/get_context pins it first and checks each
next step against work done since. Returns {handoff_id, memory_id, task_id, created_at}.""",
       http=Http("POST", "/handoffs", "Record a session handoff", status=201),
       cli=(Cli(("handoff",), "Record where the work stands, for the next session to pick up.",
                positional=("summary",)),)),

    Op("create_task", (
        Param("name", str, "Short name of the piece of work."),
        Param("goal", str, "What done looks like.", ""),
        Param("metadata", dict[str, Any] | None, "Extra JSON (e.g. branch, issue).", None),
        SCOPE,
    ), mcp="write", title="Create a task", description="""\
Start tracking work that may span sessions (a feature, a bug, a migration). Pass the returned
task_id to store_memory, track_progress, track_failure and session_handoff so get_task can show
the whole story later. Returns {task_id, name, goal, status: "open", ...}.""",
       http=Http("POST", "/tasks", "Create a task", status=201),
       cli=(Cli(("task", "create"), "Start tracking a task.", positional=("name",)),)),

    Op("update_task", (
        Param("task_id", str, "Id from create_task."),
        Param("status", TaskStatusT | None, "open, in_progress, blocked, done or abandoned.", None),
        Param("goal", str | None, "New goal text.", None),
        Param("metadata", dict[str, Any] | None, "Keys to add or overwrite.", None),
        Param("name", str | None, "New name.", None),
    ), mcp="write", title="Update a task", description="""\
Change a task's status (mark it done or blocked), goal, name or metadata. Give at least one.
Returns the task {task_id, name, goal, status, metadata, ...}.""",
       http=Http("PATCH", "/tasks/{task_id}", "Change a task's status, goal, name or metadata"),
       cli=(Cli(("task", "update"), "Change a task's status, goal or name.", positional=("task_id",)),)),

    Op("get_task", (
        Param("task_id", str, "Id from create_task."),
        Param("limit", int, "Newest entries of each list to return (1-1000); counts has the totals.",
              50, ge=1, le=1000),
    ), mcp="read", title="Get a task", description="""\
Everything about one task: the task, a timeline of its memories, its handoffs, failures
and progress (the newest `limit` of each, in time order; counts gives how many there are),
latest_handoff with each next step marked done, in_progress or not_started by the work
recorded since, and plan: every step any of its handoffs planned, once, with status done,
in_progress, not_started or dropped, its evidence and the handoffs that planned it. Returns
{task, held_by (the session working on it now, or null), timeline, handoffs, failures,
progress, memories, counts, latest_handoff, plan}. Reading it claims nothing.
For a compact continuation use resume_task.""",
       http=Http("GET", "/tasks/{task_id}", "A task with its timeline, plan and latest handoff (?limit=)",
                 query=("limit",)),
       cli=(Cli(("task", "show"), "Show a task with its timeline and latest handoff.", positional=("task_id",)),)),

    Op("list_tasks", (
        Param("status", TaskStatusT | None,
              "Only tasks with this status (open, in_progress, blocked, done, abandoned).", None),
        Param("limit", int, "Most tasks to return (1-1000).", 50, ge=1, le=1000),
        ALL_PROJECTS,
    ), mcp="read", title="List tasks", description="""\
The tasks you can resume, when you start fresh and do not know their ids: open ones
(open, in_progress, blocked) first, each group by last activity, newest first.
Returns {tasks: [{id, name, goal, status, held_by, last_activity_at, last_activity: {at,
memory_type, content}, ...}]}: the project you work in and those of no project
(all_projects: every project's). held_by names the session working on a task now ({session_id,
client, since, last_heard, this_session: true when it is you}; null when nobody is): prefer
tasks nobody else holds. Then call resume_task(task_id).""",
       http=Http("GET", "/tasks", "List tasks, open first, with their last activity (?status=, ?limit=)",
                 query=("status", "limit", "all_projects")),
       cli=(Cli(("task", "list"), "List tasks, newest first.", params=("status", "all_projects")),
            Cli(("tasks",), "List tasks, open ones first, with their last activity."))),

    Op("resume_task", (
        Param("task_id", str, "Id from create_task or list_tasks."),
        Param("max_tokens", int, "Token budget for the text block (50-100000).", 2000, **TOKENS),
        TAKE_OVER,
        Param("claim", bool, "false: only read; claim nothing (as the MCP resources read it).", True),
    ), mcp="write_idempotent", title="Resume a task", description="""\
Call first when you take over a task: one answer to "where are we and what next?". It also
claims the task for you when nobody else holds it. If another live session holds it, you still
get the answer, with claim.claimed false and held_by naming that session: do not do its work
twice; pick another task, or pass take_over=true only if the user asked you to or it is stuck.
Returns {task, held_by, claim, latest_handoff, plan: [{step, status: done | in_progress | not_started |
dropped, evidence, planned_in}], next_step, in_progress, blocked, pitfalls (failures with
root_cause and fix: do not repeat them), keep (the task's decisions and conventions),
working_set {files, components}, interrupted_sessions (with reason and last progress),
context (all of it as one text block within max_tokens), tokens}. Every step any handoff
planned appears once; do not redo a step marked done.""",
       http=Http("POST", "/tasks/{task_id}/resume", "Everything needed to continue a task", empty_body_ok=True),
       cli=(Cli(("resume",), "Print what the next session needs to continue a task: plan, next step, pitfalls.",
                positional=("task_id",)),)),

    Op("claim_task", (
        Param("task_id", str, "Id from create_task or list_tasks."),
        TAKE_OVER,
    ), mcp="write", title="Claim a task", description="""\
Say that you are working on a task, so no other agent starts the same work. resume_task,
track_progress and session_handoff claim a task nobody holds anyway; call this to be sure
before you start. Refused with an error naming the holder (session, client, since, last
heard) when another live session holds it. A claim lasts while your session lives and lapses
when it ends, is interrupted or is silent for the claim timeout. take_over=true takes it from a
live holder (only when the user asked you to, or that session is stuck); it is told on its
next call. Returns {claimed: true, claim: {task_id, session_id, client, since, last_heard},
taken_over: the holder you replaced or null}.""",
       http=Http("POST", "/tasks/{task_id}/claim", "Claim a task for the calling session (409 when another holds it)",
                 empty_body_ok=True),
       cli=(Cli(("task", "claim"), "Claim a task for this command's session (--session ID to keep it; "
                "--take-over to take it from its holder).", positional=("task_id",)),)),

    Op("release_task", (
        Param("task_id", str, "Id of a task you hold."),
    ), mcp="write", title="Release a task", description="""\
Give up a task you hold (you stop working on it before it is done), so another agent can claim
it. Marking a task done or abandoned releases it too. Refused when another session holds it.
Returns {task_id, released: true if you held it}.""",
       http=Http("POST", "/tasks/{task_id}/release", "Release the calling session's claim on a task",
                 empty_body_ok=True),
       cli=(Cli(("task", "release"), "Release this session's claim on a task (see --session).",
                positional=("task_id",)),)),

    Op("report_interruption", (
        Param("reason", Literal[INTERRUPTION_REASONS], "context_overflow, rate_limit, user_stop or other."),  # type: ignore[valid-type]
        TASK_ID,
    ), mcp="write", title="Report an interruption", description="""\
Call when you are about to be cut off (context nearly full, rate limited, the user
stopping you), after session_handoff and track_progress. This session ends as interrupted
with that reason; the next session's recall reports it once, with your last progress, and
resume_task lists it. Returns {session_id, status: "interrupted", reason, task_id, ended_at}.""",
       http=Http("POST", "/interruptions", "End the calling session as interrupted, with a reason")),

    Op("track_failure", (
        Param("error", str, "What went wrong (the error message or symptom)."),
        Param("component", str, "The part of the system it happened in."),
        Param("root_cause", str, "Why it happened, if known.", ""),
        TASK_ID,
        Param("fix", str | None, "What fixed it, if anything.", None),
    ), mcp="write_idempotent", title="Record a failure", description="""\
Record an error, dead end or approach that did not work, so no session repeats it. Later
recalls touching the same component list it under related_failures. The same failure again
reinforces the existing record. Returns {action, memory_id, content, reason}.""",
       http=Http("POST", "/failures", "Record a failure (a pitfall for later sessions)", status=201),
       cli=(Cli(("failure",), "Record an error or dead end, so no session repeats it.", positional=("error",)),)),

    Op("track_progress", (
        Param("feature", str, "The feature or step this is about."),
        Param("status", Literal[PROGRESS_STATUSES], "planned, in_progress, blocked or done."),  # type: ignore[valid-type]
        Param("completion", float | None, "Fraction done, 0 to 1 (default: 1 when status is done, else 0).",
              None, ge=0, le=1),
        TASK_ID,
        Param("notes", str, "Details worth keeping.", ""),
    ), mcp="write", title="Record progress", description="""\
Record a milestone as you work (a step started, finished or blocked). Progress is what marks a
handoff's next steps as done, and what an interrupted session is resumed from.
Returns {memory_id, task_id, feature, status, completion, notes}.""",
       http=Http("POST", "/progress", "Record a progress snapshot", status=201),
       cli=(Cli(("progress",), "Record progress on a feature or step.", positional=("feature",)),)),

    Op("session_outcome", (
        Param("outcome", Literal[OUTCOMES], "success or failure."),  # type: ignore[valid-type]
        Param("notes", str, "Why it went that way.", ""),
    ), mcp="write", title="Report session outcome", description="""\
Say whether this session achieved what it set out to do. Memories from successful sessions
rank higher later; those from failed ones lower. Returns {session_id, outcome, notes}.""",
       http=Http("POST", "/outcomes", "Record how the calling session went"),
       cli=(Cli(("outcome",), "Say whether the session (see --session) achieved what it set out to do.",
                positional=("outcome",)),)),

    Op("consolidate_memory", (
        Param("apply", bool, "false: only report the plan; true: carry it out.", False),
    ), mcp="write", title="Consolidate memory", description="""\
Tidy memory: consolidate clusters of near-duplicate memories and prune decayed, unimportant
ones. Runs on a schedule anyway; call it with apply=false to preview, apply=true when asked to
clean up. Returns a report of what was (or would be) consolidated and pruned.""",
       # Over HTTP, POST /maintenance means "do it now"; apply=false previews.
       http=Http("POST", "/maintenance", "Consolidate and prune now", empty_body_ok=True,
                 defaults=(("apply", True),)),
       cli=(Cli(("consolidate",), "Merge near-duplicates and prune faded memories (dry run by default)."),)),

    Op("memory_stats", mcp="read", title="Memory statistics", description="""\
Counts and health of the memory store: memories by type and status, tasks, sessions,
index freshness and maintenance status. Use it when asked what engram holds.""",
       http=Http("GET", "/stats", "Counts, sizes and maintenance status"),
       cli=(Cli(("stats",), "Show counts, sizes and maintenance status."),)),

    # Not MCP tools: the CLI, the HTTP API and the daemon's clients use them.
    Op("get_memory", (
        Param("memory_id", str, "Id of the memory."),
        Param("around", int, "Also list this many memories before and after it in its session "
              "(0-20): what happened around an episode.", 0, ge=0, le=20),
    ), mcp="read", title="Get a memory", description="""\
One memory in full (from a compact recall_memory listing), with its history; with around=N, also
the N memories before and after it in the session it was stored in, one line each (what happened
around a captured turn). Returns {id, content, memory_type, tags, created_at, ..., around: [{id,
memory_type, line, when, tokens, position}]}.""",
       http=Http("GET", "/memories/{memory_id}", "One memory with its history (?around=N: its session's "
                 "neighbours)", query=("around",)),
       cli=(Cli(("show",), "Show one memory in full (--around N: the memories before and after it in its "
                "session).", positional=("memory_id",)),)),
    Op("memory_prompt", (ALL_PROJECTS,),
       cli=(Cli(("prompt",), "Print the memory rules for CLAUDE.md / AGENTS.md with the "
                "open tasks' state."),)),
    Op("list_projects", http=Http("GET", "/projects", "The projects the caller's memories and tasks belong to"),
       cli=(Cli(("projects",), "List the projects memories and tasks belong to, with their counts."),)),
    Op("export_memories", (Param("path", str, "File to write."),),
       cli=(Cli(("export",), "Write the user's memories, tasks, sessions and edges to a JSON Lines file.",
                positional=("path",)),)),
    Op("import_memories", (
        Param("path", str, "An `engram export` file."),
        Param("on_conflict", str, "error: refuse a file with ids that exist; skip: keep those rows.", "error"),
        Param("reembed", bool, "Accept a file embedded with another model and embed it again.", False),
    )),
    Op("import_from", (
        Param("source", str, "mcp-memory, mem0 or markdown."),
        Param("path", str, "The file (or folder of notes) to read."),
        Param("dry_run", bool, "Show what would be stored; store nothing.", False),
    )),
    Op("reindex", (
        Param("reembed", bool, "Also re-embed every memory with the current model (after changing "
              "ENGRAM_MODEL).", False),
    ), cli=(Cli(("reindex",), "Rebuild the derived indexes (vectors, BM25, graph) from the stored rows."),)),
    # Curation: the web panel at /ui (engram.panel) is a client of these.
    Op("list_memories", (
        Param("memory_type", MemoryTypeT | None, "Only this kind of memory.", None),
        Param("task_id", str | None, "Only memories of this task.", None),
        Param("tag", str | None, "Only memories with this tag.", None),
        Param("as_of", str | None, "ISO date/time: the memories that were valid then.", None),
        Param("status", Literal["active", "superseded", "consolidated", "any"],
              "active (default), superseded, consolidated or any.", "active"),
        Param("offset", int, "Matches to skip (paging).", 0, ge=0, le=1_000_000_000),
        Param("limit", int, "Memories per page (1-500).", 50, ge=1, le=500),
        Param("in_project", str | None, "Only memories of this project (an id from GET /projects); "
              "empty: only those of no project; left out: every project's.", None),
    ), http=Http("GET", "/memories", "A page of memories, newest first "
                 "(?memory_type=, ?task_id=, ?tag=, ?as_of=, ?status=, ?offset=, ?limit=, ?in_project=)",
                 query=("memory_type", "task_id", "tag", "as_of", "status", "offset", "limit", "in_project"))),
    Op("pin_memory", (
        Param("memory_id", str, "Id of the memory."),
        Param("pinned", bool, "false unpins.", True),
    ), http=Http("POST", "/memories/{memory_id}/pin", "Pin or unpin a memory", empty_body_ok=True)),
    Op("memory_strength", (
        Param("memory_id", str, "Id of the memory."),
        Param("days", int, "Days to project ahead (1-3650).", 90, ge=1, le=3650),
    ), http=Http("GET", "/memories/{memory_id}/strength",
                 "Strength since the last recall and projected (?days=)", query=("days",))),
    Op("memory_versions", (Param("memory_id", str, "Id of the memory."),),
       http=Http("GET", "/memories/{memory_id}/versions",
                 "The supersession chain and consolidation sources of a memory")),
    Op("task_sessions", (Param("task_id", str, "Id of the task."),),
       http=Http("GET", "/tasks/{task_id}/sessions", "The sessions that worked on a task")),
    # The agent lifecycle hooks (`engram hook`, engram.hooks): what a session starts with, the
    # memories a prompt bears on, and the automatic checkpoint before the context is lost.
    Op("session_start", (
        Param("max_tokens", int, "Token budget for the block (50-100000).", 1500, **TOKENS),
    )),
    Op("prompt_memories", (
        Param("prompt", str, "The prompt the user submitted."),
        Param("max_tokens", int, "Token budget for the block (50-100000).", 300, **TOKENS),
        Param("limit", int, "Most memories to show (1-20).", 3, ge=1, le=20),
    )),
    Op("session_checkpoint", (
        Param("summary", str, "What the session touched, as the checkpoint's summary."),
        Param("completed", Items, "Todo items done.", None),
        Param("in_progress", Items, "Todo items started.", None),
        Param("blocked", Items, "Todo items blocked.", None),
        Param("next_steps", Items, "The todo list, in order.", None),
        Param("step_statuses", list[Literal["pending", "in_progress", "done", "blocked"]] | None,
              "The status of each next step, as the todo list gave it.", None),
        Param("failures", list[dict[str, Any]] | None, "Failed commands: [{error, component}].", None),
        Param("task_id", str | None, "The task the transcript shows the session working on.", None),
        Param("checkpoint", dict[str, Any], "The checkpoint's record (digest, client, event, plan, files, "
              "commands, requests, git)."),
        Param("interrupted", bool, "The context is being compacted automatically: also report the "
              "interruption (context_overflow).", False),
    )),
    Op("capture_conventions", (
        Param("prompts", list[str], "The user's prompts (at most 500); the sentences that state a "
              "convention of the project are stored as its facts."),
    )),
    Op("session_capture", (
        Param("fixes", list[dict[str, Any]] | None, "Errors fixed by edits: [{program, signature, location, "
              "command, passed, edits: [{file, hunk}], key}] (engram.continuity.fixes.Fix).", None),
        Param("episodes", list[dict[str, str]] | None, "Finished turns: [{request, answer}].", None),
        Param("task_id", str | None, "The task the transcript shows the session working on.", None),
        Param("client", str, "The coding agent the session runs in.", ""),
    )),
    Op("run_maintenance"),
    Op("health"),
    Op("migrate_store", (
        Param("target", str, "A postgresql:// URL or a DuckDB file path to copy the whole store into.",
              flag="--to"),
        Param("force", bool, "Add to a target that already holds rows (ids it has are skipped).", False),
    ), cli=(Cli(("migrate",), "Copy the whole store (every user) into another database and verify the copy."),)),
    Op("backup_store", (
        Param("dest", str | None, "File or existing folder to write the backup to (default: the "
              "backups folder beside the database, ENGRAM_HOME/backups).", None),
    ), cli=(Cli(("backup",), "Write a consistent copy of the DuckDB store while the daemon serves, "
                "check it, and print where it is.", positional=("dest",)),)),
    Op("scrub_store", (
        Param("apply", bool, "Rewrite what is found, after keeping a copy of the store as it was; "
              "without it, only show what would change.", False),
    ), cli=(Cli(("scrub",), "Find secrets and <private> spans already stored (memories, handoffs, their "
                "history, tasks, sessions) with the redactor every write passes; --apply rewrites them."),)),
    # Per-user keys (engram.admin.keys): local administration only, never an HTTP route or MCP tool,
    # so a key holder cannot make, list or revoke keys.
    Op("create_key", (
        Param("user_id", str, "The user the key acts as.", flag="--user"),
        Param("label", str | None, "Whose or what the key is for, e.g. 'alice laptop'.", None),
    ), cli=(Cli(("keys", "create"), "Make a key for a user: printed once, only its hash is kept."),)),
    Op("list_keys", (
        Param("user_id", str | None, "Only this user's keys.", None, flag="--user"),
    ), cli=(Cli(("keys", "list"), "List keys: id, user, label, created, revoked (never a key)."),)),
    Op("revoke_key", (
        Param("key_id", str, "Id from `keys create` or `keys list`."),
    ), cli=(Cli(("keys", "revoke"), "Revoke a key: the next request that sends it is refused.",
                positional=("key_id",)),)),
)
OPS: dict[str, Op] = {op.name: op for op in OPS_LIST}
TOOLS: tuple[str, ...] = tuple(op.name for op in OPS_LIST if op.mcp is not None)


# ---------------------------------------------------------------- the argument check


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


# ---------------------------------------------------------------- models derived from the declarations


def _model(model_name: str, params: tuple[Param, ...], defaults: dict[str, Any]) -> Any:
    from pydantic import ConfigDict, create_model
    fields = {p.name: (p.annotated(), defaults.get(p.name, p.default if not p.required else ...))
              for p in params}
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


# ---------------------------------------------------------------- the JSON encoder


def json_default(o: Any) -> Any:
    """What every adapter (HTTP, the daemon's socket, the CLI) makes of values JSON has no type for."""
    if isinstance(o, datetime | date | time):
        return o.isoformat()
    if type(o).__module__ == "numpy":
        # Imported lazily: a client process should not pay for numpy.
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        # Domain types curate their wire form in to_dict(); others get every field.
        to_dict = getattr(o, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(o)
    if isinstance(o, set | frozenset):
        try:
            return sorted(o)
        except TypeError:
            return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"{type(o).__name__} is not JSON serializable")


def dumps(obj: Any, **kw: Any) -> str:
    """JSON text with the shared encoder; keyword arguments as json.dumps (indent, separators...)."""
    return json.dumps(obj, default=json_default, **kw)
