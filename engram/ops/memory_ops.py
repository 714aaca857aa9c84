"""The operations on memories: search, write, correct, forget, the context block; their upkeep and curation."""

from __future__ import annotations

from typing import Literal

from engram.core.bounds import AROUND, IMPORTANCE, MAX_TOKENS, OFFSET, PAGE_LIMIT, RECALL_LIMIT, STRENGTH_DAYS
from engram.ops.declarations import (
    ALL_PROJECTS,
    METADATA,
    SCOPE,
    TAGS,
    TASK_ID,
    Cli,
    Http,
    Items,
    MemoryTypeT,
    Op,
    Param,
    SearchModeT,
    TierT,
)

# The first MCP tools the calling model sees, in this order (engram.ops.table).
MEMORY_TOOLS = (
    Op(
        "recall_memory",
        (
            Param("query", str, "What you need to know, in plain words."),
            Param("limit", int, "Most memories to return (1-1000).", 10, bound=RECALL_LIMIT),
            Param("memory_type", MemoryTypeT | None, "Only this kind of memory.", None, flag="--type"),
            TASK_ID,
            TAGS,
            Param("as_of", str | None, "ISO date/time: answer as the memory stood then (no reinforcement).", None),
            Param("mode", SearchModeT, "hybrid (default), bm25 (exact words) or vector.", "hybrid"),
            Param("explain", bool, "Include each hit's score breakdown.", False),
            ALL_PROJECTS,
            Param(
                "compact",
                bool,
                "List each memory in one line (id, memory_type, line, when, tokens) "
                "instead of its full text; then get_memory the ids you need.",
                False,
            ),
        ),
        mcp="read",
        title="Recall memories",
        description="""\
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
        cli=(Cli(("recall",), "Search memories by meaning and keywords.", positional=("query",)),),
    ),
    Op(
        "store_memory",
        (
            Param("content", str, "One self-contained fact, decision or lesson."),
            Param(
                "memory_type",
                MemoryTypeT,
                "fact, strategy (how to do something), assumption, failure, handoff or progress.",
                "fact",
                flag="--type",
            ),
            Param("importance", float, "0 (trivia) to 1 (critical).", 0.5, bound=IMPORTANCE),
            TAGS,
            TASK_ID,
            METADATA,
            Param("pinned", bool, "Never decay or prune this memory.", False, flag="--pin"),
            Param(
                "conversation",
                str | None,
                (
                    "Only for turns of a conversation (e.g. importing a chat): the conversation's id. Turns "
                    "of one conversation are searched with the turns just before them, and each turn is "
                    "kept as said (never merged into or replacing another memory); leave it out for a "
                    "self-contained memory."
                ),
                None,
            ),
            SCOPE,
            Param(
                "tier",
                TierT | None,
                (
                    "How long it lasts: working (scratch for this task, fades in days), episodic (what "
                    "happened), semantic (what is true), procedural (a rule for how to work, close to "
                    "permanent). Left out: from its type."
                ),
                None,
            ),
            Param(
                "ttl_days",
                float | None,
                "Days after which it expires: never returned again and removed by maintenance.",
                None,
                ge=0.001,
                le=36500,
                flag="--ttl",
            ),
        ),
        mcp="write_idempotent",
        title="Store a memory",
        description="""\
Remember something worth knowing in a later session: a decision and its reason, a project
convention, a user preference, a working command, a lesson learned. Write it so it makes sense
on its own. Do not store secrets or transient chatter.

engram resolves it against what it already knows and returns {action, memory_id, content,
reason, ...}: action is new, reinforce (already known; strengthened), merge (added to a
close memory, both texts kept as written), or replace (contradicts and supersedes
previous_id). The text is stored exactly as sent. Content over 1000
characters is split into linked chunks (chunk_ids); over 100,000 characters is refused.""",
        http=Http("POST", "/memories", "Store a memory (resolved against what is known)"),
        cli=(Cli(("remember",), "Store a memory (resolved against what is already known).", positional=("content",)),),
    ),
    Op(
        "update_memory",
        (
            Param("memory_id", str, "Id of the memory to rewrite."),
            Param("content", str, "The corrected full text."),
        ),
        mcp="write",
        title="Update a memory",
        description="""\
Rewrite a memory you recalled that is wrong, outdated or should absorb new detail. The old
text stays in its history; the same text writes nothing. A handoff, failure or progress record
is not rewritten (its text is made from the fields the plan reads): record a new one.
Returns {action: "update", memory_id, content, previous_id}.""",
        http=Http("PATCH", "/memories/{memory_id}", "Rewrite a memory's content (its history keeps the old text)"),
    ),
    Op(
        "forget_memory",
        (
            Param("memory_id", str | None, "Id of one memory to delete.", None),
            Param("query", str | None, "Delete every memory containing all these words.", None),
            Param("dry_run", bool, "Only list what would be deleted.", False),
            Param(
                "all_projects",
                bool,
                "With query: match every project's memories, not only this project's and the global ones.",
                False,
            ),
        ),
        mcp="destructive",
        title="Forget memories",
        description="""\
Permanently delete memories: give exactly one of memory_id or query. Use it when the user asks
you to forget something or a memory holds data that must not be kept; use update_memory to
correct instead. Irreversible: run with dry_run=true first when deleting by query.
Returns {deleted: [ids], would_delete: [ids], count, dry_run}.""",
        http=Http("DELETE", "/memories/{memory_id}", "Delete a memory for good"),
        cli=(
            Cli(
                ("forget",),
                "Delete memories for good: one by id, or all that match every word of --query.",
                positional=("memory_id",),
            ),
        ),
    ),
    Op(
        "get_context",
        (
            Param("query", str, "What you are about to work on."),
            Param("max_tokens", int, "Token budget for the block (50-100000).", 1500, bound=MAX_TOKENS),
            TASK_ID,
            Param("limit", int, "Most memories to consider.", 20, bound=RECALL_LIMIT),
            Param(
                "tags", Items, "Only memories with at least one of these tags, e.g. ['billing'].", None, flag="--tag"
            ),
            ALL_PROJECTS,
        ),
        mcp="read",
        title="Get context block",
        description="""\
Like recall_memory, but returns one ready-to-read <memory> text block that fits a token budget:
the latest handoff with next-step status, relevant memories, then pitfalls. Use it to prime
yourself at the start of a session. Only strong matches go in (recall_memory also shows the weak
ones), so an empty block means nothing stored clearly concerns the query. Returns {context,
tokens, memory_ids, interrupted_sessions}.""",
        http=Http("POST", "/context", "A token-budgeted memory block for a prompt"),
        cli=(Cli(("context",), "Print a token-budgeted memory block to paste into a prompt.", positional=("query",)),),
    ),
)

# Listed to the model after the task tools.
MORE_MEMORY_TOOLS = (
    Op(
        "consolidate_memory",
        (Param("apply", bool, "false: only report the plan; true: carry it out.", False),),
        mcp="write",
        title="Consolidate memory",
        description="""\
Tidy memory: write gists of captures that recur across sessions, consolidate clusters of
near-duplicate memories and prune decayed, unimportant ones. Runs on a schedule anyway; call it
with apply=false to preview, apply=true when asked to clean up. Returns a report of what was (or
would be) written, consolidated and pruned.""",
        # Over HTTP, POST /maintenance means "do it now"; apply=false previews.
        http=Http("POST", "/maintenance", "Consolidate and prune now", empty_body_ok=True, defaults=(("apply", True),)),
        cli=(
            Cli(
                ("consolidate",),
                "Write gists of recurring captures, merge near-duplicates, prune faded memories (dry run by default).",
            ),
        ),
    ),
    Op(
        "prune_memories",
        (
            Param("keep", int, "How many of the strongest unprotected memories to keep.", ge=0, le=10_000_000),
            Param("apply", bool, "false: only report what would go; true: remove it.", False),
            Param(
                "all_projects",
                bool,
                "Every project's memories of yours, not only those of the project you are in.",
                False,
            ),
        ),
        title="Keep the strongest memories",
        http=Http("POST", "/prune", "Keep the N strongest unprotected memories of a scope (apply=false previews)"),
        cli=(
            Cli(
                ("prune",),
                "Keep only the N strongest unprotected memories of this project (dry run by default; --apply removes).",
            ),
        ),
    ),
    Op(
        "memory_stats",
        mcp="read",
        title="Memory statistics",
        description="""\
Counts and health of the memory store: memories by type and status, tasks, sessions,
index freshness and maintenance status. Use it when asked what engram holds.""",
        http=Http("GET", "/stats", "Counts, sizes and maintenance status"),
        cli=(Cli(("stats",), "Show counts, sizes and maintenance status."),),
    ),
    # What a compact recall_memory listing points to: one memory in full, and its session around it.
    Op(
        "get_memory",
        (
            Param("memory_id", str, "Id of the memory."),
            Param(
                "around",
                int,
                "Also list this many memories before and after it in its session "
                "(0-20): what happened around an episode.",
                0,
                bound=AROUND,
            ),
        ),
        mcp="read",
        title="Get a memory",
        description="""\
One memory in full (from a compact recall_memory listing), with its history; with around=N, also
the N memories before and after it in the session it was stored in, one line each (what happened
around a captured turn). Returns {id, content, memory_type, tags, created_at, ..., around: [{id,
memory_type, line, when, tokens, position}]}.""",
        http=Http(
            "GET",
            "/memories/{memory_id}",
            "One memory with its history (?around=N: its session's neighbours)",
            query=("around",),
        ),
        cli=(
            Cli(
                ("show",),
                "Show one memory in full (--around N: the memories before and after it in its session).",
                positional=("memory_id",),
            ),
        ),
    ),
)

CURATION = (
    # Curation: the web panel at /ui (engram.panel) is a client of these.
    Op(
        "list_memories",
        (
            Param("memory_type", MemoryTypeT | None, "Only this kind of memory.", None),
            Param("task_id", str | None, "Only memories of this task.", None),
            Param("tag", str | None, "Only memories with this tag.", None),
            Param("as_of", str | None, "ISO date/time: the memories that were valid then.", None),
            Param(
                "status",
                Literal["active", "superseded", "consolidated", "any"],
                "active (default), superseded, consolidated or any.",
                "active",
            ),
            Param("offset", int, "Matches to skip (paging).", 0, bound=OFFSET),
            Param("limit", int, "Memories per page (1-500).", 50, bound=PAGE_LIMIT),
            Param(
                "in_project",
                str | None,
                "Only memories of this project (an id from GET /projects); "
                "empty: only those of no project; left out: every project's.",
                None,
            ),
        ),
        http=Http(
            "GET",
            "/memories",
            "A page of memories, newest first "
            "(?memory_type=, ?task_id=, ?tag=, ?as_of=, ?status=, ?offset=, ?limit=, ?in_project=)",
            query=("memory_type", "task_id", "tag", "as_of", "status", "offset", "limit", "in_project"),
        ),
    ),
    Op(
        "pin_memory",
        (
            Param("memory_id", str, "Id of the memory."),
            Param("pinned", bool, "false unpins.", True),
        ),
        http=Http("POST", "/memories/{memory_id}/pin", "Pin or unpin a memory", empty_body_ok=True),
    ),
    Op(
        "set_tier",
        (
            Param("memory_id", str, "Id of the memory."),
            Param("tier", TierT, "working, episodic, semantic or procedural."),
        ),
        mcp="write",
        title="Move a memory to another tier",
        description="""\
Move a memory to another tier when the user asks how long it should last: working (scratch,
fades in days), episodic (what happened), semantic (what is true), procedural (a rule for how to
work, close to permanent). The move is recorded in its history. Returns {memory_id, tier, was,
action}.""",
        http=Http("POST", "/memories/{memory_id}/tier", "Move a memory to another tier (recorded in its history)"),
        cli=(
            Cli(
                ("tier",),
                "Move a memory to another tier (working, episodic, semantic, procedural).",
                positional=("memory_id", "tier"),
            ),
        ),
    ),
    # The user vouching for what capture stored: not an MCP tool (an agent has no view to judge it).
    Op(
        "keep_memory",
        (Param("memory_id", str, "Id of the memory."),),
        http=Http(
            "POST",
            "/memories/{memory_id}/keep",
            "Keep a memory captured automatically: it loses its automatic mark and an episode becomes a fact",
            empty_body_ok=True,
        ),
        cli=(
            Cli(
                ("keep",),
                "Keep a memory captured automatically (an episode becomes a fact; the mark goes).",
                positional=("memory_id",),
            ),
        ),
    ),
    Op(
        "memory_strength",
        (
            Param("memory_id", str, "Id of the memory."),
            Param("days", int, "Days to project ahead (1-3650).", 90, bound=STRENGTH_DAYS),
        ),
        http=Http(
            "GET",
            "/memories/{memory_id}/strength",
            "Strength since the last recall and projected (?days=)",
            query=("days",),
        ),
    ),
    Op(
        "memory_versions",
        (Param("memory_id", str, "Id of the memory."),),
        http=Http(
            "GET", "/memories/{memory_id}/versions", "The supersession chain and consolidation sources of a memory"
        ),
    ),
    Op(
        "task_sessions",
        (Param("task_id", str, "Id of the task."),),
        http=Http("GET", "/tasks/{task_id}/sessions", "The sessions that worked on a task"),
    ),
)
