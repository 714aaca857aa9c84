"""The operations on tasks and sessions: handoffs, tasks and claims, interruptions, failures, progress, outcomes."""

from __future__ import annotations

from typing import Any, Literal

from engram.core.bounds import COMPLETION, MAX_TOKENS, TASK_LIMIT
from engram.core.types import INTERRUPTION_REASONS, OUTCOMES, PROGRESS_STATUSES
from engram.ops.declarations import (
    ALL_PROJECTS,
    SCOPE,
    TAKE_OVER,
    TASK_ID,
    Cli,
    Http,
    Items,
    Op,
    Param,
    TaskStatusT,
)

# MCP tools, listed to the calling model after the memory tools, in this order.
TASK_TOOLS = (
    Op(
        "session_handoff",
        (
            Param("summary", str, "What this session was about and where it stands."),
            Param("completed", Items, "Things finished in this session.", None),
            Param("in_progress", Items, "Things started but not finished.", None),
            Param("blocked", Items, "Things blocked, with what blocks them.", None),
            Param("next_steps", Items, "Concrete next actions for the next session.", None, flag="--next"),
            TASK_ID,
        ),
        mcp="write",
        title="Write a session handoff",
        description="""\
Call before you end a session (or when context is running out) so the next session can
continue where you stopped. The next recall_memory/get_context pins it first and checks each
next step against work done since. Returns {handoff_id, memory_id, task_id, created_at}.""",
        http=Http("POST", "/handoffs", "Record a session handoff", status=201),
        cli=(
            Cli(
                ("handoff",), "Record where the work stands, for the next session to pick up.", positional=("summary",)
            ),
        ),
    ),
    Op(
        "create_task",
        (
            Param("name", str, "Short name of the piece of work."),
            Param("goal", str, "What done looks like.", ""),
            Param("metadata", dict[str, Any] | None, "Extra JSON (e.g. branch, issue).", None),
            SCOPE,
        ),
        mcp="write",
        title="Create a task",
        description="""\
Start tracking work that may span sessions (a feature, a bug, a migration). Pass the returned
task_id to store_memory, track_progress, track_failure and session_handoff so get_task can show
the whole story later. Returns {task_id, name, goal, status: "open", ...}.""",
        http=Http("POST", "/tasks", "Create a task", status=201),
        cli=(Cli(("task", "create"), "Start tracking a task.", positional=("name",)),),
    ),
    Op(
        "update_task",
        (
            Param("task_id", str, "Id from create_task."),
            Param("status", TaskStatusT | None, "open, in_progress, blocked, done or abandoned.", None),
            Param("goal", str | None, "New goal text.", None),
            Param("metadata", dict[str, Any] | None, "Keys to add or overwrite.", None),
            Param("name", str | None, "New name.", None),
        ),
        mcp="write",
        title="Update a task",
        description="""\
Change a task's status (mark it done or blocked), goal, name or metadata. Give at least one.
Returns the task {task_id, name, goal, status, metadata, ...}.""",
        http=Http("PATCH", "/tasks/{task_id}", "Change a task's status, goal, name or metadata"),
        cli=(Cli(("task", "update"), "Change a task's status, goal or name.", positional=("task_id",)),),
    ),
    Op(
        "get_task",
        (
            Param("task_id", str, "Id from create_task."),
            Param(
                "limit",
                int,
                "Newest entries of each list to return (1-1000); counts has the totals.",
                50,
                bound=TASK_LIMIT,
            ),
        ),
        mcp="read",
        title="Get a task",
        description="""\
Everything about one task: the task, a timeline of its memories, its handoffs, failures
and progress (the newest `limit` of each, in time order; counts gives how many there are),
latest_handoff with each next step marked done, in_progress or not_started by the work
recorded since, and plan: every step any of its handoffs planned, once, with status done,
in_progress, not_started or dropped, its evidence and the handoffs that planned it. Returns
{task, held_by (the session working on it now, or null), timeline, handoffs, failures,
progress, memories, counts, latest_handoff, plan}. Reading it claims nothing.
For a compact continuation use resume_task.""",
        http=Http(
            "GET", "/tasks/{task_id}", "A task with its timeline, plan and latest handoff (?limit=)", query=("limit",)
        ),
        cli=(Cli(("task", "show"), "Show a task with its timeline and latest handoff.", positional=("task_id",)),),
    ),
    Op(
        "list_tasks",
        (
            Param(
                "status",
                TaskStatusT | None,
                "Only tasks with this status (open, in_progress, blocked, done, abandoned).",
                None,
            ),
            Param("limit", int, "Most tasks to return (1-1000).", 50, bound=TASK_LIMIT),
            ALL_PROJECTS,
        ),
        mcp="read",
        title="List tasks",
        description="""\
The tasks you can resume, when you start fresh and do not know their ids: open ones
(open, in_progress, blocked) first, each group by last activity, newest first.
Returns {tasks: [{id, name, goal, status, held_by, last_activity_at, last_activity: {at,
memory_type, content}, ...}]}: the project you work in and those of no project
(all_projects: every project's). held_by names the session working on a task now ({session_id,
client, since, last_heard, this_session: true when it is you}; null when nobody is): prefer
tasks nobody else holds. Then call resume_task(task_id).""",
        http=Http(
            "GET",
            "/tasks",
            "List tasks, open first, with their last activity (?status=, ?limit=)",
            query=("status", "limit", "all_projects"),
        ),
        cli=(
            Cli(("task", "list"), "List tasks, newest first.", params=("status", "all_projects")),
            Cli(("tasks",), "List tasks, open ones first, with their last activity."),
        ),
    ),
    Op(
        "resume_task",
        (
            Param("task_id", str, "Id from create_task or list_tasks."),
            Param("max_tokens", int, "Token budget for the text block (50-100000).", 2000, bound=MAX_TOKENS),
            TAKE_OVER,
            Param("claim", bool, "false: only read; claim nothing (as the MCP resources read it).", True),
        ),
        mcp="write_idempotent",
        title="Resume a task",
        description="""\
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
        cli=(
            Cli(
                ("resume",),
                "Print what the next session needs to continue a task: plan, next step, pitfalls.",
                positional=("task_id",),
            ),
        ),
    ),
    Op(
        "claim_task",
        (
            Param("task_id", str, "Id from create_task or list_tasks."),
            TAKE_OVER,
        ),
        mcp="write",
        title="Claim a task",
        description="""\
Say that you are working on a task, so no other agent starts the same work. resume_task,
track_progress and session_handoff claim a task nobody holds anyway; call this to be sure
before you start. Refused with an error naming the holder (session, client, since, last
heard) when another live session holds it. A claim lasts while your session lives and lapses
when it ends, is interrupted or is silent for the claim timeout. take_over=true takes it from a
live holder (only when the user asked you to, or that session is stuck); it is told on its
next call. Returns {claimed: true, claim: {task_id, session_id, client, since, last_heard},
taken_over: the holder you replaced or null}.""",
        http=Http(
            "POST",
            "/tasks/{task_id}/claim",
            "Claim a task for the calling session (409 when another holds it)",
            empty_body_ok=True,
        ),
        cli=(
            Cli(
                ("task", "claim"),
                "Claim a task for this command's session (--session ID to keep it; "
                "--take-over to take it from its holder).",
                positional=("task_id",),
            ),
        ),
    ),
    Op(
        "release_task",
        (Param("task_id", str, "Id of a task you hold."),),
        mcp="write",
        title="Release a task",
        description="""\
Give up a task you hold (you stop working on it before it is done), so another agent can claim
it. Marking a task done or abandoned releases it too. Refused when another session holds it.
Returns {task_id, released: true if you held it}.""",
        http=Http(
            "POST", "/tasks/{task_id}/release", "Release the calling session's claim on a task", empty_body_ok=True
        ),
        cli=(
            Cli(
                ("task", "release"), "Release this session's claim on a task (see --session).", positional=("task_id",)
            ),
        ),
    ),
    Op(
        "report_interruption",
        (
            Param("reason", Literal[INTERRUPTION_REASONS], "context_overflow, rate_limit, user_stop or other."),
            TASK_ID,
        ),
        mcp="write",
        title="Report an interruption",
        description="""\
Call when you are about to be cut off (context nearly full, rate limited, the user
stopping you), after session_handoff and track_progress. This session ends as interrupted
with that reason; the next session's recall reports it once, with your last progress, and
resume_task lists it. Returns {session_id, status: "interrupted", reason, task_id, ended_at}.""",
        http=Http("POST", "/interruptions", "End the calling session as interrupted, with a reason"),
    ),
    Op(
        "track_failure",
        (
            Param("error", str, "What went wrong (the error message or symptom)."),
            Param("component", str, "The part of the system it happened in."),
            Param("root_cause", str, "Why it happened, if known.", ""),
            TASK_ID,
            Param("fix", str | None, "What fixed it, if anything.", None),
        ),
        mcp="write_idempotent",
        title="Record a failure",
        description="""\
Record an error, dead end or approach that did not work, so no session repeats it. Later
recalls touching the same component list it under related_failures. The same failure again
reinforces the existing record. Returns {action, memory_id, content, reason}.""",
        http=Http("POST", "/failures", "Record a failure (a pitfall for later sessions)", status=201),
        cli=(Cli(("failure",), "Record an error or dead end, so no session repeats it.", positional=("error",)),),
    ),
    Op(
        "track_progress",
        (
            Param("feature", str, "The feature or step this is about."),
            Param("status", Literal[PROGRESS_STATUSES], "planned, in_progress, blocked or done."),
            Param(
                "completion",
                float | None,
                "Fraction done, 0 to 1 (default: 1 when status is done, else 0).",
                None,
                bound=COMPLETION,
            ),
            TASK_ID,
            Param("notes", str, "Details worth keeping.", ""),
        ),
        mcp="write",
        title="Record progress",
        description="""\
Record a milestone as you work (a step started, finished or blocked). Progress is what marks a
handoff's next steps as done, and what an interrupted session is resumed from.
Returns {memory_id, task_id, feature, status, completion, notes}.""",
        http=Http("POST", "/progress", "Record a progress snapshot", status=201),
        cli=(Cli(("progress",), "Record progress on a feature or step.", positional=("feature",)),),
    ),
    Op(
        "session_outcome",
        (
            Param("outcome", Literal[OUTCOMES], "success or failure."),
            Param("notes", str, "Why it went that way.", ""),
        ),
        mcp="write",
        title="Report session outcome",
        description="""\
Say whether this session achieved what it set out to do. Memories from successful sessions
rank higher later; those from failed ones lower. Returns {session_id, outcome, notes}.""",
        http=Http("POST", "/outcomes", "Record how the calling session went"),
        cli=(
            Cli(
                ("outcome",),
                "Say whether the session (see --session) achieved what it set out to do.",
                positional=("outcome",),
            ),
        ),
    ),
)
