"""The operations of the agents' lifecycle hooks (`engram hook`): session start, each prompt, checkpoints, capture."""

from __future__ import annotations

from typing import Any, Literal

from engram.core.bounds import MAX_TOKENS, PROMPT_LIMIT
from engram.ops.declarations import Items, Op, Param

HOOK_OPS = (
    # The agent lifecycle hooks (`engram hook`, engram.hooks): what a session starts with, the
    # memories a prompt bears on, and the automatic checkpoint before the context is lost.
    Op("session_start", (Param("max_tokens", int, "Token budget for the block (50-100000).", 1500, bound=MAX_TOKENS),)),
    Op(
        "prompt_memories",
        (
            Param("prompt", str, "The prompt the user submitted."),
            Param("max_tokens", int, "Token budget for the block (50-100000).", 300, bound=MAX_TOKENS),
            Param("limit", int, "Most memories to show (1-20).", 3, bound=PROMPT_LIMIT),
        ),
    ),
    Op(
        "session_checkpoint",
        (
            Param("summary", str, "What the session touched, as the checkpoint's summary."),
            Param("completed", Items, "Todo items done.", None),
            Param("in_progress", Items, "Todo items started.", None),
            Param("blocked", Items, "Todo items blocked.", None),
            Param("next_steps", Items, "The todo list, in order.", None),
            Param(
                "step_statuses",
                list[Literal["pending", "in_progress", "done", "blocked"]] | None,
                "The status of each next step, as the todo list gave it.",
                None,
            ),
            Param("failures", list[dict[str, Any]] | None, "Failed commands: [{error, component}].", None),
            Param("task_id", str | None, "The task the transcript shows the session working on.", None),
            Param(
                "checkpoint",
                dict[str, Any],
                "The checkpoint's record (digest, client, event, plan, files, commands, requests, git).",
            ),
            Param(
                "interrupted",
                bool,
                "The context is being compacted automatically: also report the interruption (context_overflow).",
                False,
            ),
        ),
    ),
    Op(
        "capture_conventions",
        (
            Param(
                "prompts",
                list[str],
                "The user's prompts (at most 500); the sentences that state a "
                "convention of the project are stored as its facts.",
            ),
            Param(
                "answers",
                list[dict[str, str]] | None,
                "Prompts with the agent's message they answer: [{prompt, offered}] (at most 500); "
                "a short answer that picks an option the message offered is stored as the decision it makes.",
                None,
            ),
        ),
    ),
    Op(
        "session_capture",
        (
            Param(
                "fixes",
                list[dict[str, Any]] | None,
                "Errors fixed by edits or by a changed command: [{program, signature, location, "
                "command, passed, edits: [{file, hunk}], key, fix_commands?, origin?}] "
                "(engram.continuity.fixes.Fix; origin agent-run or user-pasted).",
                None,
            ),
            Param("episodes", list[dict[str, str]] | None, "Finished turns: [{request, answer}].", None),
            Param("task_id", str | None, "The task the transcript shows the session working on.", None),
            Param("client", str, "The coding agent the session runs in.", ""),
        ),
    ),
)
